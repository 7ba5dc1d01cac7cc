#!/usr/bin/env bash
# Session 40 call 2: the norm backward's FP8 cast with bands of 7 rows
# (GPT-2's three sums at C = 768), which faulted (misaligned address) in
# call 1: norm_grad_fp8_test (all cases, then --bench), and GPT-2 124M's
# fp8 step (24 of its norm backwards fused) trained 12 steps.
set -u
D=.devrun-s40fix
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/r/gpu.txt 2>&1; cat $OUT/r/gpu.txt
for p in lib data bin steps; do tar -C $D -xf $D/$p.tar.*; done
export LD_LIBRARY_PATH=$PWD/$D/lib
source tests/gpu/cudnn_path.sh
timeout 100 $D/bin/norm_grad_fp8_test --seed 42 --bench > $OUT/r/norm_grad_fp8_test.log 2>&1
echo "norm_grad_fp8_test rc=$? $(grep -c '^ok' $OUT/r/norm_grad_fp8_test.log) ok, $(grep -c FAIL $OUT/r/norm_grad_fp8_test.log) FAIL"
grep -E "FAIL|failed" $OUT/r/norm_grad_fp8_test.log | head -4; tail -5 $OUT/r/norm_grad_fp8_test.log
timeout 90 $D/bin/trun $D/steps/gpt2_fp8.so --data $D/data/text_train.bin --steps 12 --seed 0 --log-every 1 --metrics $OUT/r/gpt2_fp8.jsonl > $OUT/r/gpt2_fp8.log 2>&1
echo "gpt2 fp8 rc=$?"; grep -E "step +(1|6|12) |trained|error|fault" $OUT/r/gpt2_fp8.log | head -6
tar -C $OUT -cf $OUT/r.tar r
