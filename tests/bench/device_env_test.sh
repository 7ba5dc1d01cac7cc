#!/usr/bin/env bash
# bench/fp8/device_env.sh, the preamble a device call's script sources, on
# a made-up prepared folder (no GPU: a stand-in nvidia-smi on PATH): the
# GPU line written to OUT/gpu.txt and printed, each packed part (.tar.gz
# and .tar.xz) unpacked once, DIR/lib first on LD_LIBRARY_PATH as an
# absolute path, and a clear usage error without its arguments.
#
# usage: device_env_test.sh SOURCE_ROOT WORK_DIR
set -uo pipefail
root=${1:?usage: device_env_test.sh SOURCE_ROOT WORK_DIR}
work=${2:?usage: device_env_test.sh SOURCE_ROOT WORK_DIR}
rm -rf "$work" && mkdir -p "$work/fake-bin" "$work/make" && work=$(cd "$work" && pwd)
failures=0
check() { # WHAT CONDITION...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}
gpu="NVIDIA Made-Up GPU, 700.00 W, 1980 MHz, 580.00 $RANDOM"
printf '#!/bin/sh\necho "name, power.limit [W], clocks.max.sm [MHz], driver_version"\necho "%s"\n' \
  "$gpu" > "$work/fake-bin/nvidia-smi"
chmod +x "$work/fake-bin/nvidia-smi"
# The parts as the prepare scripts pack them: lib and data as .tar.gz,
# steps and bin as .tar.xz.
dir="$work/prepared"
mkdir -p "$dir" "$work/make"/{lib,steps,data,bin}
token=$RANDOM$RANDOM
echo "lib $token" > "$work/make/lib/libmadeup.so"
echo "step $token" > "$work/make/steps/model_fp8.so"
echo "data $token" > "$work/make/data/train.bin"
echo "bin $token" > "$work/make/bin/trun"
tar -C "$work/make" -czf "$dir/lib.tar.gz" lib
tar -C "$work/make" -czf "$dir/data.tar.gz" data
for part in steps bin; do # xz through Python, as unpack_parts reads it
  python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1], "w:xz"); t.add(sys.argv[2], sys.argv[3]); t.close()' \
    "$dir/$part.tar.xz" "$work/make/$part" "$part"
done

out="$work/out"
# DIR and OUT relative, as call scripts give them (from the folder above).
printed=$(cd "$work" && PATH="$work/fake-bin:$PATH" LD_LIBRARY_PATH=/before bash -c \
  'set -u; source "$1/bench/fp8/device_env.sh" prepared out; echo "LD=$LD_LIBRARY_PATH"' _ "$root")
check "the call's exit status" test $? -eq 0
check "gpu.txt holds nvidia-smi's line" grep -qF "$gpu" "$out/gpu.txt"
check "the GPU line is printed" grep -qF "$gpu" <<<"$printed"
for part in lib steps data bin; do
  check "$part unpacked" grep -rqF "$token" "$dir/$part"
done
ld=$(sed -n 's/^LD=//p' <<<"$printed")
check "DIR/lib first on LD_LIBRARY_PATH, absolute ($ld)" test "${ld%%:*}" = "$dir/lib"
check "the earlier LD_LIBRARY_PATH kept after it" grep -q ":/before" <<<"$ld"

# A part already unpacked is left as it is (a second source in one call).
echo "changed" > "$dir/steps/model_fp8.so"
(cd "$work" && PATH="$work/fake-bin:$PATH" bash -c 'source "$1/bench/fp8/device_env.sh" prepared out' \
  _ "$root" > /dev/null)
check "an unpacked part is not unpacked again" grep -qx changed "$dir/steps/model_fp8.so"

# Without its arguments: a usage message and a failed status, nothing run.
err=$(cd "$root" && bash -c 'source bench/fp8/device_env.sh' 2>&1)
status=$?
check "no arguments: a failed status" test $status -ne 0
check "no arguments: the usage line ($err)" grep -q "usage: source bench/fp8/device_env.sh DIR OUT" <<<"$err"

if [ $failures -ne 0 ]; then
  echo "device_env_test: $failures failed"
  exit 1
fi
echo "device_env_test: PASS"
