#!/usr/bin/env bash
# Builds here (no GPU needed) everything the GPU checks and the GPT-2
# benchmark run on the device machine, into one folder that travels there:
#
#   bash tests/gpu/prepare.sh [DIR]      (default DIR: .devrun, git-ignored)
#
# DIR/bin       trun and the CUDA kernel tests (cutlass_gemm_test built
#               here with -DTCC_CUTLASS_TESTS=ON when missing); llm.c's
#               train_gpt2cu with LLMC_SRC=DIR (bench/gpt2/llmc.sh) or
#               LLMC_EXE=PATH (one built before)
# DIR/lib.tar.xz  trun's shared libraries that the device machine lacks
# DIR/steps.tar.xz  mlp and gpt_char for cpu (no -march=native) and cuda
#               (fp32, no TF32), gpt_char also for sm_80 and sm_100, GPT-2
#               124M for cuda (fp32, TF32, bf16); the AMP checks' steps
#               (tests/gpu/amp_checks.sh): gpt_char bf16 and fp16 (from a
#               huge loss scale), gpt2_short fp32 and bf16, the underflow
#               model fp32 / fp16 without loss scaling / fp16 dynamic / bf16
# DIR/data.tar.gz  a 6400-image Fashion-MNIST subset (.npy), the fortunes
#               character shards, and the shuffled fortunes as characters and
#               as bytes (the AMP checks)
# DIR/models    the AMP checks' model files (tcc-models + amp_models.py)
# Packed because what travels to the device machine is limited to 64 MiB;
# run.sh unpacks. Then on the device machine: bash tests/gpu/run.sh DIR
# (tests/gpu/README.md).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun}"
arch="${ARCH:-sm_90}"
for tool in tcc trun tcc-data tcc-models; do
  [ -x "$build/bin/$tool" ] || { echo "prepare.sh: $build/bin/$tool missing: bash scripts/build.sh" >&2; exit 1; }
done
[ -x "$build/bin/kernel_families_test" ] || { echo "prepare.sh: $build/bin/kernel_families_test missing (needs nvcc): ninja -C $build tcc_cuda_kernel_test" >&2; exit 1; }
# CUTLASS's epilogue GEMM test is built only on request (minutes of nvcc).
if [ ! -x "$build/bin/cutlass_gemm_test" ]; then
  cmake -S "$root" -B "$build" -DTCC_CUTLASS_TESTS=ON > /dev/null
  ninja -C "$build" tcc_cuda_cutlass_gemm_test
fi
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,steps,data,models}
# The kernel tests (binary:ninja target), each checked, then copied.
kernel_tests="attention_kernels_test:tcc_cuda_attention_test norm_kernels_test:tcc_cuda_norm_test
  norm_fp8_test:tcc_cuda_norm_fp8_test norm_grad_fp8_test:tcc_cuda_norm_grad_fp8_test
  fp8_rope_cast_test:tcc_cuda_fp8_rope_cast_test
  fp8_gemm_test:tcc_cuda_fp8_test
  batch_norm_kernels_test:tcc_cuda_batch_norm_test
  gemm_epilogue_test:tcc_cuda_gemm_epilogue_test gemm_search_test:tcc_cuda_gemm_search_test
  cudnn_attention_test:tcc_cuda_cudnn_attention_test
  attention_sm90_test:tcc_cuda_attention_sm90_test
  attention_sm90_backward_test:tcc_cuda_attention_sm90_backward_test"
for t in $kernel_tests; do
  [ -x "$build/bin/${t%%:*}" ] || { echo "prepare.sh: $build/bin/${t%%:*} missing (needs nvcc): ninja -C $build ${t##*:}" >&2; exit 1; }
done
cp "$build/bin/trun" "$build/bin/kernel_families_test" "$build/bin/cutlass_gemm_test" "$dir/bin/"
for t in $kernel_tests; do
  cp "$build/bin/${t%%:*}" "$dir/bin/"
done

# trun's libraries from Debian: the device machine runs another distribution.
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
# The cpu steps load OpenBLAS and libgomp at run time too.
copy_cpu_step_libs "$dir/lib"
# Packed: the working tree that travels is limited to 64 MiB (OpenBLAS alone
# is 36 MB; xz: 5.6 MB, gzip 12.5); run.sh and bench/gpt2/run.sh unpack it.
tar -C "$dir" -cJf "$dir/lib.tar.xz" lib && rm -rf "$dir/lib"

