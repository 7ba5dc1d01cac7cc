#!/usr/bin/env bash
# Session 44, call 1 (not run: no GPU was lent; for the next session that
# gets one): main (1878014) on whatever GPU comes, from .devrun-s44
# (prepare.sh here builds it).
# (1) norm_fp8_test (patch A: the forward norm cast with its rows staged in
#     shared memory, third form: one ld.shared.v4.u32 per 16-byte chunk)
#     and norm_grad_fp8_test (patch B: the norm backward cast with its grad
#     row cached in registers, main's, and not, which spills nothing): each
#     form against the unfused pair, then --bench. A form lands only if it
#     beats main's here and in (2).
# (2) The 1B decoder's bf16, fp8, fp8-staged and fp8-uncached steps
#     alternating, ROUNDS rounds of 30 steps (default 2: ~3.5 minutes).
#     (1) and (2) run when .devrun-s44 was carried.
# (3) The FP8 loss criterion judged on the validation loss (the same 16
#     held-out batches every time) as well as each step's training batch:
#     1000 steps from the same weights and batches, --deterministic bf16
#     then fp8, then the floor (the plain bf16 step: the same precision,
#     only some sums' order differs); --eval-every 50. Runs when
#     .devrun-s44-loss was carried, with what is left of TOTAL seconds
#     (default 575; all three take ~400 s on an H100, from sessions
#     37-38's step times).
# Each folder with the tracked files fits one call's 64 MiB, not both: two
# calls, `carry: [".devrun-s44"]`, then `carry: [".devrun-s44-loss"]`.
set -uo pipefail
# What runs is what was carried: .devrun-s44 (the kernel tests and the
# rounds) and/or .devrun-s44-loss (the loss runs); each with the tracked
# files fits one call.
d=.devrun-s44; l=.devrun-s44-loss
out=$OUT/s44c1
[ -d $d ] || [ -d $l ] || { echo "call.sh: neither $d nor $l was carried"; exit 2; }
source bench/fp8/device_env.sh $([ -d $d ] && echo $d || echo $l) $out
summary=$out/summary.txt; : > $summary
if [ -d $d ]; then
  for t in norm_fp8 norm_grad_fp8; do
    timeout 90 $d/bin/${t}_test --seed 4401 --bench > $out/$t.log 2>&1
    echo "$t: rc $? $(tail -1 $out/$t.log) ($(grep -c '^ok' $out/$t.log) ok lines)" | tee -a $summary
  done
  MODELS=llama1b TRUN_TIMEOUT=70 timeout 300 bash bench/fp8/run.sh $d rounds ${ROUNDS:-2} 30 > $out/rounds.txt 2>&1
  cp $d/out/*.jsonl $d/out/*.log $d/out/rounds-table.md $out/ 2>/dev/null
  grep -h "exit" $out/rounds.txt | tee -a $summary
fi
if [ -d $l ]; then
  [ -d $d ] && source bench/fp8/device_env.sh $l $out > /dev/null # else sourced above
  left=$(( ${TOTAL:-575} - SECONDS ))
  echo "loss runs: $left s left" | tee -a $summary
  [ $left -ge 60 ] && timeout $left bash bench/fp8/run.sh $l loss 1000 --val $PWD/$l/data/text_val.bin --eval-every 50 \
    --eval-batches 16 > $out/loss.txt 2>&1
  echo "run.sh loss: rc $?" | tee -a $summary
  cp $l/out/*.jsonl $l/out/*.log $out/ 2>/dev/null
  grep -h "exit" $out/loss.txt | tee -a $summary
fi
echo "== summary"; cat $summary
echo "== norm benches"; grep -h -A14 "^bench" $out/norm_fp8.log $out/norm_grad_fp8.log
echo "== 1B rounds"; cat $out/rounds-table.md 2>/dev/null
echo "== loss"; grep -v "^loss_" $out/loss.txt 2>/dev/null | tail -75
tar -C $OUT -czf $OUT/s44c1.tgz s44c1 && rm -rf $out
