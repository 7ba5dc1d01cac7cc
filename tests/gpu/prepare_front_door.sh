#!/usr/bin/env bash
# Here (no GPU; nvcc, Debian's /usr/bin/python3 with torch and numpy):
# builds what issue 16's GPU check (tests/gpu/front_door.sh) carries to the
# device machine, into one git-ignored folder:
#
#   bash tests/gpu/prepare_front_door.sh [DIR]   (default DIR: .devrun-fd)
#
# DIR/bin/trun, DIR/lib.tar.gz   trun and the Debian libraries it links
# DIR/named/   the named-arrays regression (tests/e2e/named_arrays_test.py
#              part a): linreg_cuda.so (fp32), its .npy arrays, the true
#              weights, and trun's run of the same model compiled for the
#              CPU here (cpu.jsonl, cpu.log, cpu.safetensors)
# DIR/gpt*/    tests/torch_import/torch_gpt.py's Gpt through tcc.from_torch
#              (parity_test.py's recipe; gpt_d64 with head size 64):
#              NAME_fp32.so and NAME_bf16.so for cuda, init.safetensors
#              (PyTorch's initial weights), text_train.bin (+ _vocab.json), batches.npz (the
#              sequential batches for PyTorch), config.json
# Then on the device machine (the device tool's run, carry=[DIR]):
#   bash tests/gpu/front_door.sh DIR "$OUT/fd"
# Compiles run under `nice` (a shared 2-core machine); STEPS (default 50).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun-fd}"
arch="${ARCH:-sm_90}"
steps="${STEPS:-50}"
for tool in tcc trun tcc-data; do
  [ -x "$build/bin/$tool" ] || { echo "prepare_front_door.sh: $build/bin/$tool missing: bash scripts/build.sh" >&2; exit 1; }
done
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib}
cp "$build/bin/trun" "$dir/bin/"
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"

# Models, data and the CPU reference run (front_door_models.py).
listing=$(nice -n 19 /usr/bin/python3 "$root/tests/gpu/front_door_models.py" "$build/bin" "$dir" "$steps")
while read -r name pb; do
  sub=$(dirname "$pb")
  if [ "$name" = linreg ]; then precisions=(fp32); else precisions=(fp32 bf16); fi
  for p in "${precisions[@]}"; do
    so="$sub/${name}_cuda.so"; [ "$name" = linreg ] || so="$sub/${name}_$p.so"
    echo "tcc compile --target cuda --arch $arch --precision $p $(basename "$pb") -> ${so#"$dir"/}"
    nice -n 19 "$build/bin/tcc" compile --target cuda --arch "$arch" --precision "$p" "$pb" -o "$so"
  done
done <<<"$listing"
du -sh "$dir"
