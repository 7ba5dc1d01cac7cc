#!/bin/bash
# Session 35, call 9 (after the review's cleanup): norm_kernels_test and the final GPT-2 step,
# A/B against the build before the cleanup (identical math expected).
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name --format=csv,noheader
res=$OUT/res; mkdir -p $res
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
timeout 200 ./norm_kernels_test_final --bench > $res/nkt_final.log 2>&1; echo "nkt rc $?"
grep -h -E "FAIL|PASSED|FAILED|cast's column sum|compiled for the call" $res/nkt_final.log
timeout 200 bash $root/bench/gpt2/ab.sh ./bin/trun tokens.bin steps/gpt2_bf16_fixed.so steps/gpt2_bf16_final.so $res/ab --labels before,final --rounds 2 --steps 40
tar czf $OUT/res.tgz -C $OUT res
