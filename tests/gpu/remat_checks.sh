#!/usr/bin/env bash
# tg-remat on the GPU (issue 14), in one run on one GPU, on the steps that
# tests/gpu/prepare_remat.sh built:
#  1. the ordered (--deterministic) embedding gradient: kernel_families_test
#     --filter scatter_add (float64 reference, bit-exact in-order sums, two
#     runs identical);
#  2. same function: gpt2_short bf16 --deterministic for 100 steps,
#     unconstrained twice (run-to-run) and under --memory-budget 0.8x its
#     need; the largest relative loss difference of each pair;
#  3. GPT-2 124M bf16 B=16 T=1024 unconstrained and under 7.2, 6.5 and
#     5.9 GiB budgets: ms/step (median of 30 timed steps), the peak of device
#     allocations trun measures, the step's planned bytes; then
#     torch.compile (bench/torch_gpt2.py) at the same shape;
#  4. --batch auto under 8, 16 and 40 GiB: the batch each picked runs, its
#     measured peak against the budget;
#  5. GPT-2 1.5B (48 layers, width 1600) B=16 T=1024 under --memory-budget
#     40GiB, and PyTorch eager / torch.compile at that shape (their peak or
#     their out-of-memory error).
# Prints a table last.
#
#  6. (ckpt) PyTorch with activation checkpointing (bench/torch_gpt2.py
#     --checkpoint): torch.compile at 124M, eager and torch.compile at 1.5B.
#
#  7. (chunk) tg-chunk-loss-head: gpt2_short with its loss head in 4 row
#     chunks against the whole head (fp32 50 steps; bf16 --deterministic 100
#     steps, also against the unconstrained runs of 2: the losses of
#     earlier runs in bench/results say whether anything else moved);
#     GPT-2 124M bf16 with --loss-chunks 4, under 5.9 GiB as --memory-budget
#     now fits it (chunks chosen) and with --loss-chunks 1 (recomputation
#     only), beside the unconstrained step and torch.compile.
#
#   bash tests/gpu/remat_checks.sh DIR OUT [small|xl|ckpt|chunk|all]
#   (small: 1-4, xl: 5, ckpt: 6, chunk: 7; default all: 1-5)
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: remat_checks.sh DIR OUT [small|xl|ckpt|chunk|all]" >&2; exit 2; }
which="${3:-all}"
# dir, out, here, trun; lib/steps/data unpacked; libraries and cuDNN on the path.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
steps="$dir/steps"
tokens="$dir/data/gpt2_tokens.bin"
[ -f "$tokens" ] || python3 "$here/../../bench/gpt2/random_tokens.py" "$tokens" 4000000
run_step() { # TAG STEP STEPS [trun flags...]: trun into $out/TAG.{log,jsonl}
  local tag=$1 step=$2 n=$3; shift 3
  "$trun" "$step" --data "$tokens" --steps "$n" --seed 0 --log-every 5 \
    --metrics "$out/$tag.jsonl" "$@" >"$out/$tag.log" 2>&1 || { echo "$tag: trun failed:"; tail -5 "$out/$tag.log"; }
  grep -h "^memory: \|gpu memory" "$out/$tag.log" | sed "s/^/$tag: /"
}

if [ "$which" = small ] || [ "$which" = all ]; then
  echo "== 1. ordered scatter-add"
  "$dir/bin/kernel_families_test" --filter scatter_add 2>&1 | tail -4
  echo "== 2. same function: gpt2_short bf16 --deterministic, 100 steps"
  short_data="$dir/data/fortunes_shuffled_bytes_train.bin"
  for tag in plain plain_again remat; do
    step="$steps/gpt2_short_det.so"; [ $tag = remat ] && step="$steps/gpt2_short_det_remat.so"
    "$trun" "$step" --data "$short_data" --steps 100 --seed 7 --log-every 50 \
      --metrics "$out/short_$tag.jsonl" >"$out/short_$tag.log" 2>&1 || { echo "trun failed:"; tail -5 "$out/short_$tag.log"; }
  done
  python3 - "$out" "$here" <<'PY'
import sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from step_losses import step_losses
losses = lambda tag: step_losses("%s/short_%s.jsonl" % (out, tag))
a, b, c = losses("plain"), losses("plain_again"), losses("remat")
if not a or len(a) != len(b) or len(a) != len(c):
    print("missing runs: %d / %d / %d steps" % (len(a), len(b), len(c)))
