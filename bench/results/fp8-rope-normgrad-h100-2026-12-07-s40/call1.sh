#!/usr/bin/env bash
# Session 40: the norm backward's FP8 cast in the same pass (session 39,
# 675d232, "fp8-normgrad") and the backward's ropes computed by the dqkv
# cast (this session, "fp8-rope", which has both), against main's fp8 step
# of session 38 (steps/main). Kernel tests, deterministic bit-identity of
# the losses (main vs rope), two speed rounds, the new step's --profile.
set -u
D=.devrun-s40speed M=.devrun-s40speed/steps/main
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $OUT/r/gpu.txt 2>&1
cat $OUT/r/gpu.txt
for p in lib data bin steps; do tar -C $D -xf $D/$p.tar.*; done
export LD_LIBRARY_PATH=$PWD/$D/lib
source tests/gpu/cudnn_path.sh
for t in norm_grad_fp8_test fp8_rope_cast_test; do
  timeout 150 $D/bin/$t --seed 40 > $OUT/r/$t.log 2>&1; echo "$t rc=$? $(grep -c '^ok' $OUT/r/$t.log) ok, $(grep -c FAIL $OUT/r/$t.log) FAIL; $(tail -1 $OUT/r/$t.log)"
  grep FAIL $OUT/r/$t.log | head -3
  timeout 90 $D/bin/$t --seed 41 --bench > $OUT/r/${t%_test}_bench.log 2>&1; tail -4 $OUT/r/${t%_test}_bench.log
done
tar -C $OUT -cf $OUT/r1.tar r
one() { name=$1 step=$2 steps=$3; shift 3
  timeout 150 $D/bin/trun $step --data $D/data/text_train.bin --steps $steps --seed 0 --log-every 50 --metrics $OUT/r/$name.jsonl "$@" > $OUT/r/$name.log 2>&1
  echo "$name rc=$? $(grep -c '"kind": *"step"' $OUT/r/$name.jsonl) steps; $(grep trained $OUT/r/$name.log)"; }
one det_main $M/llama1b_fp8-det.so 12
one det_rope $D/steps/llama1b_fp8-rope-det.so 12
python3 - $OUT/r/det_main.jsonl $OUT/r/det_rope.jsonl <<'PY' | tee $OUT/r/det-compare.txt
import json, sys
def losses(p):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(p)) if r.get("kind") == "step"]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
same = sum(1 for x, y in zip(a, b) if x == y)
print(f"deterministic fp8 steps, main vs rope: {same} of {len(a)} losses bit-identical ({len(b)} new)")
for x, y in zip(a, b):
    if x != y:
        print("first difference:", x, y); break
PY
tar -C $OUT -cf $OUT/r2.tar r && rm -f $OUT/r1.tar
for r in 1 2; do
  one round${r}_llama1b_bf16 $M/llama1b_bf16.so 30
  one round${r}_llama1b_fp8 $M/llama1b_fp8.so 30
  one round${r}_llama1b_fp8-normgrad $D/steps/llama1b_fp8-normgrad.so 30
  one round${r}_llama1b_fp8-rope $D/steps/llama1b_fp8-rope.so 30
  python3 bench/fp8/table.py rounds --out $OUT/r | tee $OUT/r/rounds-table.md
  tar -C $OUT -cf $OUT/r$((r + 2)).tar r && rm -f $OUT/r$((r + 1)).tar
done
timeout 120 $D/bin/trun $D/steps/llama1b_fp8-rope.so --data $D/data/text_train.bin --steps 6 --seed 0 --profile > $OUT/r/profile_fp8-rope.log 2>&1
echo "profile rc=$?"; grep -E "train step:|norm_grad|quantize_e5m2|rope" $OUT/r/profile_fp8-rope.log | head -10
tar -C $OUT -cf $OUT/r5.tar r && rm -f $OUT/r4.tar
