#!/usr/bin/env bash
# Builds bench/fp8/cast_bench.cu (the FP8 casts that compute their input,
# kernel by kernel; see its header) for sm_90a with nvcc, from the prelude
# pieces as the build lists them, or runs a binary built already:
#
#   bash bench/fp8/cast_bench.sh build OUT    (here: OUT/fp8_cast_bench)
#   bash bench/fp8/cast_bench.sh run BIN      (on the device machine)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
case "${1:-}" in
  build)
    out=${2:?OUT}
    mkdir -p "$out"
    source "$root/bench/cuda_prelude.sh"
    write_cuda_prelude "$root" "$out/gen"
    "${NVCC:-/usr/local/cuda/bin/nvcc}" -std=c++17 -O3 --expt-relaxed-constexpr \
      -gencode=arch=compute_90a,code=sm_90a -Xptxas -v \
      -I"$root" -I"$root/runtime/include" -I"$out/gen" "$here/cast_bench.cu" \
      -o "$out/fp8_cast_bench" 2> "$out/ptxas.txt"
    grep -B1 "registers" "$out/ptxas.txt" | grep -o "Used [0-9]* registers" | sort | uniq -c ;;
  run)
    timeout 300 "${2:?BIN}" ;;
  *) sed -n 2,7p "$0"; exit 2 ;;
esac
