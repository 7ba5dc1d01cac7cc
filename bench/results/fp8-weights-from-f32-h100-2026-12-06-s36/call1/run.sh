#!/usr/bin/env bash
# Session 36, call 1: the FP8 weight batch reading the f32 masters.
set -u
D=.devrun-fp8
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader
mkdir -p $D/out
timeout 420 bash bench/fp8/run.sh $D rounds 3 50 > $D/out/rounds.txt 2>&1
echo "rounds exit $?"
export LD_LIBRARY_PATH="$PWD/$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source tests/gpu/cudnn_path.sh
timeout 90 $D/bin/fp8_gemm_test --seed 36 > $D/out/fp8_gemm_test.log 2>&1
echo "fp8_gemm_test exit $?"; grep -c "^ok" $D/out/fp8_gemm_test.log; grep "FAIL\|batched" $D/out/fp8_gemm_test.log | head -12
# The two fp8 steps' losses, step by step (the same FP8 bytes: identical).
python3 - <<'PY'
import json,glob
for r in (1,2,3):
    def losses(p):
        try: return [json.loads(l)["loss"] for l in open(p) if '"kind":"step"' in l]
        except OSError: return []
    a=losses(f".devrun-fp8/out/round{r}_llama1b_fp8.jsonl"); b=losses(f".devrun-fp8/out/round{r}_llama1b_fp8-wf32.jsonl")
    same=sum(x==y for x,y in zip(a,b)); print(f"round {r}: {len(a)} / {len(b)} steps, {same} losses bit-identical, first {a[:1]} {b[:1]}, last {a[-1:]} {b[-1:]}")
PY
for s in fp8 fp8-wf32; do
  timeout 100 $D/bin/trun $D/steps/llama1b_$s.so --data $D/data/text_train.bin --steps 6 --seed 0 --profile > $D/out/profile_$s.log 2>&1
  echo "profile $s exit $?"; grep -E "train step:|multi_ew|fp8_quantize_e4m3_delayed_batch|peak" $D/out/profile_$s.log | head -8
done
tar czf $OUT/out.tgz $D/out
cat $D/out/rounds-table.md
