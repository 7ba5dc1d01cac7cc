#!/usr/bin/env bash
# Session 38 call 1: fp8_gemm_test of main (launch bounds), the 1B bf16/fp8
# ratio (2 rounds), then the loss noise floor: bf16 (atomics) and bf16
# --deterministic (session 36's step), 1000 steps each from --seed 0.
set -u
D=.devrun-fp8
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $OUT/r/gpu.txt 2>&1
cat $OUT/r/gpu.txt
tar -C $D -xzf $D/lib.tar.gz
export LD_LIBRARY_PATH=$PWD/$D/lib
source tests/gpu/cudnn_path.sh
timeout 120 $D/bin/fp8_gemm_test --seed 38 > $OUT/r/fp8_gemm_test.log 2>&1; echo "fp8_gemm_test rc=$?"; tail -3 $OUT/r/fp8_gemm_test.log
MODELS=llama1b timeout 330 bash bench/fp8/run.sh $D rounds 2 30 > $OUT/r/rounds.txt 2>&1
tail -8 $OUT/r/rounds.txt; cp $D/out/*.jsonl $D/out/rounds-table.md $OUT/r/ 2>/dev/null
tar -C $OUT -cf $OUT/r1.tar r
# the loss noise floor
mkdir -p $D/det && tar -C $D/det -xJf $D/det-steps.tar.xz
train() { name=$1 step=$2; shift 2
  timeout 240 $D/bin/trun $step --data $D/data/text_train.bin --steps 1000 --seed 0 --log-every 50 --metrics $OUT/r/$name.jsonl "$@" > $OUT/r/$name.log 2>&1
  echo "$name rc=$? $(grep -c '"kind": *"step"' $OUT/r/$name.jsonl) steps"; tail -2 $OUT/r/$name.log; }
train loss_bf16_atomics $D/steps/llama1b_bf16.so
tar -C $OUT -cf $OUT/r2.tar r
train loss_bf16_det $D/det/steps/llama1b_bf16.so
tar -C $OUT -cf $OUT/r3.tar r && rm -f $OUT/r1.tar $OUT/r2.tar
