#!/usr/bin/env bash
# The FP8 benchmark of issue 37 on the device machine (one GPU), from the
# folder bench/fp8/prepare.sh built:
#
#   bash bench/fp8/run.sh DIR speed [STEPS]   bf16 and fp8 steps of GPT-2 124M
#                                             and the 1B decoder (also fp8 with
#                                             current scaling), one after
#                                             another in this run, plus a
#                                             --profile run of each (and of
#                                             prepare.sh's VARIANT steps)
#   bash bench/fp8/run.sh DIR rounds [ROUNDS] [STEPS]
#                                             the same steps alternating for
#                                             ROUNDS rounds (default 2), no
#                                             profiles: A/B of a VARIANT
#   bash bench/fp8/run.sh DIR loss [STEPS [TRUN FLAGS...]]
#                                             the 1B decoder, bf16 then fp8,
#                                             STEPS (default 1000) steps from
#                                             the same weights (--seed 0) and
#                                             batches, losses every step; with
#                                             prepare.sh's VARIANT="det:
#                                             --deterministic" those steps,
#                                             then the floor: the plain bf16
#                                             step (atomics) against the
#                                             deterministic one. TRUN FLAGS
#                                             go to every run (e.g. --lr 1e-4
#                                             --val DIR/data/text_val.bin
#                                             --eval-every 50)
# MODELS="llama1b" (speed, rounds) limits the runs to those models (default:
# gpt2 llama1b, each where DIR has its steps): on a fresh machine each trun
# takes ~30 s to start, so a call of a few minutes fits only so many.
# Results in DIR/out; the table (bench/fp8/table.py) is printed last (rounds:
# after each round, also into DIR/out/rounds-table.md).
set -uo pipefail
dir="$(cd "${1:?usage: run.sh DIR speed|rounds|loss [...]}" && pwd)"
part="${2:?usage: run.sh DIR speed|rounds|loss [...]}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out="$dir/out"
mkdir -p "$out"
source "$here/../../tests/gpu/unpack_parts.sh"
unpack_parts "$dir" lib steps data
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/../../tests/gpu/cudnn_path.sh"
data="$dir/data/text_train.bin"
train() { # NAME STEP STEPS [flags...]: one trun under timeout, metrics + log in out/
  local name=$1 step=$2 steps=$3 start=$SECONDS; shift 3
  rm -f "$out/$name.jsonl"
  timeout "${TRUN_TIMEOUT:-280}" "$dir/bin/trun" "$dir/steps/$step" --data "$data" --steps "$steps" \
    --seed 0 --log-every 50 --metrics "$out/$name.jsonl" "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? ($(grep -c '"kind": *"step"' "$out/$name.jsonl" 2>/dev/null || echo 0) steps, $((SECONDS - start)) s wall)"
}
case "$part" in
  speed)
    steps="${3:-30}"
    for m in ${MODELS:-gpt2 llama1b}; do
      # prepare.sh's VARIANT steps (<precision>-NAME) right after their base.
      variants=$(cd "$dir/steps" && ls "${m}"_*-*.so 2>/dev/null | sed "s/^${m}_//; s/\.so\$//")
      for p in bf16 $(grep '^bf16-' <<<"$variants") fp8 $(grep '^fp8-' <<<"$variants") fp8current; do
        [ -f "$dir/steps/${m}_$p.so" ] || continue
        train "speed_${m}_$p" "${m}_$p.so" "$steps"
        train "profile_${m}_$p" "${m}_$p.so" 6 --profile
      done
    done
    python3 "$here/table.py" speed --out "$out" ;;
  rounds)
    # The same steps again, alternating (bf16, its variants, fp8, its
    # variants) for ROUNDS rounds: an A/B whose sides see the same drift of
    # the GPU's clocks (a whole-step figure moved 2-3% between calls).
    rounds="${3:-2}" steps="${4:-30}"
    for r in $(seq "$rounds"); do
      for m in ${MODELS:-gpt2 llama1b}; do
        variants=$(cd "$dir/steps" && ls "${m}"_*-*.so 2>/dev/null | sed "s/^${m}_//; s/\.so\$//")
        for p in bf16 $(grep '^bf16-' <<<"$variants") fp8 $(grep '^fp8-' <<<"$variants"); do
          [ -f "$dir/steps/${m}_$p.so" ] || continue
          train "round${r}_${m}_$p" "${m}_$p.so" "$steps"
        done
      done
      # The table so far, after each round: a call cut off by its timeout
      # keeps the rounds it finished (session 23 lost its A/B that way).
      python3 "$here/table.py" rounds --out "$out" > "$out/rounds-table.md"
      echo "after round $r:"; cat "$out/rounds-table.md"
    done ;;
  loss)
    steps="${3:-1000}"; shift $(( $# < 3 ? $# : 3 )) # the rest: trun flags for every run
    if [ -f "$dir/steps/llama1b_bf16-det.so" ] && [ -f "$dir/steps/llama1b_fp8-det.so" ]; then
      # --deterministic steps (prepare.sh VARIANT="det:--deterministic"):
      # each run bit-reproducible, so bf16 against fp8 is the precision's
      # difference alone; then the floor, the bf16 step with atomics: how
      # far the curve moves with no change of precision at all.
      TRUN_TIMEOUT=290 train loss_llama1b_bf16 llama1b_bf16-det.so "$steps" "$@"
      TRUN_TIMEOUT=290 train loss_llama1b_fp8 llama1b_fp8-det.so "$steps" "$@"
      TRUN_TIMEOUT=290 train loss_llama1b_bf16-again llama1b_bf16.so "$steps" "$@"
      python3 "$here/table.py" loss --out "$out" --floor "$out/loss_llama1b_bf16-again.jsonl"
    else
      for p in bf16 fp8; do
        TRUN_TIMEOUT=290 train "loss_llama1b_$p" "llama1b_$p.so" "$steps" "$@"
      done
      python3 "$here/table.py" loss --out "$out"
    fi ;;
  *) echo "run.sh: the part is speed, rounds or loss, not '$part'" >&2; exit 2 ;;
esac
