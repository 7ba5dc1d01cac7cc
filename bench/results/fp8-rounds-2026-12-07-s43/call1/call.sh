#!/usr/bin/env bash
# Session 43, call 1: main (3946dc8) on whatever GPU comes (the H200 asked
# for): the 1B decoder's bf16 and fp8 steps alternating in three rounds of
# 30 steps; GPT-2 124M's bf16 and fp8 steps in two rounds (fp8 after dd7c4af,
# never measured); torch.compile's GPT-2 124M step in the same call (the
# bf16 peer); the norm casts' benches (the forward's row-major pass at
# bands 4-16, not yet run on a GPU); ncu of the forward norm cast
# (norm_fwd_ncu.cu: the plain norm, the banded cast, its row-major pass).
# The same for norm_fwd_ring.cu: the rows staged in shared memory by
# cp.async (checked against the kernel byte for byte, then timed).
# The steps' fp8-staged variant (llama1b, gpt2): main's fp8 step compiled
# with this session's staged forward norm cast (uncommitted), in the rounds
# beside main's; norm_fp8_test checks both kernels against the unfused pair.
# On an H100 the 1B decoder gets one round (main's ratio there is known),
# on an H200 two.
set -uo pipefail
d=.devrun-fp8
out=$OUT/s43; mkdir -p $out
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv > $out/gpu.txt 2>&1
cat $out/gpu.txt; nproc
tar -C $d -xzf $d/lib.tar.gz; tar -C $d -xJf $d/steps.tar.xz; tar -C $d -xzf $d/data.tar.gz
export LD_LIBRARY_PATH=$PWD/$d/lib
source tests/gpu/cudnn_path.sh
summary=$out/summary.txt; : > $summary
t() { local name=$1; shift; local s=$(date +%s); timeout 120 "$@" > $out/$name.log 2>&1; local rc=$?
      echo "$name: rc $rc ($(( $(date +%s) - s )) s) $(tail -1 $out/$name.log)" | tee -a $summary; }
t norm_fp8 $d/bin/norm_fp8_test --seed 4301 --bench
t norm_fwd_ncu $d/bin/norm_fwd_ncu
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
secs="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section SchedulerStats --section LaunchStats --section InstructionStats"
timeout 150 $NCU --clock-control none --kernel-name-base mangled --kernel-name "regex:layer_norm_forward_kernel|layer_norm_fp8_cast_kernel" \
  --launch-skip 0 --launch-count 12 $secs $d/bin/norm_fwd_ncu > $out/ncu_norm_fwd.txt 2>&1; echo "ncu norm_fwd: rc $?" | tee -a $summary
t norm_fwd_ring $d/bin/norm_fwd_ring
timeout 120 $NCU --clock-control none --kernel-name-base mangled --kernel-name "regex:ln_fp8_ring_kernel" \
  --launch-skip 6 --launch-count 3 $secs $d/bin/norm_fwd_ring > $out/ncu_norm_ring.txt 2>&1; echo "ncu norm_ring: rc $?" | tee -a $summary
rounds=2; grep -q H200 $out/gpu.txt || rounds=1
MODELS=llama1b TRUN_TIMEOUT=150 timeout 330 bash bench/fp8/run.sh $d rounds $rounds 30 > $out/rounds.txt 2>&1
MODELS=gpt2 TRUN_TIMEOUT=90 timeout 150 bash bench/fp8/run.sh $d rounds 2 30 > $out/rounds_gpt2.txt 2>&1
cp $d/out/*.jsonl $d/out/*.log $d/out/rounds-table.md $out/ 2>/dev/null
grep -h "exit" $out/rounds.txt $out/rounds_gpt2.txt | tee -a $summary
PYTHONUNBUFFERED=1 timeout 150 python3 bench/torch_gpt2.py --mode compile --strict --steps 20 --warmup 5 \
  > $out/torch_compile.jsonl 2> $out/torch_compile.log; echo "torch.compile: rc $? $(tail -1 $out/torch_compile.jsonl)" | tee -a $summary
t norm_grad_fp8 $d/bin/norm_grad_fp8_test --seed 4302 --bench
cat $out/rounds-table.md
grep -A16 "^bench" $out/norm_fp8.log
cat $out/norm_fwd_ring.log $out/norm_fwd_ncu.log
cat $summary
tar -C $OUT -czf $OUT/s43.tgz s43 && rm -rf $out
