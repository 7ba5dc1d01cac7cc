#!/bin/bash
# Session 35, call 3: the LN backward compiled for its call (NormGradFixed): norm_kernels_test
# (tests + bench), step A/B flush-only vs fixed (both with the flush), profile.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
res=$OUT/res; mkdir -p $res
save() { tar czf $OUT/res.tgz -C $OUT res; }
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
timeout 200 ./norm_kernels_test_fixed --bench > $res/nkt_fixed.log 2>&1; echo "nkt fixed rc $?"
grep -h -E "^bench|PASSED|FAILED|NormGradFixed" $res/nkt_fixed.log | grep -v "^ok.*bit-identical"
grep -c "compiled for the call" $res/nkt_fixed.log
save
timeout 300 bash $root/bench/gpt2/ab.sh ./bin/trun tokens.bin steps/gpt2_bf16_flush.so steps/gpt2_bf16_fixed.so $res/ab_flush_fixed --labels flush,fixed --rounds 3 --steps 50; save
timeout 60 ./bin/trun steps/gpt2_bf16_fixed.so --data tokens.bin --steps 12 --seed 0 --profile > $res/profile_fixed.log 2>&1
grep -h "train step:\|layer_norm_grad" $res/profile_fixed.log | head -3
save
cat $res/ab_flush_fixed/ab.txt
