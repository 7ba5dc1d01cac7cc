# Sourced by the benchmark scripts that build a .cu from the CUDA prelude
# without the CMake build (bench/attention/run.sh, bench/reduce/run.sh).
# write_cuda_prelude ROOT GEN: the prelude pieces in the order
# compiler/codegen/CodegenSources.cmake lists them, concatenated into
# GEN/compiler/codegen/cuda/cuda_prelude.cuh (what the build generates), so
# `nvcc -I"$GEN"` finds it as the kernel tests do.
write_cuda_prelude() {
  local root=$1 gen=$2/compiler/codegen/cuda pieces p
  mkdir -p "$gen"
  pieces=$(sed -n '/^set(TCC_CUDA_PRELUDE_PIECES/,/^)/p' \
             "$root/compiler/codegen/CodegenSources.cmake" |
           grep -o 'cuda/prelude/[a-z0-9_]*\.cuh')
  for p in $pieces; do cat "$root/compiler/codegen/$p"; done > "$gen/cuda_prelude.cuh"
}
