#!/usr/bin/env bash
# The main job, from a fresh clone: install dependencies, build, compile the
# MLP sample into a step library, train it on Fashion-MNIST — on the GPU when
# there is one (nvidia-smi lists a GPU and nvcc is installed), else on the
# CPU; TARGET=cpu|cuda chooses — and print the test accuracy.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" tcc trun
source "$root/scripts/target.sh" # sets target
out="$build/samples/mlp"
mkdir -p "$out"
"$build/bin/tcc" compile --target "$target" "$root/samples/mlp/mlp.pbtxt" -o "$out/mlp.so" --dump-dir "$out/dump"
echo "compiled samples/mlp/mlp.pbtxt for $target -> $out/mlp.so (per-pass IR in $out/dump)"
"$build/bin/trun" "$out/mlp.so" --data /usr/share/datasets/fashion-mnist --epochs "${EPOCHS:-2}" --seed 0 "$@"
