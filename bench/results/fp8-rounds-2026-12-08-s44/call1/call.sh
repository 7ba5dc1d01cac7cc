#!/usr/bin/env bash
# Session 44, call 1: main (7b773a6) on whatever GPU comes (two calls' worth
# of device time was not left, so one call does both parts).
# (1) norm_fp8_test: the staged forward norm cast, third form (each 16-byte
#     chunk read from shared memory by one ld.shared.v4.u32; patch
#     bench/results/fp8-rounds-2026-12-07-s43/call3/staged-norm-cast.patch),
#     both kernels against the unfused pair, then --bench.
# (2) The 1B decoder's bf16, fp8 and fp8-staged steps alternating, 2 rounds
#     of 30 steps (ROUNDS, default 2; the loss runs get what is left of
#     TOTAL seconds, default 575).
# (3) The FP8 loss criterion judged on the validation loss (the same 16
#     held-out batches every time) as well as each step's training batch:
#     1000 steps from the same weights and batches, --deterministic bf16
#     then fp8, then the floor (the plain bf16 step: the same precision,
#     only some sums' order differs); --eval-every 50.
set -uo pipefail
d=.devrun-s44
out=$OUT/s44c1
source bench/fp8/device_env.sh $d $out
summary=$out/summary.txt; : > $summary
# The loss runs' folder: the deterministic steps and the floor's, beside
# the same lib, data and bin (run.sh's rounds take every <model>_*-*.so).
l=$d-loss; mkdir -p $l/steps
for p in lib data bin; do ln -sfn $PWD/$d/$p $l/$p; done
mv $d/steps/llama1b_*-det.so $l/steps/ && cp $d/steps/llama1b_bf16.so $l/steps/
timeout 60 $d/bin/norm_fp8_test --seed 4401 --bench > $out/norm_fp8.log 2>&1
echo "norm_fp8: rc $? $(tail -1 $out/norm_fp8.log) ($(grep -c '^ok' $out/norm_fp8.log) ok lines)" | tee -a $summary
MODELS=llama1b TRUN_TIMEOUT=70 timeout 170 bash bench/fp8/run.sh $d rounds ${ROUNDS:-2} 30 > $out/rounds.txt 2>&1
cp $d/out/*.jsonl $d/out/*.log $d/out/rounds-table.md $out/ 2>/dev/null
grep -h "exit" $out/rounds.txt | tee -a $summary
left=$(( ${TOTAL:-575} - SECONDS ))
echo "loss runs: $left s left" | tee -a $summary
timeout $left bash bench/fp8/run.sh $l loss 1000 --val $PWD/$d/data/text_val.bin --eval-every 50 \
  --eval-batches 16 > $out/loss.txt 2>&1
echo "run.sh loss: rc $?" | tee -a $summary
cp $l/out/*.jsonl $l/out/*.log $out/ 2>/dev/null
grep -h "exit" $out/loss.txt | tee -a $summary
echo "== summary"; cat $summary
echo "== norm bench"; grep -A12 "^bench" $out/norm_fp8.log
echo "== 1B rounds"; cat $out/rounds-table.md
echo "== loss"; grep -v "^loss_" $out/loss.txt | tail -75
tar -C $OUT -czf $OUT/s44c1.tgz s44c1 && rm -rf $out
