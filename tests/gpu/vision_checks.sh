#!/usr/bin/env bash
# On the device machine (an NVIDIA GPU), after tests/gpu/prepare_vision.sh
# here: the vision ops on the GPU (issue 17).
#   1. conv_kernels_test: the CUDA convolution and pooling launchers
#      (forward, input and weight gradients, max / avg pooling and their
#      gradients; stride 2, padding, dilation 2, groups 2, depthwise, f32,
#      bf16, f64) against float64, fresh random inputs; then --bench;
#   1b. cudnn_conv_test: the same cases through cuDNN's convolutions (what
#      steps run for f32 / bf16 / f16 convolutions where libcudnn.so.9
#      loads); then --bench;
#   2. tests/gpu/vision/cnn_check.pbtxt trained STEPS steps on the GPU in
#      fp32 from the same initial weights and batches as the CPU run made
#      by prepare_vision.sh, with cuDNN's convolutions and with tcc's
#      (TCC_CUDNN=0): per-step losses within 1e-4 relative;
#   3. the same in bf16 (its classifier product in bf16; convolutions
#      follow their f32 operands): within 2e-2 of the fp32 GPU losses.
# Prints a summary last; exit 1 if a check failed.
#
#   bash tests/gpu/vision_checks.sh DIR [OUT]     (OUT default DIR/out)
set -uo pipefail
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $(basename "$0") DIR [OUT]   (DIR: what tests/gpu/prepare_vision.sh made)" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
out="${2:-$dir/out}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
[ -d "$dir/lib" ] || tar -C "$dir" -xzf "$dir/lib.tar.gz"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/cudnn_path.sh" # libcudnn.so.9 (PyTorch's wheels on the device machine)
trun="$dir/bin/trun"
c="$dir/cnn"
steps=$(cat "$c/steps")
declare -a summary
status=0
note() { summary+=("$1"); }

echo "== conv / pool kernels vs float64 =="
"$dir/bin/conv_kernels_test" 2>&1 | tee "$out/conv_kernels.txt"
rc=${PIPESTATUS[0]}
if [ "$rc" = 0 ]; then note "conv/pool kernels vs float64: PASS ($(tail -n 1 "$out/conv_kernels.txt"))"
else note "conv/pool kernels vs float64: FAIL (exit $rc)"; status=1; fi
"$dir/bin/conv_kernels_test" --bench 2>&1 | grep '^bench' | tee "$out/conv_bench.txt"
if [ -x "$dir/bin/cudnn_conv_test" ]; then
  echo "== cuDNN convolutions vs float64 (the same cases) =="
  "$dir/bin/cudnn_conv_test" 2>&1 | tee "$out/cudnn_conv.txt"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then note "cuDNN convolutions vs float64: PASS ($(tail -n 2 "$out/cudnn_conv.txt" | tr '\n' ' '))"
  elif [ "$rc" = 77 ]; then note "cuDNN convolutions: skipped ($(tail -n 1 "$out/cudnn_conv.txt"))"
  else note "cuDNN convolutions vs float64: FAIL (exit $rc)"; status=1; fi
  "$dir/bin/cudnn_conv_test" --bench 2>&1 | grep '^bench' | tee -a "$out/conv_bench.txt"
fi

# fp32 with cuDNN's convolutions (where libcudnn.so.9 loads) and with tcc's
# kernels (TCC_CUDNN=0), bf16 with cuDNN.
for run in fp32 fp32_tcc bf16; do
  p=${run%_tcc}
  echo "== cnn_check on the GPU, $run, $steps steps =="
  env $([ $run = fp32_tcc ] && echo TCC_CUDNN=0) \
    "$trun" "$c/cnn_cuda_$p.so" --data "x=$c/x.npy,y=$c/y.npy" --steps "$steps" --seed 0 \
    --log-every 10 --metrics "$out/gpu_$run.jsonl" >"$out/gpu_$run.log" 2>&1
  rc=$?
  grep -m1 "gpu: CUDA graph" "$out/gpu_$run.log"
  tail -n 3 "$out/gpu_$run.log"
  [ $rc = 0 ] || { note "cnn_check $run on the GPU: FAIL (exit $rc: $(tail -n 1 "$out/gpu_$run.log"))"; status=1; }
done
note "cnn_check fp32: $(grep -m1 -o 'convolutions: [^;]*' "$out/gpu_fp32.log" || echo 'no convolution note')"
for run in fp32 fp32_tcc; do
  [ -s "$out/gpu_$run.jsonl" ] || continue
  line=$(python3 "$here/compare_losses.py" "cnn_check $run" "$c/cpu.jsonl" "$out/gpu_$run.jsonl" \
         --steps "$steps" --tol 1e-4)
  rc=$?; echo "$line"; note "$line"; [ $rc = 0 ] || status=1
done
if [ -s "$out/gpu_bf16.jsonl" ] && [ -s "$out/gpu_fp32.jsonl" ]; then
  line=$(python3 "$here/compare_losses.py" "cnn_check bf16 vs fp32 (gpu)" "$out/gpu_fp32.jsonl" \
         "$out/gpu_bf16.jsonl" --steps "$steps" --tol 2e-2 --labels fp32,bf16)
  rc=$?; echo "$line"; note "$line"; [ $rc = 0 ] || status=1
fi
# Step time (median of steps 10..) from the metrics.
for p in fp32 fp32_tcc bf16; do
  [ -s "$out/gpu_$p.jsonl" ] || continue
  note "cnn_check $p median ms/step: $(python3 -c 'import json,statistics,sys
ms=[r["step_ms"] for r in map(json.loads,open(sys.argv[1])) if r.get("kind")=="step" and r["step"]>=10]
print(f"{statistics.median(ms):.3f}" if ms else "n/a")' "$out/gpu_$p.jsonl")"
done

echo
echo "== vision summary =="
for s in "${summary[@]}"; do echo "  $s"; done
exit $status
