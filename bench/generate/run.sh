#!/usr/bin/env bash
# Generation throughput: trun --sample on the KV-cache entries (prefill +
# decode) against trun's eval path (a whole eval batch per token) and a
# PyTorch loop with a KV cache (torch_kv_generate.py), same model and
# weights (trained 30 steps on fortunes bytes), greedy, 8 rows of one
# 16-byte prompt; the greedy tokens of all
# three must agree (row 0 compared). DEVICE: cpu or cuda.
#
#   bash bench/generate/run.sh DIR DEVICE [OUT]   (DIR: prepare.sh's)
set -uo pipefail
dir="$(cd "$1" && pwd)"
device="$2"
out="${3:-$dir/out-$device}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
[ -d "$dir/lib" ] || tar -C "$dir" -xzf "$dir/lib.tar.gz"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -f "$here/../../tests/gpu/cudnn_path.sh" ] && source "$here/../../tests/gpu/cudnn_path.sh"
source "$dir/models.sh"
trun="$dir/bin/trun"
py=${PYTHON:-python3}
threads=()
if [ "$device" = cpu ]; then
  # One thread each: this 2-core machine is shared (OpenBLAS's spinning
  # threads collapse under load); PyTorch gets --threads 1 too.
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
  threads=(--threads 1)
fi
prompt="The quick brown " # 16 bytes
ids=$("$py" -c 'import sys; print(",".join(str(b) for b in sys.argv[1].encode()))' "$prompt")
status=0
for m in char mid; do
  flags="${m}_flags"
  step="$dir/steps/${m}_${device}.so"
  new=$([ "$m" = char ] && echo 100 || echo 200)
  w="$out/${m}.safetensors"
  "$trun" "$step" --data "$dir/data/fortunes_train.bin" --steps 30 --log-every 0 \
    --save-weights "$w" >"$out/${m}_init.txt" 2>&1 || { echo "FAIL: $m weights"; status=1; continue; }
  common=(--init-from "$w" --vocab "$dir/data/fortunes_vocab.json" --temperature 0
          --prompt "$prompt" --num-samples 8 --seed 0)
  # A first call warms up (GEMM search on cuda), then the measured ones.
  "$trun" "$step" "${common[@]}" --sample 4 >/dev/null 2>&1
  "$trun" "$step" "${common[@]}" --sample "$new" >"$out/${m}_cache.txt" 2>&1 || status=1
  eval_new=$([ "$device" = cpu ] && [ "$m" = mid ] && echo 20 || echo "$new")
  "$trun" "$step" "${common[@]}" --sample "$eval_new" --sampler eval >"$out/${m}_eval.txt" 2>&1 || status=1
  "$py" "$here/torch_kv_generate.py" --weights "$w" --model-args "${!flags}" --batch 8 \
    --prompt-ids "$ids" --new "$new" --device "$device" "${threads[@]}" >"$out/${m}_torch.json" 2>"$out/${m}_torch.err" || status=1
  echo "== $m ($device): ${!flags}, $new new tokens x 8 rows"
  grep -h "^generate:" "$out/${m}_cache.txt" "$out/${m}_eval.txt"
  cat "$out/${m}_torch.json"
  # Greedy tokens: trun's row 0 (after the prompt) vs PyTorch's first row.
  "$py" - "$out/${m}_cache.txt" "$out/${m}_eval.txt" "$out/${m}_torch.json" "$prompt" "$eval_new" <<'PY' || status=1
import json, sys
cache, evalp, torch_json, prompt, eval_new = sys.argv[1:]
def row0(path):
    text = open(path, "rb").read()
    start = text.index(b"--- prompt 1, sample 1\n") + len(b"--- prompt 1, sample 1\n")
    end = text.index(b"\n--- prompt 1, sample 2")
    return list(text[start:end])[len(prompt):]
c, e = row0(cache), row0(evalp)
t = json.load(open(torch_json))["first_row"]
n = int(eval_new)
ok = c == t and c[:n] == e
print(("PASS" if ok else "FAIL") + f": greedy tokens cache == torch ({len(c)}) and cache[:{n}] == eval path")
sys.exit(0 if ok else 1)
PY
done
exit $status
