#!/usr/bin/env bash
# Session 41, call 1: the norm backward cast fix on a GPU (norm_grad_fp8_test,
# GPT-2 124M's fp8 step trained), the FP8 kernel tests, then the 1B decoder's
# bf16 and fp8 steps of main alternating in rounds.
set -uo pipefail
d=.devrun-fp8
out=$OUT/s41; mkdir -p $out
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv > $out/gpu.txt 2>&1
cat $out/gpu.txt
tar -C $d -xzf $d/lib.tar.gz; tar -C $d -xJf $d/steps.tar.xz; tar -C $d -xzf $d/data.tar.gz
export LD_LIBRARY_PATH=$PWD/$d/lib
source tests/gpu/cudnn_path.sh
summary=$out/summary.txt; : > $summary
t() { local name=$1; shift; local s=$(date +%s); timeout 120 "$@" > $out/$name.log 2>&1; local rc=$?
      echo "$name: rc $rc ($(( $(date +%s) - s )) s) $(tail -1 $out/$name.log)" | tee -a $summary; }
t norm_grad_fp8 $d/bin/norm_grad_fp8_test --seed 4101 --bench
t fp8_rope_cast $d/bin/fp8_rope_cast_test --seed 4102
t norm_fp8 $d/bin/norm_fp8_test --seed 4103
t fp8_gemm $d/bin/fp8_gemm_test --seed 4104
for p in fp8 bf16; do
  s=$(date +%s)
  timeout 150 $d/bin/trun $d/steps/gpt2_$p.so --data $d/data/text_train.bin --steps 12 --seed 0 \
    --log-every 1 --metrics $out/gpt2_$p.jsonl > $out/gpt2_$p.log 2>&1
  echo "gpt2_$p: rc $? ($(( $(date +%s) - s )) s) $(grep -c '"kind": *"step"' $out/gpt2_$p.jsonl) steps; $(grep -E 'trained|error|fault' $out/gpt2_$p.log | tail -2)" | tee -a $summary
done
python3 - <<'PY' | tee -a $summary
import json,os
out=os.environ['OUT']+'/s41'
def losses(n):
    try: return [json.loads(l).get('loss') for l in open(f'{out}/gpt2_{n}.jsonl') if '"step"' in l]
    except Exception as e: return []
a,b=losses('fp8'),losses('bf16')
print('gpt2 losses fp8:', [round(x,4) for x in a if x is not None])
print('gpt2 losses bf16:', [round(x,4) for x in b if x is not None])
PY
MODELS=llama1b TRUN_TIMEOUT=150 timeout ${ROUNDS_BUDGET:-330} bash bench/fp8/run.sh $d rounds ${ROUNDS:-3} 30 > $out/rounds.txt 2>&1
cp $d/out/*.jsonl $d/out/rounds-table.md $out/ 2>/dev/null
cp $d/reports/* $out/ 2>/dev/null
tail -20 $out/rounds.txt
cat $summary
tar -C $OUT -czf $OUT/s41.tgz s41 && rm -rf $out
