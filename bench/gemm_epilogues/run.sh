#!/usr/bin/env bash
# On the device machine (one H200): the CUTLASS epilogue kernels
# against float64 and beside cuBLASLt's epilogues (cutlass_gemm_test
# --bench), then GPT-2 124M bf16 trained by trun with the CUTLASS kernels
# timed against cuBLASLt (the default) and with TCC_GEMM_CUTLASS=0
# (cuBLASLt only), alternating, RUNS times each, STEPS steps after 5 warm-up
# steps; then one --profile of each; then torch.compile (bench/torch_gpt2.py)
# in the same call. Prints the table last.
#
#   bash bench/gemm_epilogues/run.sh DIR [OUT]   (DIR from prepare.sh)
set -uo pipefail
dir="$(cd "${1:?usage: run.sh DIR [OUT]}" && pwd)"
out="${2:-$dir/out}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
steps="${STEPS:-30}" runs="${RUNS:-3}"
mkdir -p "$out"
[ -d "$dir/lib" ] || tar -C "$dir" -xzf "$dir/lib.tar.gz"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/../../tests/gpu/cudnn_path.sh"
# A GEMM cache of this run's own: every choice is timed afresh.
export TCC_GEMM_CACHE="$out/gemm-cache.txt"
rm -f "$TCC_GEMM_CACHE"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
timeout 300 "$dir/bin/cutlass_gemm_test" --bench > "$out/cutlass_gemm_test.txt" 2>&1
echo "cutlass_gemm_test exit $?" >> "$out/cutlass_gemm_test.txt"
tokens="$out/gpt2_tokens.bin"
[ -f "$tokens" ] || python3 "$here/../gpt2/random_tokens.py" "$tokens" 4000000
for r in $(seq 1 "$runs"); do
  for v in cutlass cublaslt; do
    flag=""; [ $v = cublaslt ] && flag=0
    TCC_GEMM_CUTLASS=$flag timeout 300 "$dir/bin/trun" "$dir/steps/gpt2_bf16.so" --data "$tokens" \
      --steps $((steps + 5)) --seed 0 --log-every 5 --metrics "$out/${v}_$r.jsonl" \
      > "$out/${v}_$r.log" 2>&1
  done
done
for v in cutlass cublaslt; do
  flag=""; [ $v = cublaslt ] && flag=0
  TCC_GEMM_CUTLASS=$flag timeout 300 "$dir/bin/trun" "$dir/steps/gpt2_bf16.so" --data "$tokens" \
    --steps 6 --seed 0 --profile > "$out/profile_$v.txt" 2>&1
done
# The peer in the same call: torch.compile (bench/torch_gpt2.py, bf16 autocast).
PYTHONUNBUFFERED=1 timeout 420 python3 "$here/../torch_gpt2.py" --mode compile --strict \
  --steps 20 --warmup 5 > "$out/torch.jsonl" 2> "$out/torch.log" ||
  { echo "torch_gpt2.py failed:"; tail -n 5 "$out/torch.log"; }
python3 "$here/table.py" "$out" --warmup 5 | tee "$out/table.md"
