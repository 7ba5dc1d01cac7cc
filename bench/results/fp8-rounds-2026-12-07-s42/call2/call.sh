#!/usr/bin/env bash
# Session 42, call 2: the rope cast's tile order and a prefetch of its tables
# (fp8_rope_cast_test: tests, then --bench of four variants; ncu of each),
# then --profile runs of the 1B decoder's fp8 steps: main's (fp8), call 1's
# fp8-s42 and fp8-s42b (s42 + the rope source's table prefetch), to place
# call 1's 0.6 ms.
set -uo pipefail
d=.devrun-fp8
out=$OUT/s42c2; mkdir -p $out
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv > $out/gpu.txt 2>&1
cat $out/gpu.txt
tar -C $d -xzf $d/lib.tar.gz; tar -C $d -xJf $d/steps.tar.xz; tar -C $d -xzf $d/data.tar.gz
export LD_LIBRARY_PATH=$PWD/$d/lib
source tests/gpu/cudnn_path.sh
summary=$out/summary.txt; : > $summary
timeout 120 $d/bin/fp8_rope_cast_test --seed 4211 --bench > $out/fp8_rope_cast.log 2>&1
echo "fp8_rope_cast: rc $? $(tail -1 $out/fp8_rope_cast.log)" | tee -a $summary
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
secs="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section SchedulerStats"
for v in "contig_pf:e5m2ENS_13Fp8RopeSource.*Ll2048ELi2ELb1E" "contig_nopf:e5m2ENS_13Fp8RopeSource.*Ll2048ELi2ELb0E" \
         "grid_pf:GridStrideOrderINS_13Fp8RopeSource.*Ll2048ELi2ELb1E" "grid_nopf:GridStrideOrderINS_13Fp8RopeSource.*Ll2048ELi2ELb0E"; do
  n=${v%%:*}; re=${v#*:}
  timeout 90 $NCU --clock-control none --kernel-name-base mangled --kernel-name "regex:$re" --launch-skip 2 --launch-count 1 \
    $secs $d/bin/fp8_rope_cast_test --seed 4212 --bench > $out/ncu_$n.txt 2>&1
  echo "ncu $n rc $?" | tee -a $summary
done
for p in fp8 fp8-s42 fp8-s42b; do
  s=$(date +%s)
  timeout 100 $d/bin/trun $d/steps/llama1b_$p.so --data $d/data/text_train.bin --steps 6 --seed 0 --profile > $out/profile_$p.log 2>&1
  echo "profile $p: rc $? ($(( $(date +%s) - s )) s) $(grep 'train step:' $out/profile_$p.log)" | tee -a $summary
done
echo "== rope bench"; grep -A9 "^bench" $out/fp8_rope_cast.log
for n in contig_pf contig_nopf grid_pf grid_nopf; do echo "== ncu $n"; grep -E "^    (Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit Rate|L2 Hit Rate|L1/TEX Cache Throughput|L2 Cache Throughput|Mem Busy|Max Bandwidth|Registers Per Thread|Achieved Occupancy|No Eligible|Warp Cycles Per Issued Instruction|Issued Warp Per Scheduler)" $out/ncu_$n.txt | head -14; done
for p in fp8 fp8-s42 fp8-s42b; do echo "== profile $p"; sed -n '/by kind/,/cuBLASLt products/p' $out/profile_$p.log | head -22; done
cat $summary
tar -C $OUT -czf $OUT/s42c2.tgz s42c2 && rm -rf $out
