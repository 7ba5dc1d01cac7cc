#!/usr/bin/env bash
# End to end: compile the committed MLP sample with tcc, train it with trun on
# the real Fashion-MNIST data (Debian package dataset-fashion-mnist) on the
# CPU, and require test accuracy >= 0.80.
# Usage: mlp_fashion_mnist.sh TCC TRUN SAMPLE WORKDIR
set -euo pipefail
tcc=$1 trun=$2 sample=$3 work=$4
data=/usr/share/datasets/fashion-mnist
rm -rf "$work" && mkdir -p "$work"
"$tcc" compile --target cpu "$sample" -o "$work/mlp.so"
"$trun" "$work/mlp.so" --data "$data" --epochs 1 --seed 1 | tee "$work/trun.log"
acc=$(sed -n 's/^test accuracy: \([0-9.]*\).*/\1/p' "$work/trun.log")
if [ -z "$acc" ]; then
  echo "FAIL: trun printed no 'test accuracy:' line" >&2
  exit 1
fi
if ! awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }'; then
  echo "FAIL: test accuracy $acc < 0.80" >&2
  exit 1
fi
echo "PASS: test accuracy $acc >= 0.80"
