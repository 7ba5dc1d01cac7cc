#!/bin/bash
# Session 35, call 2: the LN backward's flush without index division (32-bit, 16-byte pieces),
# ncu of it and of a GPT-2-specialized build (c, flags constant), SASS, step A/B.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
res=$OUT/res; mkdir -p $res
save() { tar czf $OUT/res.tgz -C $OUT res; }
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
for v in base flush; do timeout 150 ./norm_kernels_test_$v --bench > $res/nkt_$v.log 2>&1; echo "nkt $v rc $?"; done
grep -h -E "bench 16384x768 .*(cast's|dx only)|PASSED|FAILED" $res/nkt_*.log
save
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for b in flush spec; do
  timeout 120 $NCU --clock-control none --kernel-name regex:layer_norm_backward_kernel --launch-skip 2 --launch-count 1 \
    --set full --import-source yes -o $res/ncu_${b}_sums ./ncu_ln_$b sums > $res/ncu_${b}_sums.txt 2>&1; echo "ncu $b rc $?"
  timeout 60 $NCU --import $res/ncu_${b}_sums.ncu-rep --print-details all > $res/ncu_${b}_sums.details.txt 2>&1
  timeout 60 $NCU --import $res/ncu_${b}_sums.ncu-rep --page source --print-source sass --csv > $res/ncu_${b}_sums.sass.csv 2>&1
done
K=$(cuobjdump -symbols ncu_ln_flush 2>/dev/null | grep -o '_ZN8tcc_cuda6detail26layer_norm_backward_kernel[A-Za-z0-9_]*' | head -1)
cuobjdump -sass -fun "$K" ncu_ln_flush > $res/sass_flush.txt 2>&1; wc -l $res/sass_flush.txt
save
for v in flush spec; do echo "== $v"; grep -E "^    (Duration|DRAM Throughput|Executed Instructions |Registers Per Thread|Stall Long|Stall Wait|Stall Short|Stall Barrier)" $res/ncu_${v}_sums.details.txt | sort -u; done
timeout 240 bash $root/bench/gpt2/ab.sh ./bin/trun tokens.bin steps/gpt2_bf16.so steps/gpt2_bf16_flush.so $res/ab_base_flush --labels base,flush --rounds 3 --steps 50; save
timeout 60 ./bin/trun steps/gpt2_bf16_flush.so --data tokens.bin --steps 12 --seed 0 --profile > $res/profile_flush.log 2>&1
grep -h "train step:\|layer_norm_grad" $res/profile_flush.log | head -3
save
cat $res/ab_base_flush/ab.txt
