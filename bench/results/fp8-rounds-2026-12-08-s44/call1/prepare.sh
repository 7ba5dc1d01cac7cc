#!/usr/bin/env bash
# Builds here the folder call.sh runs from on the device (.devrun-s44,
# ~27 MB: with the tracked files, under the 64 MiB a call carries), from the
# work tree's main with session 43's staged-norm-cast patch applied only
# for the fp8-staged step and norm_fp8_test:
#   the 1B decoder's bf16, fp8, fp8-staged, bf16-det and fp8-det steps
#   (bench/fp8/prepare.sh, VARIANT="det:--deterministic"), trun, its
#   libraries, the byte-level text data, norm_fp8_test of the patch.
# Run from the repository root with a clean tree and build/ built
# (scripts/build.sh): bash bench/results/fp8-rounds-2026-12-08-s44/call1/prepare.sh
set -euo pipefail
patch=bench/results/fp8-rounds-2026-12-07-s43/call3/staged-norm-cast.patch
git diff --quiet || { echo "prepare.sh: the work tree has changes; commit or stash them" >&2; exit 1; }
d=.devrun-s44; work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
ninja -C build tcc trun tcc-data tcc-models
MODELS=llama1b PRECISIONS="bf16 fp8" VARIANT="det:--deterministic" bash bench/fp8/prepare.sh "$work/main"
git apply "$patch"
trap 'git apply -R "$patch"; rm -rf "$work"' EXIT
ninja -C build tcc tcc_cuda_norm_fp8_test
./build/bin/tcc compile --target cuda --arch sm_90 --precision fp8 "$work/main/models/llama1b.pb" \
  -o "$work/llama1b_fp8-staged.so"
cp build/bin/norm_fp8_test "$work/"
git apply -R "$patch"; trap 'rm -rf "$work"' EXIT
ninja -C build tcc # main's again
rm -rf "$d" && mkdir -p "$d/bin" "$work/s"
cp "$work/main/lib.tar.gz" "$work/main/data.tar.gz" "$d/"
cp "$work/main/bin/trun" "$work/norm_fp8_test" "$d/bin/"
tar -C "$work/s" -xJf "$work/main/steps.tar.xz"
mv "$work/llama1b_fp8-staged.so" "$work/s/steps/"
tar -C "$work/s" -cJf "$d/steps.tar.xz" steps
ls "$work/s/steps"; du -sh "$d"
