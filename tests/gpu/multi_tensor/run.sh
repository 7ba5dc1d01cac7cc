#!/bin/bash
# On the device (see prepare.sh): the multi-tensor builds against the
# per-tensor ones. The 800-parameter model must come out bit-identical
# after two AdamW steps with clipping; GPT-2's losses and gradient norms
# are printed for both, with the step time and the optimizer's profiled
# time.
set -e
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
g++ -O2 -std=c++17 -I. -o step_check step_check.cpp -ldl
echo "== 800 tensors of odd sizes, AdamW + clip: 2 steps"
./step_check ./many_multi.so /tmp/mm.bin 2 2
./step_check ./many_single.so /tmp/ms.bin 2 2
if cmp -s /tmp/mm.bin /tmp/ms.bin; then echo "many: bit-identical"; else
  python3 compare.py /tmp/mm.bin /tmp/ms.bin; echo "many: FAIL"; exit 1; fi
echo "== GPT-2 124M bf16, multi-tensor build"
./step_check ./gpt2_multi.so - 2 50257 profile
echo "== GPT-2 124M bf16, per-tensor build (--no-fuse-horizontal)"
./step_check ./gpt2_single.so - 2 50257 profile
