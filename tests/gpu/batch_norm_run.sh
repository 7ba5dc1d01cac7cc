#!/usr/bin/env bash
# Batch norm on the GPU (tests/gpu/batch_norm_prepare.sh made DIR): the CNN (conv + BN2d +
# BN1d) fp32 and bf16 and an MLP with BN1d fp32, 50 steps each from the PyTorch weights, an
# exact resume; metrics and saved weights into $OUT (the device tool's) or DIR/out.
set -u
dir=$(cd "${1:?usage: batch_norm_run.sh DIR}" && pwd)
OUT="${OUT:-$dir/out}"; L="$dir/logs"; mkdir -p "$OUT" "$L"
# $OUT gets only what batch_norm_compare.py reads (the device tool returns 8 files).
tar -C "$dir" -xzf "$dir/lib.tar.gz"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$(dirname "${BASH_SOURCE[0]}")/cudnn_path.sh"
t="$dir/bin/trun"; D="$dir/data"; S="$dir/steps"
nvidia-smi --query-gpu=name --format=csv,noheader
run() { local name=$1; shift; "$t" "$@" --steps 50 --log-every 0 --metrics "$OUT/$name.jsonl" --save-weights "$OUT/$name.safetensors" > "$L/$name.log" 2>&1; echo "$name rc=$?"; tail -4 "$L/$name.log"; }
run cnn_fp32 "$S/cnn_fp32.so" --data "$D/cx.npy,$D/cy.npy" --test "$D/cxt.npy,$D/cyt.npy" --init-from "$D/cnn_init.safetensors"
run cnn_bf16 "$S/cnn_bf16.so" --data "$D/cx.npy,$D/cy.npy" --test "$D/cxt.npy,$D/cyt.npy" --init-from "$D/cnn_init.safetensors"
run mlp_fp32 "$S/mlp_fp32.so" --data "$D/mx.npy,$D/my.npy" --init-from "$D/mlp_init.safetensors"
# exact resume on the GPU: 25 steps with a checkpoint, then --resume to 50
rm -rf "$dir/ck"
"$t" "$S/cnn_fp32.so" --data "$D/cx.npy,$D/cy.npy" --init-from "$D/cnn_init.safetensors" --steps 25 --ckpt-dir "$dir/ck" --ckpt-every 25 --log-every 0 > "$L/resume1.log" 2>&1
"$t" "$S/cnn_fp32.so" --data "$D/cx.npy,$D/cy.npy" --init-from "$D/cnn_init.safetensors" --steps 50 --ckpt-dir "$dir/ck" --ckpt-every 25 --resume --log-every 0 --save-weights "$L/cnn_resumed.safetensors" > "$L/resume2.log" 2>&1
echo "resume rc=$?"; cmp "$L/cnn_resumed.safetensors" "$OUT/cnn_fp32.safetensors" && echo "resume: identical"
"$t" "$S/cnn_fp32.so" --info | grep -A3 "^buffers"
