#!/usr/bin/env bash
# tg-remat on the GPU (issue 14), in one run on one GPU:
#  1. same function: gpt2_short bf16 for 100 steps unconstrained (twice: the
#     GPU's own run-to-run spread, embedding gradients use atomics) and
#     under --memory-budget (0.8x its need); the largest relative loss
#     difference of each pair;
#  2. GPT-2 124M bf16 B=16 T=1024: unconstrained and under 7.2, 6.5 and
#     5.9 GiB budgets: ms/step (median of the timed steps), the peak of
#     device allocations trun measures and the step's planned bytes
#     (tcc compile -v, recorded by prepare.sh in DIR/plans.txt);
#  3. torch.compile (bench/torch_gpt2.py) at the same shape: its ms/step and
#     peak, for the ratios;
#  4. GPT-2 1.5B (48 layers, width 1600) B=16 T=1024 under --memory-budget
#     40GiB: ms/step and peak, and PyTorch eager/compile at that shape.
#
#   bash tests/gpu/remat_checks.sh DIR OUT [small|xl|all]
#   (DIR from tests/gpu/prepare.sh; small: 1-3, xl: 4; default all)
set -uo pipefail
dir="$(cd "${1:?usage: remat_checks.sh DIR OUT}" && pwd)"
out="${2:?usage: remat_checks.sh DIR OUT}"
which="${3:-all}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
for part in lib steps data; do
  [ -d "$dir/$part" ] || tar -C "$dir" -xzf "$dir/$part.tar.gz"
done
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/cudnn_path.sh"
trun="$dir/bin/trun"
tokens="$dir/data/gpt2_tokens.bin"
[ -f "$tokens" ] || python3 "$here/../../bench/gpt2/random_tokens.py" "$tokens" 4000000

if [ "$which" != xl ]; then
echo "== 1. same function: gpt2_short bf16, 100 steps"
amp_shell=$(python3 "$here/amp_names.py" --shell) && eval "$amp_shell"
amp_shell=$(python3 "$here/amp_models.py" --shell) && eval "$amp_shell"
short_data="$dir/data/${AMP_DATA_gpt2_short}_train.bin"
# cuDNN's attention backward and the embedding gradient (scatter-add) use
# atomics; TCC_CUDNN=0 leaves only the latter.
for cudnn in 1 0; do
  for tag in plain plain_again remat; do
    step="$dir/steps/gpt2_short_cuda_bf16.so"; [ $tag = remat ] && step="$dir/steps/gpt2_short_cuda_bf16_remat.so"
    TCC_CUDNN=$cudnn "$trun" "$step" --data "$short_data" --steps 100 --seed 7 --log-every 50 \
      --metrics "$out/short_${tag}_cudnn$cudnn.jsonl" >"$out/short_${tag}_cudnn$cudnn.log" 2>&1 \
      || { echo "trun failed:"; tail -5 "$out/short_${tag}_cudnn$cudnn.log"; }
  done
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def losses(tag):
    r = {}
    try:
        for line in open("%s/short_%s.jsonl" % (out, tag)):
            d = json.loads(line)
            if d.get("kind") == "step":
                r[d["step"]] = d["loss"]
    except OSError:
        pass
    return [r[k] for k in sorted(r)]
def rel(p, q):
    return abs(p - q) / max(1e-30, abs(q))
for cudnn in (1, 0):
    a, b, c = (losses("%s_cudnn%d" % (t, cudnn)) for t in ("plain", "plain_again", "remat"))
    if not a or len(a) != len(b) or len(a) != len(c):
        print("cudnn=%d: missing runs (%d / %d / %d steps)" % (cudnn, len(a), len(b), len(c)))
        continue
    first = lambda x, y: next((i + 1 for i, (p, q) in enumerate(zip(x, y)) if p != q), None)
    print("cudnn=%d: %d steps; plain vs plain again: max rel %.3g, first differing step %s; "
          "remat vs plain: max rel %.3g, first differing step %s; remat vs plain again: max rel %.3g"
          % (cudnn, len(a), max(rel(p, q) for p, q in zip(b, a)), first(a, b),
             max(rel(p, q) for p, q in zip(c, a)), first(a, c), max(rel(p, q) for p, q in zip(c, b))))
    print("  steps 1-5 plain %s remat %s" % (a[:5], c[:5]))