# Debian's python: numpy and torch (amp_models.py builds on gpt_reference.py).
py=/usr/bin/python3
# (Assigned on their own line, so that set -e stops on a failure.)
amp_names=$("$py" "$root/tests/gpu/amp_names.py" --shell)
amp_models=$("$py" "$root/tests/gpu/amp_models.py" --shell)
eval "$amp_names"; eval "$amp_models"
tcc="$build/bin/tcc"
cuda() { # OUT MODEL PRECISION [flags...]: a cuda step for the device's architecture
  local out=$1 model=$2 precision=$3; shift 3
  "$tcc" compile --target cuda --arch "$arch" "$AMP_PRECISION_FLAG" "$precision" "$model" \
    -o "$dir/steps/$out" "$@"
}
# Explicit precisions everywhere: the cuda default is bf16, and the checks
# that compare with the CPU (and the fp32 benchmark rows) are about fp32.
"$tcc" compile --target cpu --no-native "$AMP_PRECISION_FLAG" fp32 "$root/samples/mlp/mlp.pbtxt" -o "$dir/steps/mlp_cpu.so"
cuda mlp_cuda.so "$root/samples/mlp/mlp.pbtxt" fp32
"$tcc" compile --target cpu --no-native "$AMP_PRECISION_FLAG" fp32 "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cpu.so"
cuda gpt_char_cuda.so "$root/samples/gpt_char/gpt_char.pbtxt" fp32
# gpt_char with 2 heads of 64 (the sample's 4 heads of 32 stay written out on
# cuda, whose flash kernels take head sizes 64 and 128): the CPU-vs-GPU check
# then covers tg-fuse-attention's kernels on both sides.
"$build/bin/tcc-models" gpt --vocab 113 --context 128 --layers 4 --width 128 --heads 2 --batch 32 \
  --lr 5e-3 --warmup 50 --decay-steps 1000 --min-lr 5e-4 -o "$dir/models/gpt_char_d64.pbtxt"
"$tcc" compile --target cpu --no-native "$AMP_PRECISION_FLAG" fp32 "$dir/models/gpt_char_d64.pbtxt" -o "$dir/steps/gpt_char_d64_cpu.so"
cuda gpt_char_d64_cuda.so "$dir/models/gpt_char_d64.pbtxt" fp32
# The architecture checks: sm_80 code runs on Hopper through its PTX, sm_100
# code must be refused at start.
"$tcc" compile --target cuda --arch sm_80 "$AMP_PRECISION_FLAG" fp32 "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cuda_sm80.so"
"$tcc" compile --target cuda --arch sm_100 "$AMP_PRECISION_FLAG" fp32 "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cuda_sm100.so"
cuda gpt2_cuda.so "$root/samples/gpt2/gpt2_124m.pbtxt" fp32 -v
cuda gpt2_cuda_tf32.so "$root/samples/gpt2/gpt2_124m.pbtxt" tf32 -v
cuda gpt2_cuda_bf16.so "$root/samples/gpt2/gpt2_124m.pbtxt" bf16 -v
# The same bf16 step with attention written out (the "before" of issue 12).
cuda gpt2_cuda_bf16_unfused.so "$root/samples/gpt2/gpt2_124m.pbtxt" bf16 --no-fuse-attention

# The AMP checks' models. gpt_char: amp_models.py's flags must write the
# sample exactly (the PyTorch side builds the model from the same flags).
models="$dir/models"
build_gpt() { # NAME: $models/NAME.pbtxt from amp_models.py's tcc-models flags
  local text; local -a flags
  text=$("$py" "$root/tests/gpu/amp_models.py" args "$1")
  mapfile -t flags <<<"$text"
  "$build/bin/tcc-models" gpt "${flags[@]}" -o "$models/$1.pbtxt"
}
build_gpt gpt_char
diff <(grep -v '^#' "$root/samples/gpt_char/gpt_char.pbtxt") "$models/gpt_char.pbtxt" >/dev/null \
  || { echo "prepare.sh: amp_models.py's gpt_char flags no longer write samples/gpt_char/gpt_char.pbtxt" >&2; exit 1; }
build_gpt gpt2_short
build_gpt underflow
"$py" "$root/tests/gpu/amp_models.py" weight-loss "$models/underflow.pbtxt" "$models/underflow.pbtxt"
cp "$dir/steps/gpt_char_cuda.so" "$dir/steps/gpt_char_cuda_fp32.so"
cuda gpt_char_cuda_bf16.so "$models/gpt_char.pbtxt" bf16
if [ "$AMP_LOSS_SCALE_TOOL" = tcc ]; then
  cuda gpt_char_cuda_fp16_overflow.so "$models/gpt_char.pbtxt" fp16 \
    "$AMP_LOSS_SCALE_FLAG" "$AMP_LOSS_SCALE_DYNAMIC" "$AMP_INITIAL_LOSS_SCALE_FLAG" "$AMP_OVERFLOW_SCALE"
else  # trun takes the initial scale (amp_checks.sh passes it)
  cuda gpt_char_cuda_fp16_overflow.so "$models/gpt_char.pbtxt" fp16 \
    "$AMP_LOSS_SCALE_FLAG" "$AMP_LOSS_SCALE_DYNAMIC"