else:
    rel = lambda x, y: max(abs(p - q) / max(1e-30, abs(q)) for p, q in zip(x, y))
    first = lambda x, y: next((i + 1 for i, (p, q) in enumerate(zip(x, y)) if p != q), None)
    print("%d steps; plain vs plain again: max rel %.3g (first differing step %s); remat vs "
          "plain: max rel %.3g (first differing step %s); last losses %.6f / %.6f / %.6f"
          % (len(a), rel(b, a), first(a, b), rel(c, a), first(a, c), a[-1], b[-1], c[-1]))
PY
  echo "== 3. GPT-2 124M bf16 under budgets, then torch.compile"
  for tag in bf16 bf16_b7.2 bf16_b6.5 bf16_b5.9; do
    run_step "gpt2_$tag" "$steps/gpt2_$tag.so" 35
  done
  PYTHONUNBUFFERED=1 timeout 200 python3 "$here/../../bench/torch_gpt2.py" --mode compile --steps 20 --warmup 5 \
    >"$out/torch.jsonl" 2>"$out/torch.log" || { echo "torch_gpt2.py (124M) failed:"; tail -n 5 "$out/torch.log"; }
  echo "== 4. --batch auto"
  for budget in 8 16 40; do
    run_step "gpt2_auto$budget" "$steps/gpt2_bf16_auto$budget.so" 8
  done
fi
if [ "$which" = xl ] || [ "$which" = all ]; then
  echo "== 5. GPT-2 1.5B bf16 B=16 T=1024 under 40 GiB, then PyTorch"
  run_step gpt2xl_b40 "$steps/gpt2xl_bf16_b40.so" 8
  for mode in eager compile; do
    PYTHONUNBUFFERED=1 timeout 280 python3 "$here/../../bench/torch_gpt2.py" --mode $mode --steps 4 --warmup 2 \
      --layers 48 --width 1600 --heads 25 >"$out/torch_xl_$mode.jsonl" 2>"$out/torch_xl_$mode.log" \
      || { echo "torch_gpt2.py (1.5B, $mode) failed:"; tail -n 3 "$out/torch_xl_$mode.log"; }
  done
fi
if [ "$which" = ckpt ]; then
  echo "== 6. PyTorch with activation checkpointing"
  PYTHONUNBUFFERED=1 timeout 200 python3 "$here/../../bench/torch_gpt2.py" --mode compile --checkpoint \
    --steps 20 --warmup 5 >"$out/torch_ckpt.jsonl" 2>"$out/torch_ckpt.log" \
    || { echo "torch_gpt2.py (124M, checkpoint) failed:"; tail -n 3 "$out/torch_ckpt.log"; }
  for mode in eager compile; do
    PYTHONUNBUFFERED=1 timeout 260 python3 "$here/../../bench/torch_gpt2.py" --mode $mode --checkpoint \
      --steps 4 --warmup 2 --layers 48 --width 1600 --heads 25 >"$out/torch_xl_ckpt_$mode.jsonl" \
      2>"$out/torch_xl_ckpt_$mode.log" || { echo "torch_gpt2.py (1.5B, $mode, checkpoint) failed:"; tail -n 3 "$out/torch_xl_ckpt_$mode.log"; }
  done
fi
if [ "$which" = chunk ]; then
  echo "== 7. tg-chunk-loss-head"
  short_data="$dir/data/fortunes_shuffled_bytes_train.bin"
  for tag in fp32 fp32_c4; do
    "$trun" "$steps/gpt2_short_$tag.so" --data "$short_data" --steps 50 --seed 7 --log-every 10 \
      --metrics "$out/short_$tag.jsonl" >"$out/short_$tag.log" 2>&1 || { echo "trun failed:"; tail -5 "$out/short_$tag.log"; }
  done
  for tag in plain c4; do
    step="$steps/gpt2_short_det.so"; [ $tag = c4 ] && step="$steps/gpt2_short_det_c4.so"
    "$trun" "$step" --data "$short_data" --steps 100 --seed 7 --log-every 50 \
      --metrics "$out/short_$tag.jsonl" >"$out/short_$tag.log" 2>&1 || { echo "trun failed:"; tail -5 "$out/short_$tag.log"; }
  done
  python3 - "$out" "$here/../../bench/results/remat-h200-2026-11-25" "$here" <<'PY'
