#!/bin/bash
# Here (no GPU needed): compiles the device check of kern-fuse-horizontal
# into DIR (default .devrun-multi-tensor): a model of 800 odd-sized
# parameters and GPT-2 124M bf16, each with and without the grouping
# (--no-fuse-horizontal), plus the harness's sources. Then on the device:
#   bash DIR/run.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin="${TCC_BUILD_DIR:-$root/build}/bin"
dir="${1:-$root/.devrun-multi-tensor}"
here="$root/tests/gpu/multi_tensor"
mkdir -p "$dir/tcc"
cp "$here/step_check.cpp" "$here/compare.py" "$here/run.sh" "$dir/"
cp "$root/runtime/include/tcc/step_abi.h" "$dir/tcc/"
python3 "$here/make_model.py" 800 > "$dir/many.pbtxt"
for flag in "" --no-fuse-horizontal; do
  name=$([ -z "$flag" ] && echo multi || echo single)
  "$bin/tcc" compile "$dir/many.pbtxt" --target cuda --arch sm_90 --precision fp32 \
    $flag -o "$dir/many_$name.so"
  "$bin/tcc" compile "$root/samples/gpt2/gpt2_124m.pbtxt" --target cuda --arch sm_90 \
    --precision bf16 $flag -o "$dir/gpt2_$name.so"
done
