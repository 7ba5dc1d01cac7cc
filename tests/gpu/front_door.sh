#!/usr/bin/env bash
# On the device machine (an NVIDIA GPU, python3 with torch), after
# tests/gpu/prepare_front_door.sh here: issue 16's front door on a GPU.
#   1. named arrays: the regression of tests/e2e/named_arrays_test.py (part
#      a; written with `import tcc`) compiled --target cuda --precision fp32,
#      trained by trun from .npy files with the test's flags: per-step
#      losses and test loss against the --target cpu step's run (made
#      here), learned weights against the true ones;
#   2. tcc.from_torch: tests/torch_import/torch_gpt.py's Gpt (parity_test.py's
#      shape, and gpt_d64 with head size 64), 50 trun steps from PyTorch's
#      initial weights (--init-from, --data-order sequential) in fp32 and
#      bf16 against the same steps of PyTorch on the same GPU (fp32, TF32
#      off; torch.autocast bf16), and trun's --save-weights file loaded into
#      the module with load_state_dict(strict=True) on the GPU.
# The comparisons are tests/gpu/front_door_check.py's; it prints the table
# last. Exit 1 if a check failed.
#
#   bash tests/gpu/front_door.sh DIR [OUT]     (OUT default DIR/out)
set -uo pipefail
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $(basename "$0") DIR [OUT]   (DIR: what tests/gpu/prepare_front_door.sh made)" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
out="${2:-$dir/out}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
[ -d "$dir/lib" ] || tar -C "$dir" -xzf "$dir/lib.tar.gz"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/cudnn_path.sh"
trun="${TRUN:-$dir/bin/trun}"
py="${PYTHON:-python3}"
steps=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' "$dir/gpt/config.json")
# A dry run here (no GPU) points these at cpu steps: TRUN, LINREG_SO,
# GPT_SO_SUFFIX (NAME$SUFFIX.so for both precisions), DEVICE=cpu,
# PYTHON=/usr/bin/python3.
linreg_so="${LINREG_SO:-$dir/named/linreg_cuda.so}"

"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")'
nvidia-smi -L 2>/dev/null || true

echo "== 1. named arrays: linreg, 8 epochs, --seed 2 =="
n="$dir/named"
( set -x; "$trun" "$linreg_so" --data "x=$n/reg_x.npy,y=$n/reg_y.npy" \
    --test "x=$n/reg_test_x.npy,y=$n/reg_test_y.npy" --epochs 8 --log-every 1 --seed 2 \
    --metrics "$out/named_gpu.jsonl" --save-weights "$out/named_gpu.safetensors" ) \
  >"$out/named_gpu.log" 2>&1
echo "exit $?"; grep -E "^(step:|target:|input|test input|test loss|saved)" "$out/named_gpu.log"

echo "== 2. from_torch GPT: $steps steps, fp32 and bf16 =="
for name in gpt gpt_d64; do
  g="$dir/$name"
  for p in fp32 bf16; do
    so="$g/${name}_$p.so"; [ -n "${GPT_SO_SUFFIX:-}" ] && so="$g/${name}${GPT_SO_SUFFIX}.so"
    rm -f "$out/${name}_$p.jsonl"
    ( set -x; "$trun" "$so" --data "$g/text_train.bin" --data-order sequential \
        --steps "$steps" --init-from "$g/init.safetensors" --log-every 10 \
        --metrics "$out/${name}_$p.jsonl" --save-weights "$out/${name}_$p.safetensors" ) \
      >"$out/${name}_$p.log" 2>&1
    echo "$name $p: exit $?"; grep -E "^(target:|step 50/|saved|.*error)" "$out/${name}_$p.log"
  done
done

"$py" "$here/front_door_check.py" "$dir" "$out" --device "${DEVICE:-cuda}" 2>&1 | tee "$out/table.txt"
exit "${PIPESTATUS[0]}"
