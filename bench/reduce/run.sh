#!/usr/bin/env bash
# The reduction benchmark (issue 33): tcc's planned reductions (any axes)
# and PyTorch's sum / mean / var on the same GPU, the shapes of shapes.txt,
# with a cudaMemcpy of each input for the bandwidth a streaming kernel can
# reach. Prints the table of table.py last.
#
#   bash bench/reduce/run.sh [OUTDIR]
#
# Builds reduce_bench.cu with nvcc (sm_90a + sm_80) from the prelude pieces
# of compiler/codegen/CodegenSources.cmake, unless TCC_REDUCE_BENCH names a
# binary built already (e.g. one carried to the device machine).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
bin=${TCC_REDUCE_BENCH:-}
if [ -z "$bin" ]; then
  source "$here/../cuda_prelude.sh"
  write_cuda_prelude "$root" "$out/gen"
  nvcc -std=c++17 -O3 --expt-relaxed-constexpr \
    -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 \
    -I"$root" -I"$out/gen" "$here/reduce_bench.cu" \
    "$root/compiler/codegen/cuda/ReducePlan.cpp" -o "$out/reduce_bench"
  bin=$out/reduce_bench
fi
timeout 300 "$bin" "$here/shapes.txt" > "$out/tcc.jsonl"
PYTHONUNBUFFERED=1 timeout 300 python3 "$here/torch_reduce.py" "$here/shapes.txt" > "$out/torch.jsonl"
python3 "$here/table.py" "$out/tcc.jsonl" "$out/torch.jsonl" | tee "$out/table.md"
