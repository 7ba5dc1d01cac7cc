#!/usr/bin/env bash
# On the device machine, after tests/gpu/prepare_workloads.sh here:
#   1. frozen-subgraph caching on the GPU: the frozen-encoder sample and a
#      frozen ViT + trainable head, 2 epochs with trun's encode cache and
#      with --no-encode-cache: per-step losses compared, seconds per epoch;
#   2. the CNN and ViT samples (bf16, cuDNN convolutions): test accuracy and
#      time.
# Prints a summary last; exit 1 if a check failed.
#
#   bash tests/gpu/workloads_checks.sh DIR [OUT]
set -uo pipefail
dir=$(cd "${1:?usage: workloads_checks.sh DIR [OUT]}" && pwd)
out="${2:-$dir/out}"; mkdir -p "$out"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tar -C "$dir" -xzf "$dir/lib.tar.gz"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/cudnn_path.sh"
t="$dir/bin/trun"; s="$dir/steps"; data="$dir/data"
status=0; summary=()
note() { summary+=("$1"); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

for m in fe fvit; do
  cat "$s/${m}_cut.txt" | tail -n +5 | tee "$out/${m}_cut.txt"
  "$t" "$s/${m}_cuda.so" --data "$data" --epochs 2 --seed 0 --metrics "$out/${m}_cached.jsonl" \
    > "$out/${m}_cached.log" 2>&1 || { status=1; note "$m cached: run failed"; }
  "$t" "$s/${m}_cuda.so" --data "$data" --epochs 2 --seed 0 --no-encode-cache \
    --metrics "$out/${m}_plain.jsonl" > "$out/${m}_plain.log" 2>&1 || { status=1; note "$m plain: run failed"; }
  grep -h "encode cache\|epoch\|test" "$out/${m}_cached.log" | tail -6
  line=$(python3 - "$m" "$out/${m}_plain.jsonl" "$out/${m}_cached.jsonl" "$out/${m}_plain.log" "$out/${m}_cached.log" <<'PY'
import json, re, sys
name, a, b, la, lb = sys.argv[1:]
def losses(p):
    return [r["loss"] for r in map(json.loads, open(p)) if r.get("kind") == "step"]
x, y = losses(a), losses(b)
n = min(len(x), len(y))
half = n // 2
worst1 = max((abs(p - q) / max(abs(p), 1e-12) for p, q in zip(x[:half], y[:half])), default=0)
worst2 = max((abs(p - q) / max(abs(p), 1e-12) for p, q in zip(x[half:n], y[half:n])), default=0)
def epochs(log):
    return [float(v) for v in re.findall(r"epoch \d+ done:.*? steps in ([\d.]+) s", open(log).read())]
ok = n > 0 and len(x) == len(y) and worst1 <= 1e-4 and worst2 <= 1e-3
print(f"{name}: {'PASS' if ok else 'FAIL'} cached vs uncached, {n} steps: worst relative loss "
      f"difference {worst1:.2e} (first half), {worst2:.2e} (second); epoch s plain {epochs(la)} "
      f"cached {epochs(lb)}")
sys.exit(0 if ok else 1)
PY
)
  rc=$?; echo "$line"; note "$line"; [ $rc = 0 ] || status=1
done

for m in cnn:3 vit:6; do
  name=${m%:*}; ep=${m#*:}
  start=$(date +%s.%N)
  "$t" "$s/${name}_cuda.so" --data "$data" --epochs "$ep" --seed 0 > "$out/${name}_sample.log" 2>&1 || status=1
  end=$(date +%s.%N)
  acc=$(grep -o "test accuracy[: ]*[0-9.]*" "$out/${name}_sample.log" | tail -1)
  line="$name sample, $ep epochs on the GPU: $acc, $(python3 -c "print(f'{$end-$start:.1f}')") s wall (with start-up)"
  echo "$line"; note "$line"
  grep -h "convolutions:" "$out/${name}_sample.log" | head -1
done

echo; echo "== workloads summary =="; printf '%s\n' "${summary[@]}"
exit $status
