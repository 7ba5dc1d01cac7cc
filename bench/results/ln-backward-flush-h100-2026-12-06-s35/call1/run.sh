#!/bin/bash
# Session 35, call 1: LN backward experiments (ncu, N=6 cached chunks, parts sweep)
# and the owed H200 A/B of the fold vs --no-norm-bias-grad, with bench/gpt2/ab.sh.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
res=$OUT/res; mkdir -p $res
save() { tar czf $OUT/res.tgz -C $OUT res; }
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
for v in base n6; do
  timeout 150 ./norm_kernels_test_$v --bench > $res/nkt_$v.log 2>&1; echo "nkt $v rc $?"
done
grep -h "cast's column sum\|the same with\|dx only\|PASSED\|FAILED" $res/nkt_*.log
save
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
for v in base:sums base:dxonly n6:sums; do
  b=${v%%:*}; m=${v#*:}
  timeout 120 $NCU --clock-control none --kernel-name regex:layer_norm_backward_kernel --launch-skip 2 --launch-count 1 \
    --set full --import-source yes -o $res/ncu_${b}_$m ./ncu_ln_$b $m > $res/ncu_${b}_$m.txt 2>&1; echo "ncu $v rc $?"
  timeout 60 $NCU --import $res/ncu_${b}_$m.ncu-rep --print-details all > $res/ncu_${b}_$m.details.txt 2>&1
done
save
for v in base_sums base_dxonly n6_sums; do echo "== $v"; grep -E "^    (Duration|Memory Throughput|DRAM Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Executed Ipc Active|Issue Slots Busy|No Eligible|Warp Cycles Per Issued)" $res/ncu_$v.details.txt | head -14; done
timeout 240 bash $root/bench/gpt2/ab.sh ./bin/trun tokens.bin steps/gpt2_bf16.so steps/gpt2_bf16_nobg.so $res/ab_fold_nobg --labels fold,nobg --rounds 3 --steps 50; save
timeout 240 bash $root/bench/gpt2/ab.sh ./bin/trun tokens.bin steps/gpt2_bf16.so steps/gpt2_bf16_n6.so $res/ab_fold_n6 --labels base,n6 --rounds 3 --steps 50; save
for s in gpt2_bf16 gpt2_bf16_n6; do timeout 60 ./bin/trun steps/$s.so --data tokens.bin --steps 12 --seed 0 --profile > $res/profile_$s.log 2>&1; done
grep -h "train step:\|layer_norm_grad\|norm backward" $res/profile_*.log | head -12
save
cat $res/ab_fold_nobg/ab.txt $res/ab_fold_n6/ab.txt
