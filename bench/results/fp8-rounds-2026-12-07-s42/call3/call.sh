#!/usr/bin/env bash
# Session 42, call 3: main as committed (101d7e1: the norm casts without an
# unused shared band; the rope cast's tile order of call 1 reverted) beside
# ce2fc98's fp8 step and the bf16 step, 1B decoder, and GPT-2 124M's bf16
# and fp8 steps: one round (ROUNDS), all the device time left allowed.
# First the forward norm cast's row-major pass at smaller bands
# (norm_fp8_test --bench) and the rope cast's bench with the floor line, as
# committed.
set -uo pipefail
d=.devrun-fp8
out=$OUT/s42c3; mkdir -p $out
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv > $out/gpu.txt 2>&1
cat $out/gpu.txt
tar -C $d -xzf $d/lib.tar.gz; tar -C $d -xJf $d/steps.tar.xz; tar -C $d -xzf $d/data.tar.gz
export LD_LIBRARY_PATH=$PWD/$d/lib
source tests/gpu/cudnn_path.sh
timeout 100 $d/bin/norm_fp8_test --seed 4221 --bench > $out/norm_fp8.log 2>&1; echo "norm_fp8: rc $? $(tail -1 $out/norm_fp8.log)"
timeout 100 $d/bin/fp8_rope_cast_test --seed 4222 --bench > $out/fp8_rope_cast.log 2>&1; echo "fp8_rope_cast: rc $? $(tail -1 $out/fp8_rope_cast.log)"
grep -A16 "^bench" $out/norm_fp8.log $out/fp8_rope_cast.log
MODELS="llama1b gpt2" TRUN_TIMEOUT=150 timeout ${ROUNDS_BUDGET:-140} bash bench/fp8/run.sh $d rounds ${ROUNDS:-1} 30 > $out/rounds.txt 2>&1
cp $d/out/*.jsonl $d/out/*.log $d/out/rounds-table.md $out/ 2>/dev/null
grep -h "exit" $out/rounds.txt
tail -10 $out/rounds.txt
tar -C $OUT -czf $OUT/s42c3.tgz s42c3 && rm -rf $out
