#!/usr/bin/env bash
# The main job, from a fresh clone: install dependencies, build, compile the
# MLP sample into a step library, train it on Fashion-MNIST — on the GPU when
# there is one (nvidia-smi lists a GPU and nvcc is installed), else on the
# CPU; TARGET=cpu|cuda chooses — and print the test accuracy. Then the same
# for samples/python_mlp, a classifier written in Python with tcc.nn
# (model.py writes its model file; PYTHON_SAMPLE=0 skips it), then the
# vision samples samples/cnn (conv + batch norm, CNN_EPOCHS, default 3) and
# samples/vit (a vision transformer, VIT_EPOCHS, default 6), also written
# with tcc.nn (VISION_SAMPLES=0 skips them; on the 2-core CPU they take
# about 4 and 6 minutes: 80 and 68 s an epoch measured on a busy machine).
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

if [ "${PYTHON_SAMPLE:-1}" != 0 ]; then
  pout="$build/samples/python_mlp"
  mkdir -p "$pout"
  PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 "$root/samples/python_mlp/model.py" -o "$pout/python_mlp.pbtxt" --epochs "${EPOCHS:-2}"
  "$build/bin/tcc" compile --target "$target" "$pout/python_mlp.pbtxt" -o "$pout/python_mlp.so"
  echo "compiled samples/python_mlp (written by model.py) for $target -> $pout/python_mlp.so"
  "$build/bin/trun" "$pout/python_mlp.so" --data /usr/share/datasets/fashion-mnist --epochs "${EPOCHS:-2}" --seed 0 "$@"
fi

if [ "${VISION_SAMPLES:-1}" != 0 ]; then
  for sample in cnn vit; do
    if [ "$sample" = cnn ]; then epochs="${CNN_EPOCHS:-3}"; else epochs="${VIT_EPOCHS:-6}"; fi
    vout="$build/samples/$sample"
    mkdir -p "$vout"
    PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 "$root/samples/$sample/model.py" -o "$vout/$sample.pbtxt" --epochs "$epochs"
    "$build/bin/tcc" compile --target "$target" "$vout/$sample.pbtxt" -o "$vout/$sample.so"
    echo "compiled samples/$sample (written by model.py) for $target -> $vout/$sample.so"
    "$build/bin/trun" "$vout/$sample.so" --data /usr/share/datasets/fashion-mnist --epochs "$epochs" --seed 0 "$@"
  done
fi
