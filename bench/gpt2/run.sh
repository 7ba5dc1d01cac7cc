#!/usr/bin/env bash
# The GPT-2 124M benchmark of issue 5, on the device machine, all systems in
# ONE run on one GPU: PyTorch eager, torch.compile (bench/torch_gpt2.py: bf16
# autocast, SDPA, fused AdamW, clip 1.0) and tcc (trun on the step.so files
# that tests/gpu/prepare.sh compiled here with --precision fp32, tf32 (fp32
# with TF32 products) and bf16 (tg-amp: bf16 products, fp32 master weights
# and AdamW; with cuDNN attention, with tcc's flash kernels (TCC_CUDNN=0),
# and --no-fuse-attention), and llm.c (bf16, cuDNN attention; with its
# defaults and with -ge 2) when prepare.sh put it in DIR/bin (LLMC_SRC= or
# LLMC_EXE=: bench/gpt2/llmc.sh). Prints the table of
# bench/gpt2/table.py last: ms/step, MFU and peak memory, and ratios to
# PyTorch eager, torch.compile and llm.c.
#
#   bash bench/gpt2/run.sh DIR [OUT]    (DIR from tests/gpu/prepare.sh)
set -uo pipefail
dir="$(cd "${1:?usage: run.sh DIR [OUT]}" && pwd)"
out="${2:-$dir/bench}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
steps="${STEPS:-20}"
mkdir -p "$out"
source "$here/../../tests/gpu/unpack_parts.sh"
unpack_parts "$dir" lib steps data bin
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/../../tests/gpu/cudnn_path.sh"
tokens="$dir/data/gpt2_tokens.bin"
[ -f "$tokens" ] || python3 "$here/random_tokens.py" "$tokens" 4000000

# tcc first (its process then exits and frees the GPU), 5 warm-up steps
# (the first includes cuBLASLt planning and the CUDA graph capture) + timed.
# bf16_flash: the bf16 step with cuDNN off (TCC_CUDNN=0): tcc's own flash
# kernels, for the before/after of cuDNN attention.
for variant in fp32 tf32 bf16_unfused bf16_flash bf16; do
  step="$dir/steps/gpt2_cuda.so"; [ $variant != fp32 ] && step="$dir/steps/gpt2_cuda_${variant%_flash}.so"
  cudnn=1; [ $variant = bf16_flash ] && cudnn=0
  rm -f "$out/tcc_$variant.jsonl"
  TCC_CUDNN=$cudnn "$dir/bin/trun" "$step" --data "$tokens" --steps $((steps + 5)) --seed 0 --log-every 5 \
    --metrics "$out/tcc_$variant.jsonl" 2>&1 | tee "$out/tcc_$variant.log"
done
# llm.c after tcc, in its own process too.
# Twice: its defaults, and with GELU fused into cuBLASLt's epilogues (-ge 2,
# off by default in llm.c); the "vs llm.c" column takes the faster.
llmc=()
if [ -x "$dir/bin/train_gpt2cu" ]; then
  bash "$here/llmc.sh" run "$dir/bin/train_gpt2cu" "$tokens" "$steps" "$out/llmc.log" ||
    { echo "llm.c failed:"; tail -n 20 "$out/llmc.log"; }
  bash "$here/llmc.sh" run "$dir/bin/train_gpt2cu" "$tokens" "$steps" "$out/llmc_ge2.log" -ge 2 ||
    { echo "llm.c -ge 2 failed:"; tail -n 20 "$out/llmc_ge2.log"; }
  llmc=(--llmc "$out/llmc.log" --llmc "bf16, cuDNN attention, -ge 2: GELU in cuBLASLt epilogues=$out/llmc_ge2.log")
fi
PYTHONUNBUFFERED=1 python3 "$here/../torch_gpt2.py" --mode both --strict --steps "$steps" --warmup 5 \
  >"$out/torch.jsonl" 2>"$out/torch.log" || { echo "torch_gpt2.py failed:"; tail -n 20 "$out/torch.log"; }
python3 "$here/table.py" --torch "$out/torch.jsonl" --tcc fp32="$out/tcc_fp32.jsonl" \
  --tcc "fp32 + TF32 products"="$out/tcc_tf32.jsonl" --tcc "bf16, attention written out"="$out/tcc_bf16_unfused.jsonl" \
  --tcc "bf16, tcc flash attention (cuDNN off)"="$out/tcc_bf16_flash.jsonl" \
  --tcc "bf16 (tg-amp, cuDNN attention)"="$out/tcc_bf16.jsonl" \
  "${llmc[@]}" --warmup 5 | tee "$out/table.md"
