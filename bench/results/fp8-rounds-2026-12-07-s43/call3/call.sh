#!/usr/bin/env bash
# Session 43, call 3 (lean: ~5 minutes of device time were left): the
# staged forward norm cast reading each 16-byte chunk from shared memory in
# one access (call 2's read four 4-byte words: 0.98x the registers'
# kernel), chunk loops unrolled. norm_fp8_test (both kernels against the
# unfused pair, then --bench), then two rounds of the 1B decoder's fp8 and
# fp8-staged steps (no bf16: its ratio is calls 1 and 2's).
set -uo pipefail
d=.devrun-fp8
out=$OUT/s43c3; mkdir -p $out
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv > $out/gpu.txt 2>&1
cat $out/gpu.txt
tar -C $d -xzf $d/lib.tar.gz; tar -C $d -xJf $d/steps.tar.xz; tar -C $d -xzf $d/data.tar.gz
rm -f $d/steps/llama1b_bf16.so
export LD_LIBRARY_PATH=$PWD/$d/lib
source tests/gpu/cudnn_path.sh
timeout 60 $d/bin/norm_fp8_test --seed 4321 --bench > $out/norm_fp8.log 2>&1
echo "norm_fp8: rc $? $(tail -1 $out/norm_fp8.log)"
grep -A20 "^bench" $out/norm_fp8.log
grep -c "^ok" $out/norm_fp8.log
MODELS=llama1b TRUN_TIMEOUT=60 timeout 120 bash bench/fp8/run.sh $d rounds 2 30 > $out/rounds.txt 2>&1
cp $d/out/*.jsonl $d/out/*.log $d/out/rounds-table.md $out/ 2>/dev/null
grep -h "exit" $out/rounds.txt
cat $out/rounds-table.md
tar -C $OUT -czf $OUT/s43c3.tgz s43c3 && rm -rf $out
