#!/usr/bin/env bash
# Paired A/B of two compiled training steps on one GPU: runs A and B in
# alternation for ROUNDS rounds of STEPS steps each (same data, seed 0),
# prints each round's median step time (steps >= SKIP; the first steps
# include planning and graph capture) and the median over the rounds, then
# compares the two runs' losses of round 1 (tests/gpu/compare_losses.py,
# --tol LOSS_TOL relative): an A/B of two schedules of the same math must
# train the same. Alternating rounds keep clock and thermal drift from
# favouring whichever ran first.
#
#   bash bench/gpt2/ab.sh TRUN DATA A.so B.so OUT [--labels a,b] [--rounds 3]
#                         [--steps 60] [--skip 10] [--loss-tol 1e-2]
#                         [-- extra trun arguments]
#
# TRUN is trun's path, or a command on PATH. OUT gets LABEL_ROUND.jsonl / .log per run and ab.txt (the printed table).
# Exit status: 0 when every run finished and the losses agree, 1 otherwise,
# 2 on bad arguments (before anything runs). tests/lit/cli/bench-ab.test
# runs it on the CPU.
set -uo pipefail
usage="usage: ab.sh TRUN DATA A.so B.so OUT [--labels a,b] [--rounds N] [--steps N] [--skip N] [--loss-tol X] [-- trun args]"
[ $# -ge 5 ] || { echo "$usage" >&2; exit 2; }
trun=$1 data=$2 stepA=$3 stepB=$4 out=$5
shift 5
trunArg=$trun
labels=a,b rounds=3 steps=60 skip=10 tol=1e-2 extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --labels | --rounds | --steps | --skip | --loss-tol)
      [ $# -ge 2 ] || { echo "ab.sh: $1 wants a value" >&2; exit 2; }
      case $1 in
        --labels) labels=$2 ;; --rounds) rounds=$2 ;; --steps) steps=$2 ;;
        --skip) skip=$2 ;; --loss-tol) tol=$2 ;;
      esac
      shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "ab.sh: unknown argument '$1'" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
# TRUN: a path, or a command on PATH.
[ -e "$trun" ] || trun=$(command -v "$trun") || { echo "ab.sh: no such program: $trunArg" >&2; exit 2; }
for f in "$data" "$stepA" "$stepB"; do
  [ -e "$f" ] || { echo "ab.sh: no such file: $f" >&2; exit 2; }
done
for n in "$rounds" "$steps" "$skip"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "ab.sh: not a count: '$n'" >&2; exit 2; }
done
[ "$skip" -lt "$steps" ] || { echo "ab.sh: --skip ($skip) must be below --steps ($steps)" >&2; exit 2; }
IFS=, read -r labelA labelB <<< "$labels"
[ -n "$labelA" ] && [ -n "$labelB" ] && [ "$labelA" != "$labelB" ] ||
  { echo "ab.sh: --labels wants two different names, a,b" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
status=0
run() { # label round step
  # A hung step must not eat the caller's whole time: 10 s a step at most.
  timeout $((60 + 10 * steps)) "$trun" "$3" --data "$data" --steps "$steps" --seed 0 --log-every 10 \
    --metrics "$out/$1_$2.jsonl" "${extra[@]}" > "$out/$1_$2.log" 2>&1 ||
    { echo "ab.sh: $1 round $2 failed (rc $?), see $out/$1_$2.log" >&2; status=1; }
}
for r in $(seq 1 "$rounds"); do
  run "$labelA" "$r" "$stepA"
  run "$labelB" "$r" "$stepB"
done
python3 - "$out" "$labelA" "$labelB" "$rounds" "$skip" <<'EOF' | tee "$out/ab.txt"
import json, statistics, sys
out, a, b, rounds, skip = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def median(label, r):
    try:
        with open(f"{out}/{label}_{r}.jsonl") as f:
            ms = [rec["step_ms"] for rec in map(json.loads, f)
                  if rec.get("kind") == "step" and rec["step"] >= skip]
    except OSError:
        return None
    return statistics.median(ms) if ms else None
rows = [(r, median(a, r), median(b, r)) for r in range(1, rounds + 1)]
fmt = lambda v: "-" if v is None else f"{v:.2f}"
print(f"| round | {a} ms | {b} ms | {b}/{a} |")
print("|---|---|---|---|")
for r, ma, mb in rows:
    ratio = f"{mb / ma:.4f}" if ma and mb else "-"
    print(f"| {r} | {fmt(ma)} | {fmt(mb)} | {ratio} |")
ma = [m for _, m, _ in rows if m]; mb = [m for _, _, m in rows if m]
if ma and mb:
    A, B = statistics.median(ma), statistics.median(mb)
    print(f"| median | {A:.2f} | {B:.2f} | {B / A:.4f} |")
EOF
if [ -s "$out/${labelA}_1.jsonl" ] && [ -s "$out/${labelB}_1.jsonl" ]; then
  python3 "$here/../../tests/gpu/compare_losses.py" "$labelA vs $labelB" "$out/${labelA}_1.jsonl" \
    "$out/${labelB}_1.jsonl" --steps "$steps" --tol "$tol" --labels "$labelA,$labelB" 2>&1 |
    tail -3 | tee -a "$out/ab.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "ab.sh: no losses compared: round 1 of $labelA or $labelB wrote no metrics" | tee -a "$out/ab.txt"
  status=1
fi
exit $status
