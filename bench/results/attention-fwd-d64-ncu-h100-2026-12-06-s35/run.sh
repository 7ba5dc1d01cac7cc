#!/bin/bash
# Session 35, call 8: where tcc's sm90 attention forward loses to cuDNN's at D64 (B16 H12 T1024,
# causal, bf16): the bench, then ncu over the bench's first 40 launches (both kernels, cheap
# sections), then the full set on one sm90 forward launch.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name --format=csv,noheader
res=$OUT/res; mkdir -p $res
timeout 120 ./attention_sm90_test --bench > $res/bench.log 2>&1; echo "bench rc $?"; grep -i "bench\|ms" $res/bench.log | head -12
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 200 $NCU --clock-control none --launch-count 40 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section ComputeWorkloadAnalysis ./attention_sm90_test --bench > $res/ncu_all.txt 2>&1; echo "ncu all rc $?"
timeout 150 $NCU --clock-control none --kernel-name regex:attention_forward_sm90 --launch-skip 2 --launch-count 1 --set full --import-source yes -o $res/ncu_sm90_fwd ./attention_sm90_test --bench > $res/ncu_fwd.txt 2>&1; echo "ncu fwd rc $?"
timeout 60 $NCU --import $res/ncu_sm90_fwd.ncu-rep --print-details all > $res/ncu_sm90_fwd.details.txt 2>&1
timeout 60 $NCU --import $res/ncu_sm90_fwd.ncu-rep --page source --print-source sass --csv > $res/ncu_sm90_fwd.sass.csv 2>&1
gzip -9 $res/ncu_sm90_fwd.sass.csv
grep -E "^  [a-zA-Z_].*\(|Duration|Registers Per|Achieved Occ|Stall Long|Stall Wait|Stall Barrier|Stall Short|Issue Slots Busy|Executed Ipc" $res/ncu_all.txt | head -60
tar czf $OUT/res.tgz -C $OUT res
