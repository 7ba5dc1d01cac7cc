#!/bin/bash
# gpt2_short bf16, 200 steps, with tcc's sm90 attention off and forced, against the suite's fp32 run
cd "$(dirname "$0")"; root=$(cd .. && pwd); dir=$PWD
source $root/tests/gpu/unpack_parts.sh; unpack_parts "$dir" lib steps data bin
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source $root/tests/gpu/cudnn_path.sh
for mode in 0 force; do
  TCC_ATTENTION_SM90=$mode timeout 60 ./bin/trun steps/gpt2_short_cuda_bf16.so --data data/fortunes_shuffled_bytes_train.bin --data-order sequential \
    --steps 200 --seed 0 --log-every 50 --metrics $OUT/bf16_$mode.jsonl > $OUT/bf16_$mode.log 2>&1 || echo "$mode failed"
  python3 $root/tests/gpu/compare_losses.py "gpt2_short bf16 (TCC_ATTENTION_SM90=$mode) vs fp32" gpt2_short_fp32.jsonl $OUT/bf16_$mode.jsonl --steps 200 --tol 0.02 --skip-first 10 --final-tol 0.01 --labels fp32,bf16
done
python3 $root/tests/gpu/compare_losses.py "suite's bf16 (timed choice) vs this force run" gpt2_short_bf16.jsonl $OUT/bf16_force.jsonl --steps 200 --tol 0.02 --labels suite,force
grep -h "attention:" $OUT/bf16_0.log | cut -c1-200
