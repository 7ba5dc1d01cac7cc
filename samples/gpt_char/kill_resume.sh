#!/usr/bin/env bash
# Checkpoints on the character-level GPT: kill -9 the training at a random
# moment, resume it, and check that the losses equal those of an
# uninterrupted run with the same seed, step for step, bit for bit.
#
#   bash samples/gpt_char/kill_resume.sh            # 300 steps, checkpoint every 20
#   STEPS=1000 CKPT_EVERY=100 bash samples/gpt_char/kill_resume.sh
#
# Takes about twice the training time of STEPS steps (two runs).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
steps="${STEPS:-300}"
ckpt_every="${CKPT_EVERY:-20}"

source "$here/prepare.sh" # sets root, build, out
work="$out/kill_resume"
rm -rf "$work" && mkdir -p "$work"
train=(--data "$out/fortunes_train.bin" --steps "$steps" --seed 0 --log-every 50)

echo "== 1. uninterrupted run ($steps steps)"
"$build/bin/trun" "$out/gpt_char.so" "${train[@]}" --metrics "$work/uninterrupted.jsonl"

echo "== 2. the same run with --ckpt-dir, killed with kill -9"
# Kill it at a random step between the first checkpoint and the end (a
# kill lands anywhere in that step: inside the step, a checkpoint write, or
# a metrics write).
kill_at=$(python3 -c "import random; print(random.randint($ckpt_every + 1, $steps - 1))")
"$build/bin/trun" "$out/gpt_char.so" "${train[@]}" --ckpt-dir "$work/ckpt" \
  --ckpt-every "$ckpt_every" --metrics "$work/resumed.jsonl" &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  done_steps=$(grep -c '"kind":"step"' "$work/resumed.jsonl" 2>/dev/null || true)
  if [ "${done_steps:-0}" -ge "$kill_at" ]; then
    kill -9 "$pid"
    break
  fi
  sleep 0.02
done
if wait "$pid"; then
  echo "the run finished before the kill" >&2
  exit 1
fi
echo "killed trun (pid $pid) with kill -9 after step $kill_at"
ls "$work/ckpt"

echo "== 3. --resume"
"$build/bin/trun" "$out/gpt_char.so" "${train[@]}" --ckpt-dir "$work/ckpt" \
  --ckpt-every "$ckpt_every" --metrics "$work/resumed.jsonl" --resume

echo "== 4. compare the per-step losses"
python3 - "$work/uninterrupted.jsonl" "$work/resumed.jsonl" "$steps" <<'PY'
import json, sys
def losses(path):
    result, resumed_at = {}, None
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") == "step":
            result[r["step"]] = r["loss"]  # the last record of a step wins
        elif r.get("event") == "resume":
            resumed_at = r["step"]
    return result, resumed_at
a, _ = losses(sys.argv[1])
b, resumed_at = losses(sys.argv[2])
steps = int(sys.argv[3])
diff = [s for s in range(1, steps + 1) if a.get(s) != b.get(s)]
print("resumed at step %s; %d steps compared; %d differ" %
      (resumed_at, steps, len(diff)))
if diff or resumed_at is None:
    print("FAIL: first differing steps %s" % diff[:5])
    sys.exit(1)
print("OK: the resumed run's losses equal the uninterrupted run's, bit for bit")
PY
