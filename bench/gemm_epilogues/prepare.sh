#!/usr/bin/env bash
# Builds here (no GPU needed) what the CUTLASS-epilogue benchmark of issue 37
# runs on the device machine, into one folder that travels there
# (git-ignored):
#
#   bash bench/gemm_epilogues/prepare.sh [DIR]   (default DIR: .devrun-gemm)
#
# DIR/bin/trun, DIR/lib.tar.gz   trun and the Debian libraries it links
# DIR/bin/cutlass_gemm_test      the CUTLASS kernels against float64 and,
#                                with --bench, beside cuBLASLt's epilogues
# DIR/steps/gpt2_bf16.so         GPT-2 124M (B16 T1024) bf16 for sm_90, its
#                                epilogue products able to run CUTLASS (the
#                                unit is linked in: tcc compile -v says so)
# Then on the device machine: bash bench/gemm_epilogues/run.sh DIR.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun-gemm}"
for tool in tcc trun; do
  [ -x "$build/bin/$tool" ] || { echo "prepare.sh: $build/bin/$tool missing: bash scripts/build.sh" >&2; exit 1; }
done
if [ ! -x "$build/bin/cutlass_gemm_test" ]; then
  cmake -S "$root" -B "$build" -DTCC_CUTLASS_TESTS=ON > /dev/null
  ninja -C "$build" tcc_cuda_cutlass_gemm_test
fi
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,steps}
cp "$build/bin/trun" "$build/bin/cutlass_gemm_test" "$dir/bin/"
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"
"$build/bin/tcc" compile --target cuda --arch sm_90 --precision bf16 -v \
  "$root/samples/gpt2/gpt2_124m.pbtxt" -o "$dir/steps/gpt2_bf16.so" 2>&1 | tee "$dir/compile.txt"
grep -q "may run CUTLASS" "$dir/compile.txt" ||
  { echo "prepare.sh: the step links no CUTLASS kernels (see $dir/compile.txt)" >&2; exit 1; }
du -sh "$dir"
