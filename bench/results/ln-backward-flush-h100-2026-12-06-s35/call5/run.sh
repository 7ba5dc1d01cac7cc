#!/bin/bash
# Session 35, call 5: the shared candidate-timing helper (time_candidates) checked in the step
# (fresh caches: GEMM search, CUTLASS vs cuBLASLt, sm90 attention vs cuDNN, for the build
# before and after), then the fold A/B on this GPU with the current code, and the timing
# build against the one before it.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
res=$OUT/res; mkdir -p $res
save() { tar czf $OUT/res.tgz -C $OUT res; }
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
for s in fixed timing; do
  rm -rf cache_$s; TCC_CACHE_DIR=$PWD/cache_$s timeout 120 ./bin/trun steps/gpt2_bf16_$s.so --data tokens.bin --steps 12 --seed 0 --profile > $res/first_$s.log 2>&1; echo "first $s rc $?"
  grep -h "GEMM algorithms\|CUTLASS\|sm90\|attention:" $res/first_$s.log | cut -c1-400 | head -6
  grep -h "train step:" $res/first_$s.log
done
save
timeout 240 bash $root/bench/gpt2/ab.sh ./bin/trun tokens.bin steps/gpt2_bf16_fixed.so steps/gpt2_bf16_nobg.so $res/ab_fold_nobg --labels fold,nobg --rounds 3 --steps 50; save
timeout 240 bash $root/bench/gpt2/ab.sh ./bin/trun tokens.bin steps/gpt2_bf16_fixed.so steps/gpt2_bf16_timing.so $res/ab_fixed_timing --labels before,timing --rounds 2 --steps 50; save
cat $res/ab_fold_nobg/ab.txt $res/ab_fixed_timing/ab.txt
