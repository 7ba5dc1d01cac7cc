#!/usr/bin/env bash
# Session 41, call 2: the fused RMS backward + e5m2 cast with its transposed
# layout written by the kernel's bands against out only + launch_fp8_transpose
# (timings by variant, the test of the split launcher, ncu of each), the 1B
# decoder's fp8 step against fp8-split (main with the split) in rounds, and
# 6-step profiles.
set -uo pipefail
here=.devrun-ncu; d=.devrun-fp8
res=$OUT/s41b; mkdir -p $res
save() { tar -C $OUT -czf $OUT/s41b.tgz s41b; }
[ -d $d/lib ] || tar -C $d -xzf $d/lib.tar.gz; [ -d $d/steps ] || tar -C $d -xJf $d/steps.tar.xz; [ -d $d/data ] || tar -C $d -xzf $d/data.tar.gz
tar -C $here -xJf $here/steps.tar.xz; cp $here/steps/*.so $d/steps/
export LD_LIBRARY_PATH=$PWD/$d/lib
source tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader | tee $res/gpu.txt
timeout 60 $here/norm_grad_probe time | tee $res/probe_time.txt
timeout 120 $here/norm_grad_fp8_test_split --seed 4105 --bench > $res/norm_grad_fp8_split.log 2>&1; echo "norm_grad_fp8_test (split) rc $?"
grep -E "transpose|FAIL|fail|PASS|ms " $res/norm_grad_fp8_split.log
save
MODELS=llama1b TRUN_TIMEOUT=120 timeout 250 bash bench/fp8/run.sh $d rounds 3 30 > $res/rounds.txt 2>&1
cp $d/out/round*.jsonl $d/out/rounds-table.md $res/ 2>/dev/null; cat $res/rounds-table.md
save
for p in fp8 fp8-split; do
  timeout 60 $d/bin/trun $d/steps/llama1b_$p.so --data $d/data/text_train.bin --steps 6 --seed 0 --profile > $res/profile_llama1b_$p.log 2>&1; echo "profile $p rc $?"
done
grep -h "train step:\|norm_grad" $res/profile_llama1b_*.log | head -8
save
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
secs="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats"
for m in plain cast fused fusedout transpose; do
  timeout 60 $NCU --clock-control none --launch-skip 2 --launch-count 1 $secs $here/norm_grad_probe $m > $res/ncu_$m.txt 2>&1; echo "ncu $m rc $?"
done
save
for m in plain cast fused fusedout transpose; do echo "== $m"; grep -E "^    (Duration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|No Eligible|Warp Cycles Per Issued Instruction)" $res/ncu_$m.txt | head -10; done