import sys
out, earlier = sys.argv[1:3]
sys.path.insert(0, sys.argv[3])
from step_losses import step_losses as losses
rel = lambda x, y, n=None: max(abs(p - q) / max(1e-30, abs(q)) for p, q in list(zip(x, y))[:n])
for name, a, b, n in [("fp32 4 chunks vs whole, 50 steps", "short_fp32_c4", "short_fp32", None),
                      ("bf16 det 4 chunks vs whole, first 10 steps", "short_c4", "short_plain", 10),
                      ("bf16 det 4 chunks vs whole, 100 steps", "short_c4", "short_plain", None)]:
    x, y = losses("%s/%s.jsonl" % (out, a)), losses("%s/%s.jsonl" % (out, b))
    if not x or len(x) != len(y):
        print("%s: missing runs (%d / %d steps)" % (name, len(x), len(y)))
        continue
    print("%s: first loss %s, max rel %.3g, last %.6f / %.6f"
          % (name, "equal" if x[0] == y[0] else "differs", rel(x, y, n), x[-1], y[-1]))
now, before = losses("%s/short_plain.jsonl" % out), losses("%s/short_plain.jsonl" % earlier)
if now and len(now) == len(before):
    print("bf16 det whole head, this build vs the earlier build's run: %s"
          % ("bit-identical" if now == before else "max rel %.3g" % rel(now, before)))
PY
  echo "== 7b. GPT-2 124M bf16: chunks, budgets, torch.compile"
  for tag in bf16 bf16_c4 bf16_b5.9 bf16_b5.9_c1 bf16_again; do
    name=$tag; [ $tag = bf16_again ] && name=bf16
    run_step "gpt2_$tag" "$steps/gpt2_$name.so" 35
  done
  PYTHONUNBUFFERED=1 timeout 200 python3 "$here/../../bench/torch_gpt2.py" --mode compile --steps 20 --warmup 5 \
    >"$out/torch.jsonl" 2>"$out/torch.log" || { echo "torch_gpt2.py (124M) failed:"; tail -n 5 "$out/torch.log"; }
fi
python3 - "$out" "$dir/plans.txt" <<'PY'
import json, statistics, sys
out, plans = sys.argv[1], sys.argv[2]
def lines(path):
    try:
        return open(path).read().splitlines()
    except OSError:
        return []
planned = dict(l.split(None, 1) for l in lines(plans) if l.strip())
def tcc(tag, warm=5):
    ms, peak = [], None
    for line in lines("%s/%s.jsonl" % (out, tag)):
        d = json.loads(line)
        if d.get("kind") == "step" and d["step"] > warm and "step_ms" in d:
            ms.append(d["step_ms"])
        if "gpu_peak_bytes" in d:
            peak = int(d["gpu_peak_bytes"])
    return (statistics.median(ms) if ms else float("nan")), peak
def torch(path):
    rows = []
    for line in lines(path):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "mode" in d:
            rows.append(d)
    return rows
print("\n| system | ms/step | measured peak (device allocations) | planned (tcc compile -v) |")
print("|---|---|---|---|")
for f in ("torch", "torch_ckpt"):
    for d in torch("%s/%s.jsonl" % (out, f)):
        print("| %s 124M | %s | %s GiB | |" % (d["system"], d.get("ms_per_step"), d.get("peak_mem_gib")))
for tag, name in [("gpt2_bf16", "gpt2_bf16.so"), ("gpt2_bf16_again", "gpt2_bf16.so"),
                  ("gpt2_bf16_c4", "gpt2_bf16_c4.so"), ("gpt2_bf16_b5.9_c1", "gpt2_bf16_b5.9_c1.so"),
                  ("gpt2_bf16_b7.2", "gpt2_bf16_b7.2.so"),
                  ("gpt2_bf16_b6.5", "gpt2_bf16_b6.5.so"), ("gpt2_bf16_b5.9", "gpt2_bf16_b5.9.so"),
                  ("gpt2_auto8", "gpt2_bf16_auto8.so"), ("gpt2_auto16", "gpt2_bf16_auto16.so"),
                  ("gpt2_auto40", "gpt2_bf16_auto40.so"), ("gpt2xl_b40", "gpt2xl_bf16_b40.so")]:
    ms, peak = tcc(tag, warm=2 if "auto" in tag or "xl" in tag else 5)
    if peak is None:
        continue
    print("| tcc %s | %.2f | %.4f GiB (%d bytes) | %s |" % (tag, ms, peak / 2**30, peak, planned.get(name, "?")))
for f in ("torch_xl_eager", "torch_xl_compile", "torch_xl_ckpt_eager", "torch_xl_ckpt_compile"):
    for d in torch("%s/%s.jsonl" % (out, f)):
        print("| %s 1.5B | %s | %s GiB | %s %s |" % (d["system"], d.get("ms_per_step"), d.get("peak_mem_gib"),
                                                   d.get("status", ""), str(d.get("error", ""))[:160]))
PY
