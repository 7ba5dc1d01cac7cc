#!/usr/bin/env bash
# Session 43, call 2: the staged forward norm cast with its chunk loops
# unrolled (call 1's version counted them at run time and ran at 0.89x the
# registers' kernel; the probe norm_fwd_ring.cu, unrolled, at 1.13x):
# norm_fp8_test (both kernels against the unfused pair, then --bench), a
# --profile of the 1B decoder's fp8 and fp8-staged steps, then rounds of
# the 1B decoder (bf16, fp8, fp8-staged) and of GPT-2 124M.
set -uo pipefail
d=.devrun-fp8
out=$OUT/s43c2; mkdir -p $out
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv > $out/gpu.txt 2>&1
cat $out/gpu.txt
tar -C $d -xzf $d/lib.tar.gz; tar -C $d -xJf $d/steps.tar.xz; tar -C $d -xzf $d/data.tar.gz
export LD_LIBRARY_PATH=$PWD/$d/lib
source tests/gpu/cudnn_path.sh
summary=$out/summary.txt; : > $summary
timeout 120 $d/bin/norm_fp8_test --seed 4311 --bench > $out/norm_fp8.log 2>&1
echo "norm_fp8: rc $? $(tail -1 $out/norm_fp8.log)" | tee -a $summary
for p in fp8 fp8-staged; do
  timeout 100 $d/bin/trun $d/steps/llama1b_$p.so --data $d/data/text_train.bin --steps 6 --seed 0 --profile > $out/profile_$p.log 2>&1
  echo "profile $p: rc $? $(grep 'train step:' $out/profile_$p.log) $(grep 'fp8_quantize_e4m3_delayed_norm ' $out/profile_$p.log | head -1)" | tee -a $summary
done
rounds=2; grep -q H200 $out/gpu.txt && rounds=3
MODELS=llama1b TRUN_TIMEOUT=150 timeout 300 bash bench/fp8/run.sh $d rounds $rounds 30 > $out/rounds.txt 2>&1
MODELS=gpt2 TRUN_TIMEOUT=90 timeout 100 bash bench/fp8/run.sh $d rounds 2 30 > $out/rounds_gpt2.txt 2>&1
cp $d/out/*.jsonl $d/out/*.log $d/out/rounds-table.md $out/ 2>/dev/null
grep -h "exit" $out/rounds.txt $out/rounds_gpt2.txt | tee -a $summary
cat $out/rounds-table.md
grep -A20 "^bench" $out/norm_fp8.log
grep -c "^ok" $out/norm_fp8.log; grep -i "fail" $out/norm_fp8.log | head -5
cat $summary
tar -C $OUT -czf $OUT/s43c2.tgz s43c2 && rm -rf $out
