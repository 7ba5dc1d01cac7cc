#!/usr/bin/env bash
# An NCCL rank whose ncclCommAbort never returns (fake_nccl.c with
# FAKE_NCCL_GRAPHS_HELD, as NCCL 2.28's while CUDA graphs hold the
# communicator) still ends: AbortAll within its grace (exit 3), the watchdog
# likewise (exit 1). Before, both waited forever and so did every other
# rank and the launcher (issue 34).
#   nccl_abort_check.sh CHECK_BINARY FAKE_NCCL FAKE_CUDA_DIR
set -u
check=$1 nccl=$2 cuda_dir=$3
status=0
port=$((20000 + $$ % 20000))
for mode in abort:3 watchdog:1; do
  name=${mode%%:*} want=${mode##*:}
  start=$(date +%s%N)
  LD_LIBRARY_PATH="$cuda_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TCC_NCCL_LIBRARY="$nccl" \
    FAKE_NCCL_GRAPHS_HELD=1 timeout 30 "$check" "$name" "$port" 2>/tmp/nccl_abort_check.$$.err
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  port=$((port + 1))
  if [ "$rc" = "$want" ]; then
    echo "PASS $name: exit $rc after ${ms} ms"
  else
    echo "FAIL $name: exit $rc after ${ms} ms (want $want; 124 = still running at 30 s)"
    cat /tmp/nccl_abort_check.$$.err
    status=1
  fi
done
rm -f /tmp/nccl_abort_check.$$.err
exit $status