PY
echo "== 2. GPT-2 124M bf16: budgets"
for tag in bf16 bf16_b7.2 bf16_b6.5 bf16_b5.9; do
  "$trun" "$dir/steps/gpt2_cuda_${tag}.so" --data "$tokens" --steps 35 --seed 0 --log-every 5 \
    --metrics "$out/gpt2_$tag.jsonl" >"$out/gpt2_$tag.log" 2>&1 || { echo "trun failed:"; tail -5 "$out/gpt2_$tag.log"; }
  grep -h "^memory: \|gpu memory" "$out/gpt2_$tag.log" | sed "s/^/$tag: /"
done
echo "== 3. torch.compile GPT-2 124M"
PYTHONUNBUFFERED=1 timeout 200 python3 "$here/../../bench/torch_gpt2.py" --mode compile --steps 20 --warmup 5 \
  >"$out/torch.jsonl" 2>"$out/torch.log" || { echo "torch_gpt2.py (124M) failed:"; tail -n 5 "$out/torch.log"; }
fi
if [ "$which" != small ]; then
echo "== 4. GPT-2 1.5B bf16 B=16 T=1024 under 40 GiB"
"$trun" "$dir/steps/gpt2xl_cuda_bf16_b40.so" --data "$tokens" --steps 8 --seed 0 --log-every 1 \
  --metrics "$out/gpt2xl_b40.jsonl" >"$out/gpt2xl_b40.log" 2>&1 || { echo "trun failed:"; tail -5 "$out/gpt2xl_b40.log"; }
grep -h "^memory: \|gpu memory" "$out/gpt2xl_b40.log"
echo "== PyTorch at 1.5B (eager, compile)"
PYTHONUNBUFFERED=1 timeout 300 python3 "$here/../../bench/torch_gpt2.py" --mode both --steps 4 --warmup 2 \
  --layers 48 --width 1600 --heads 25 >"$out/torch_xl.jsonl" 2>"$out/torch_xl.log" || { echo "torch_gpt2.py (1.5B) failed:"; tail -n 5 "$out/torch_xl.log"; }
fi
python3 - "$out" "$dir/plans.txt" <<'PY'
import json, statistics, sys
out, plans = sys.argv[1], sys.argv[2]
def lines(path):
    try:
        return open(path).read().splitlines()
    except OSError:
        return []
planned = {}
for line in lines(plans):
    k, v = line.split(None, 1)
    planned[k] = v.strip()
def tcc(path, warm=5):
    ms, peak = [], None
    for line in lines(path):
        d = json.loads(line)
        if d.get("kind") == "step" and d["step"] > warm and "step_ms" in d:
            ms.append(d["step_ms"])
        if "gpu_peak_bytes" in d:
            peak = int(d["gpu_peak_bytes"])
    return (statistics.median(ms) if ms else float("nan")), peak
def show(peak):
    return "%.3f GiB" % (peak / 2**30) if peak else "?"
def torch(path):
    rows = {}
    for line in lines(path):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "mode" in d:
            rows[d["mode"]] = d
    return rows
t = torch("%s/torch.jsonl" % out)
print("\n| system | ms/step | measured peak (device allocations) | planned (tcc compile -v) |")
print("|---|---|---|---|")
for mode, d in sorted(t.items()):
    print("| torch %s 124M | %s | %s | |" % (mode, d.get("ms_per_step"), d.get("peak_mem_gib")))
for tag in ("bf16", "bf16_b7.2", "bf16_b6.5", "bf16_b5.9"):
    ms, peak = tcc("%s/gpt2_%s.jsonl" % (out, tag))
    print("| tcc %s 124M | %.2f | %s | %s |" % (tag, ms, show(peak), planned.get("gpt2_cuda_%s.so" % tag, "?")))
ms, peak = tcc("%s/gpt2xl_b40.jsonl" % out, warm=2)
print("| tcc bf16 1.5B budget 40GiB | %.2f | %s | %s |" % (ms, show(peak), planned.get("gpt2xl_cuda_bf16_b40.so", "?")))
for mode, d in sorted(torch("%s/torch_xl.jsonl" % out).items()):
    print("| torch %s 1.5B | %s | %s | |" % (mode, d.get("ms_per_step"), d.get("peak_mem_gib")))
PY
