#!/usr/bin/env bash
# Here (no GPU; nvcc, /usr/bin/python3 with numpy): builds what the GPU
# vision check (tests/gpu/vision_checks.sh) carries to the device machine,
# into one git-ignored folder:
#
#   bash tests/gpu/prepare_vision.sh [DIR]   (default DIR: .devrun-vision)
#
# DIR/bin/trun, DIR/bin/conv_kernels_test (and cudnn_conv_test), DIR/lib.tar.gz (trun's Debian
#            libraries)
# DIR/cnn/   tests/gpu/vision/cnn_check.pbtxt compiled for cuda (fp32 and
#            bf16) and the CPU run of the same model made here (cpu.jsonl:
#            STEPS steps, default 40), its data (x.npy, y.npy)
# Then on the device machine (the device tool's run, carry=[DIR]):
#   bash tests/gpu/vision_checks.sh DIR "$OUT/vision"
# tests/gpu/prepare.sh calls this into its own DIR/vision, run.sh runs it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun-vision}"
arch="${ARCH:-sm_90}"
steps="${STEPS:-40}"
for tool in tcc trun conv_kernels_test; do
  [ -x "$build/bin/$tool" ] || { echo "prepare_vision.sh: $build/bin/$tool missing: bash scripts/build.sh tcc trun tcc_cuda_conv_test" >&2; exit 1; }
done
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,cnn}
cp "$build/bin/trun" "$build/bin/conv_kernels_test" "$dir/bin/"
# cuDNN's convolutions on the same cases (built when the cuDNN frontend is there).
[ -x "$build/bin/cudnn_conv_test" ] && cp "$build/bin/cudnn_conv_test" "$dir/bin/"
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"

c="$dir/cnn"
/usr/bin/python3 "$root/tests/gpu/vision/make_data.py" "$c" 2048 0
model="$root/tests/gpu/vision/cnn_check.pbtxt"
for p in fp32 bf16; do
  nice -n 19 "$build/bin/tcc" compile --target cuda --arch "$arch" --precision "$p" "$model" \
    -o "$c/cnn_cuda_$p.so" --dump-dir "$c/dump_$p"
done
# The CPU reference run, here: the same initial weights and batches as the
# GPU's (--seed 0, in order).
nice -n 19 "$build/bin/tcc" compile --target cpu --no-native --precision fp32 "$model" -o "$c/cnn_cpu.so"
"$build/bin/trun" "$c/cnn_cpu.so" --data "x=$c/x.npy,y=$c/y.npy" --steps "$steps" --seed 0 \
  --log-every 10 --metrics "$c/cpu.jsonl" >"$c/cpu.log" 2>&1 || { cat "$c/cpu.log"; exit 1; }
tail -n 2 "$c/cpu.log"
rm "$c/cnn_cpu.so"
echo "$steps" >"$c/steps"
du -sh "$dir"
