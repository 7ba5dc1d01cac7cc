#!/usr/bin/env bash
# Session 42, call 1: the norm casts' benches with this session's shared-free
# row-major path (norm_fp8_test, norm_grad_fp8_test: tests, then --bench),
# the rope cast's bench (its tile order), then the 1B decoder's steps alternating
# in rounds: main's (ce2fc98) bf16 and fp8, and fp8-s42 (this session's
# prelude: the rope cast's contiguous tiles, the norm casts' row-major path
# without the shared band); trun's start is now on several threads (wall
# per run).
set -uo pipefail
d=.devrun-fp8
out=$OUT/s42; mkdir -p $out
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv > $out/gpu.txt 2>&1
cat $out/gpu.txt; nproc
tar -C $d -xzf $d/lib.tar.gz; tar -C $d -xJf $d/steps.tar.xz; tar -C $d -xzf $d/data.tar.gz
export LD_LIBRARY_PATH=$PWD/$d/lib
source tests/gpu/cudnn_path.sh
summary=$out/summary.txt; : > $summary
t() { local name=$1; shift; local s=$(date +%s); timeout 150 "$@" > $out/$name.log 2>&1; local rc=$?
      echo "$name: rc $rc ($(( $(date +%s) - s )) s) $(tail -1 $out/$name.log)" | tee -a $summary; }
t norm_fp8 $d/bin/norm_fp8_test --seed 4201 --bench
t norm_grad_fp8 $d/bin/norm_grad_fp8_test --seed 4202 --bench
t fp8_rope_cast $d/bin/fp8_rope_cast_test --seed 4203 --bench
MODELS=llama1b TRUN_TIMEOUT=150 timeout ${ROUNDS_BUDGET:-420} bash bench/fp8/run.sh $d rounds ${ROUNDS:-3} 30 > $out/rounds.txt 2>&1
cp $d/out/*.jsonl $d/out/*.log $d/out/rounds-table.md $out/ 2>/dev/null
grep -h "exit" $out/rounds.txt | tee -a $summary
tail -12 $out/rounds.txt
for f in norm_fp8 norm_grad_fp8 fp8_rope_cast; do echo "== $f"; grep -A14 "^bench" $out/$f.log; done
cat $summary
tar -C $OUT -czf $OUT/s42.tgz s42 && rm -rf $out
