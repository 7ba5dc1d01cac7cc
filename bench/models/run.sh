#!/usr/bin/env bash
# On the GPU machine (python3 with PyTorch 2.x and numpy), after
# bench/models/prepare.sh here: for each model of DIR, tcc (trun on its bf16
# step.so) then PyTorch eager and torch.compile (torch_bench.py) on the
# same GPU, one process each (tcc's exits and frees the GPU first); then
# table.py's markdown table. A model that failed to prepare, or a run that
# fails or times out, is a row with its error; the others go on.
#
#   bash bench/models/run.sh DIR [OUT]          (OUT default DIR/results)
#
# OUT/results.jsonl   one JSON record per (model, system)
# OUT/NAME/           tcc.jsonl (trun --metrics), tcc.log, torch_eager.log,
#                     torch_compile.log
# OUT/table.md        the table
# STEPS (20) timed steps after WARMUP (5) (trun's first steps plan the
# cuBLASLt algorithms and capture the CUDA graph; torch.compile compiles in
# its first), MODELS=a,b (default: every folder of DIR with a meta.json),
# TIMEOUT per run in s (300; the device tool allows 600 s per command, so
# run a few MODELS per call).
# A dry run without a GPU: CONFIG=cpu on a DIR of cpu steps (prepare.py
# --config cpu --target cpu DIR, plus bin/trun) runs the same plumbing.
set -uo pipefail
dir="$(cd "${1:?usage: run.sh DIR [OUT]}" && pwd)"
out="${2:-$dir/results}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
steps="${STEPS:-20}"
warmup="${WARMUP:-5}"
limit="${TIMEOUT:-300}"
py="${PYTHON:-python3}"
config="${CONFIG:-gpu}"
# MODES: the PyTorch runs beside tcc's (unset: both; "eager" when the
# device time is short: torch.compile's compilation takes most of a model's
# ~2-3 min; empty: tcc alone). INIT=torch (default): tcc starts from PyTorch's initial
# weights (exported here); INIT=tcc: from the step's own initializers
# (faster; the step time does not depend on the weights, the loss column
# is then not comparable).
read -r -a modes <<<"${MODES-eager compile}"
init="${INIT:-torch}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -d "$dir/lib" ] || [ ! -f "$dir/lib.tar.gz" ] || tar -C "$dir" -xzf "$dir/lib.tar.gz"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/../../tests/gpu/cudnn_path.sh"
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "NO GPU")'
nvidia-smi -L 2>/dev/null || true

if [ -n "${MODELS:-}" ]; then
  IFS=, read -r -a models <<<"$MODELS"
else
  models=()
  for m in "$dir"/*/meta.json; do [ -f "$m" ] && models+=("$(basename "$(dirname "$m")")"); done
fi
results="$out/results.jsonl"
: >"$results"
for m in "${models[@]}"; do
  md="$dir/$m" o="$out/$m"
  mkdir -p "$o"
  echo "== $m"
  if [ -f "$md/error.txt" ]; then
    echo "tcc: prepare failed: $(head -n 1 "$md/error.txt" | cut -c1-200)"
    "$py" "$here/table.py" record --model "$m" --dir "$md" >>"$results"
  else
    # Random data and PyTorch's initial weights, made here (too big to carry).
    init_args=()
    data=$(timeout "$limit" "$py" "$here/make_data.py" "$md")
    rc=$?
    if [ $rc -eq 0 ] && [ "$init" = torch ]; then
      timeout "$limit" "$py" "$here/torch_bench.py" --model "$m" --config "$config" \
        --export-init "$md/init.safetensors" >"$o/export.log" 2>&1
      rc=$?
      init_args=(--init-from "$md/init.safetensors")
    fi
    if [ $rc -ne 0 ]; then
      "$py" "$here/table.py" record --model "$m" --dir "$md" --rc "$rc" --log "$o/export.log" >>"$results"
    else
      rm -f "$o/tcc.jsonl"
      timeout "$limit" "$dir/bin/trun" "$md/step.so" --data "$data" "${init_args[@]}" \
        --steps $((steps + warmup)) --seed 0 --log-every 5 --metrics "$o/tcc.jsonl" >"$o/tcc.log" 2>&1
      rc=$?
      "$py" "$here/table.py" record --model "$m" --dir "$md" --metrics "$o/tcc.jsonl" \
        --log "$o/tcc.log" --rc "$rc" --warmup "$warmup" >>"$results"
      "$py" "$here/table.py" brief "$results"
    fi
  fi
  for mode in "${modes[@]}"; do
    line=$(PYTHONUNBUFFERED=1 timeout "$limit" "$py" "$here/torch_bench.py" --model "$m" --mode "$mode" \
             --config "$config" --steps "$steps" --warmup "$warmup" 2>"$o/torch_$mode.log")
    rc=$?
    if [ -n "$line" ]; then
      echo "$line" >>"$results"
    else  # died before its JSON line (timeout, crash)
      "$py" "$here/table.py" record --model "$m" --system "pytorch-$mode" --dir "$md" \
        --rc "$rc" --log "$o/torch_$mode.log" >>"$results"
    fi
    "$py" "$here/table.py" brief "$results"
  done
done
"$py" "$here/table.py" gpu "$results" | tee "$out/table.md"