fi
cuda gpt2_short_cuda_fp32.so "$models/gpt2_short.pbtxt" fp32 -v
cuda gpt2_short_cuda_bf16.so "$models/gpt2_short.pbtxt" bf16 -v
cuda underflow_cuda_fp32.so "$models/underflow.pbtxt" fp32
cuda underflow_cuda_bf16.so "$models/underflow.pbtxt" bf16
cuda underflow_cuda_fp16_none.so "$models/underflow.pbtxt" fp16 "$AMP_LOSS_SCALE_FLAG" "$AMP_LOSS_SCALE_NONE"
cuda underflow_cuda_fp16_dynamic.so "$models/underflow.pbtxt" fp16 "$AMP_LOSS_SCALE_FLAG" "$AMP_LOSS_SCALE_DYNAMIC"
# Dynamic loss scaling: gpt_char with the default scale (2^16, must train
# like the unscaled fp32 step), and the MLP with its loss summed over the
# batch and a 2^127 start, which overflows (tests/e2e/loss_scaling_test.py on
# the CPU does the same).
"$tcc" compile --target cuda --arch "$arch" --precision fp32 --loss-scale dynamic "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cuda_ls.so"
sed -e 's/op: "mean"/op: "sum"/' -e 's/learning_rate: 0.1$/learning_rate: 0.0015625/' \
    -e 's/^training {$/training {\n  grad_clip: 1000.0/' "$root/samples/mlp/mlp.pbtxt" > "$dir/steps/mlp_sum.pbtxt"
"$tcc" compile --target cuda --arch "$arch" --precision fp32 --loss-scale dynamic --initial-loss-scale 1.7014118346046923e38 \
    --loss-scale-growth-interval 4 "$dir/steps/mlp_sum.pbtxt" -o "$dir/steps/mlp_sum_overflow_cuda.so"

# Data: 100 steps of the MLP (batch 64) need 6400 images.
/usr/bin/python3 "$root/tests/gpu/idx_subset.py" /usr/share/datasets/fashion-mnist 6400 "$dir/data"
mapfile -t files < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | LC_ALL=C sort)
"$build/bin/tcc-data" tokenize --level char --val-fraction 0.1 -o "$dir/data/fortunes" "${files[@]}" >/dev/null
# The AMP checks read batches in order (PyTorch reproduces them): the
# fortunes shuffled, so that each batch mixes the files' styles.
"$py" "$root/tests/gpu/shuffle_fortunes.py" /usr/share/games/fortunes "$dir/data/fortunes_shuffled.txt"
"$build/bin/tcc-data" tokenize --level char --val-fraction 0.1 \
  -o "$dir/data/$AMP_DATA_gpt_char" "$dir/data/fortunes_shuffled.txt" >/dev/null
"$build/bin/tcc-data" tokenize --level byte --val-fraction 0.1 \
  -o "$dir/data/$AMP_DATA_gpt2_short" "$dir/data/fortunes_shuffled.txt" >/dev/null
rm "$dir/data/fortunes_shuffled.txt"
cmp -s "$dir/data/fortunes_vocab.json" "$dir/data/${AMP_DATA_gpt_char}_vocab.json" \
  || { echo "prepare.sh: the shuffled fortunes have another character vocabulary" >&2; exit 1; }
# The vision ops (issue 17): conv / pool kernels, a small CNN cpu vs cuda.
bash "$root/tests/gpu/prepare_vision.sh" "$dir/vision"
# llm.c, the GPT-2 benchmark's hand-written peer, when LLMC_SRC names its
# source (a work tree or git directory: bench/gpt2/llmc.sh).
# LLMC_EXE=PATH copies a train_gpt2cu that llmc.sh built before instead
# (its cuDNN unit is ~11 minutes of nvcc on 2 cores).
if [ -n "${LLMC_EXE:-}" ]; then
  cp "$LLMC_EXE" "$dir/bin/train_gpt2cu"
elif [ -n "${LLMC_SRC:-}" ]; then
  bash "$root/bench/gpt2/llmc.sh" build "$LLMC_SRC" "$dir/bin"
fi
# Packed (setup.sh unpacks them there): the device tool carries at most 64
# MiB with the working tree.
tar -C "$dir" -cJf "$dir/vision.tar.xz" vision && rm -rf "${dir:?}/vision"
tar -C "$dir" -cJf "$dir/bin.tar.xz" bin && rm -rf "${dir:?}/bin"
tar -C "$dir" -cJf "$dir/steps.tar.xz" steps && rm -rf "${dir:?}/steps"
tar -C "$dir" -czf "$dir/data.tar.gz" data && rm -rf "${dir:?}/data"
du -sh "$dir"
