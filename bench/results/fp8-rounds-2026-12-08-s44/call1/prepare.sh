#!/usr/bin/env bash
# Builds here the folders call.sh runs from on the device, from the
# work tree's main, with two patches applied only for what tests them:
#   main: the 1B decoder's bf16, fp8, bf16-det and fp8-det steps
#     (bench/fp8/prepare.sh, VARIANT="det:--deterministic"), trun, its
#     libraries, the byte-level text data;
#   A (session 43's call3/staged-norm-cast.patch, the forward norm cast
#     with its rows staged in shared memory): the fp8-staged step and
#     norm_fp8_test (both kernels against the unfused pair);
#   B (norm-grad-cast-uncached.patch, here: launch_layer_norm_backward_fp8_
#     quantize's cache_grad, default true as main's kernel):
#     norm_grad_fp8_test (both forms against the unfused pair, and their
#     bench); B with norm-grad-cast-uncached-default.patch (cache_grad
#     false by default, the norm backward cast without its 20-byte spill):
#     the fp8-uncached step.
# Run from the repository root with a clean tree and build/ built
# (scripts/build.sh): bash bench/results/fp8-rounds-2026-12-08-s44/call1/prepare.sh
# (~6 minutes: two test binaries and three tcc builds; the steps' objects
# come from the cache when it has them). Two folders, each with the tracked
# files (32.5 MB) under the 64 MiB a call carries: .devrun-s44 (~26 MB: the
# tests, and the bf16, fp8, fp8-staged and fp8-uncached steps) and
# .devrun-s44-loss (~20 MB: bf16-det, fp8-det and the bf16 step).
set -euo pipefail
here=bench/results/fp8-rounds-2026-12-08-s44/call1
staged=bench/results/fp8-rounds-2026-12-07-s43/call3/staged-norm-cast.patch
uncached=$here/norm-grad-cast-uncached.patch
uncached_default=$here/norm-grad-cast-uncached-default.patch
git diff --quiet -- compiler tests || { echo "prepare.sh: compiler/ or tests/ has changes; commit or stash them" >&2; exit 1; }
d=.devrun-s44; work=$(mktemp -d)
restore() { git checkout -q -- compiler tests; rm -rf "$work"; }
trap restore EXIT
ninja -C build tcc trun tcc-data tcc-models
MODELS=llama1b PRECISIONS="bf16 fp8" VARIANT="det:--deterministic" bash bench/fp8/prepare.sh "$work/main"
model="$work/main/models/llama1b.pb"
step() { # NAME: the fp8 step with the tree as it is now
  ninja -C build tcc
  ./build/bin/tcc compile --target cuda --arch sm_90 --precision fp8 "$model" -o "$work/llama1b_fp8-$1.so"
}
git apply "$staged"
ninja -C build tcc_cuda_norm_fp8_test && cp build/bin/norm_fp8_test "$work/"
step staged
git checkout -q -- compiler tests
git apply "$uncached"
ninja -C build tcc_cuda_norm_grad_fp8_test && cp build/bin/norm_grad_fp8_test "$work/"
git apply "$uncached_default"
step uncached
git checkout -q -- compiler tests
ninja -C build tcc tcc_cuda_norm_fp8_test tcc_cuda_norm_grad_fp8_test # main's again
# Two folders, one a call (both with the tracked files pass the 64 MiB):
# $d for the kernel tests and the rounds, $d-loss for the loss runs.
rm -rf "$d" "$d-loss" && mkdir -p "$d/bin" "$d-loss/bin" "$work/s/steps" "$work/l/steps"
for f in "$d" "$d-loss"; do
  cp "$work/main/lib.tar.gz" "$work/main/data.tar.gz" "$f/"
  cp "$work/main/bin/trun" "$f/bin/"
done
cp "$work/norm_fp8_test" "$work/norm_grad_fp8_test" "$d/bin/"
tar -C "$work" -xJf "$work/main/steps.tar.xz"
mv "$work"/steps/llama1b_*-det.so "$work/l/steps/"
cp "$work/steps/llama1b_bf16.so" "$work/l/steps/" # the floor
mv "$work"/steps/*.so "$work"/llama1b_fp8-*.so "$work/s/steps/"
tar -C "$work/s" -cJf "$d/steps.tar.xz" steps
tar -C "$work/l" -cJf "$d-loss/steps.tar.xz" steps
ls "$work/s/steps" "$work/l/steps"; du -sh "$d" "$d-loss"
