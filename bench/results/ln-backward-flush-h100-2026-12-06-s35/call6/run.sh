#!/bin/bash
# Session 35, call 6: the timing-helper build against the build before it, 4 alternating rounds
# (call 5's 2 rounds showed 0.6% between two builds with identical device code).
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
res=$OUT/res; mkdir -p $res
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
timeout 400 bash $root/bench/gpt2/ab.sh ./bin/trun tokens.bin steps/gpt2_bf16_timing.so steps/gpt2_bf16_fixed.so $res/ab_timing_fixed --labels timing,before --rounds 4 --steps 50
tar czf $OUT/res.tgz -C $OUT res
