#!/usr/bin/env bash
# Batch norm on the GPU (issue 17): builds here what tests/gpu/batch_norm_run.sh
# runs on the device machine, into DIR (default .devrun-bn, git-ignored):
#   the CNN of tests/torch_import/batch_norm_parity_test.py (conv, BatchNorm2d,
#   ReLU, max pool twice, BatchNorm1d, Linear) with its data and PyTorch
#   weights (the test's CPU run is the reference), an MLP with BatchNorm1d on
#   (N, C), their cuda steps (fp32; the CNN also bf16), trun and its libraries.
# Then: run(command="bash tests/gpu/batch_norm_run.sh DIR", carry=[DIR]) and
# here: python3 tests/gpu/batch_norm_compare.py DIR FILES_AT.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun-bn}"
rm -rf "$dir" && mkdir -p "$dir"/{bin,steps,data,work}
py=/usr/bin/python3
PYTHONPATH="$root/python" "$py" "$root/tests/torch_import/batch_norm_parity_test.py" \
  --bin-dir "$build/bin" --work-dir "$dir/work" > "$dir/work/cpu_parity.log"
for f in x y xt yt; do cp "$dir/work/$f.npy" "$dir/data/c$f.npy"; done
cp "$dir/work/init.safetensors" "$dir/data/cnn_init.safetensors"
PYTHONPATH="$root/python" "$py" "$root/tests/gpu/batch_norm_compare.py" --prepare "$dir"
"$build/bin/tcc" compile --target cuda --precision fp32 "$dir/work/cnn.pb" -o "$dir/steps/cnn_fp32.so"
"$build/bin/tcc" compile --target cuda --precision bf16 "$dir/work/cnn.pb" -o "$dir/steps/cnn_bf16.so"
"$build/bin/tcc" compile --target cuda --precision fp32 "$dir/work/mlp_bn.pb" -o "$dir/steps/mlp_fp32.so"
cp "$build/bin/trun" "$dir/bin/"
source "$root/tests/gpu/trun_libs.sh"
mkdir -p "$dir/lib" && copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"
echo "prepared $dir ($(du -sh "$dir" | cut -f1))"
