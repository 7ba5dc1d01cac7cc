#!/usr/bin/env bash
# llm.c (github.com/karpathy/llm.c, MIT), the hand-written GPT-2 trainer that
# issue 37 measures tcc against, as a peer in bench/gpt2/run.sh's table.
#
#   bash bench/gpt2/llmc.sh build SRC DEST   here: builds SRC's train_gpt2cu
#       (bf16, cuDNN attention, one GPU, sm_90 or $GPU_COMPUTE_CAPABILITY)
#       into DEST (e.g. the bin/ of tests/gpu/prepare.sh's folder, which
#       prepare.sh does when LLMC_SRC=SRC is set). SRC is an llm.c work tree
#       or its git directory (e.g. the `fetch` tool's mirror); nothing is
#       downloaded: the device machine and this one cannot reach GitHub.
#   bash bench/gpt2/llmc.sh run EXE TOKENS STEPS OUT.log [FLAGS...]   on the device:
#       GPT-2 124M from random init ("d12"), B=16, T=1024, STEPS+5 steps on
#       the token shard TOKENS (llm.c's format: random_tokens.py writes it),
#       no activation recomputation (-r 0, llm.c's GPT-2 124M script), no
#       sampling, validation only at step 0 (outside the timed steps).
#       FLAGS go to train_gpt2cu after these (e.g. -ge 2: GELU fused into
#       cuBLASLt's epilogues, forward and backward; llm.c's default is 0).
#       llm.c times each step between two CUDA events and prints "X ms";
#       table.py --llmc reads OUT.log.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_usage="usage: llmc.sh build SRC DEST"
run_usage="usage: llmc.sh run EXE TOKENS STEPS OUT.log [FLAGS...]"

case "${1:-}" in
build)
  src=${2:?$build_usage}
  dest=${3:?$build_usage}
  frontend="$root/.deps/cudnn-frontend"
  [ -f "$frontend/include/cudnn_frontend.h" ] ||
    { echo "llmc.sh: $frontend missing: bash scripts/setup.sh fetches it" >&2; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  if [ -f "$src/train_gpt2.cu" ]; then
    cp -r "$src/." "$work/"
  elif git --git-dir="$src" rev-parse --verify -q HEAD >/dev/null; then
    git --git-dir="$src" archive HEAD | tar -x -C "$work"
  else
    echo "llmc.sh: $src is neither an llm.c work tree nor its git directory" >&2
    exit 1
  fi
  # llm.c's Makefile looks for the cuDNN frontend in ./cudnn-frontend. It
  # always links NVML, which this toolkit lacks (mfu.h then compiles without
  # it): the libraries are given by hand (the cuDNN frontend calls NVRTC).
  ln -s "$frontend" "$work/cudnn-frontend"
  # CUDA 13 dropped cudaMemAdvise's int-device form (llm.c is written for
  # CUDA 12): its one call, in the out-of-memory fallback to managed memory,
  # takes the host location as a cudaMemLocation instead. Nothing else changes.
  nvcc_major=$("${NVCC:-/usr/local/cuda/bin/nvcc}" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  if [ "${nvcc_major:-0}" -ge 13 ]; then
    sed -i 's|cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)|cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})|' \
      "$work/llmc/cuda_utils.cuh"
  fi
  nice make -C "$work" train_gpt2cu USE_CUDNN=1 NO_MULTI_GPU=1 NO_USE_MPI=1 \
    GPU_COMPUTE_CAPABILITY="${GPU_COMPUTE_CAPABILITY:-90}" \
    NVCC="${NVCC:-/usr/local/cuda/bin/nvcc}" "NVCC_LDFLAGS=-lcublas -lcublasLt -lcudnn -lnvrtc"
  mkdir -p "$dest"
  cp "$work/train_gpt2cu" "$dest/"
  echo "llmc.sh: $dest/train_gpt2cu ($(git --git-dir="$src" rev-parse --short HEAD 2>/dev/null ||
    git -C "$src" rev-parse --short HEAD 2>/dev/null || echo "unknown commit"))"
  ;;
run)
  exe=${2:?$run_usage}
  tokens=${3:?$run_usage}
  steps=${4:?$run_usage}
  log=${5:?$run_usage}
  shift 5
  # llm.c reads gpt2_tokenizer.bin from its working folder only to print
  # samples; without it, it warns and goes on (sampling is off anyway).
  (cd "$(dirname "$log")" && timeout 300 "$exe" -i "$tokens" -j "$tokens" -e d12 \
    -b 16 -t 1024 -d 16384 -x $((steps + 5)) -v 1000000 -m 1 -s 0 -r 0 -z 0 -h 0 \
    -l 0.0006 -u 0 -c 0.1 -y 0 "$@") >"$log" 2>&1
  ;;
*)
  echo "$build_usage | ${run_usage#usage: }" >&2
  exit 2
  ;;
esac
