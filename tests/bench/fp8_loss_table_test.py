"""bench/fp8/table.py loss on made-up metrics files: the relative
differences it prints, its verdicts on issue 37's bounds (0.5% at every
50th step, 0.25% at the end), the floor column (--floor: a second bf16 run)
and the validation-loss table (trun --eval-every records).

usage: fp8_loss_table_test.py SOURCE_ROOT WORK_DIR
"""

import json
import os
import random
import re
import subprocess
import sys

root, work = sys.argv[1], sys.argv[2]
table = os.path.join(root, "bench", "fp8", "table.py")
os.makedirs(work, exist_ok=True)
rng = random.Random()
failures = []


def check(what, ok):
    if not ok:
        failures.append(what)
        print("FAIL", what)


def write(path, losses, evals=None):
    with open(path, "w") as f:
        for step, loss in enumerate(losses, start=1):
            if loss is None:  # a step this run does not have
                continue
            f.write(json.dumps({"kind": "step", "step": step, "loss": loss, "step_ms": 1.0}) + "\n")
            if evals and step in evals:
                f.write(json.dumps({"kind": "eval", "step": step, "val_loss": evals[step]}) + "\n")


def run(*args):
    p = subprocess.run([sys.executable, table, "loss", "--out", work, *args],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        raise SystemExit(f"table.py loss {args} failed: exit {p.returncode}")
    return p.stdout


steps = 100
base = [3.0 - 0.01 * s + rng.uniform(-0.05, 0.05) for s in range(1, steps + 1)]
# fp8 a factor off bf16 everywhere: every difference is that factor. The
# factor is drawn on either side of each bound, so the verdicts are tested
# both ways over repeated runs.
fp8_factor = 1 + rng.choice([1, -1]) * rng.uniform(0.001, 0.004)   # within 0.5%, maybe not 0.25%
floor_factor = 1 + rng.choice([1, -1]) * rng.uniform(0.006, 0.02)  # outside both
write(f"{work}/loss_llama1b_bf16.jsonl", base, {50: 2.5, 100: 2.0})
write(f"{work}/loss_llama1b_fp8.jsonl", [x * fp8_factor for x in base],
      {50: 2.5 * fp8_factor, 100: 2.0 * fp8_factor})
write(f"{work}/floor.jsonl", [x * floor_factor for x in base], {50: 2.5 * floor_factor, 100: 2.0 * floor_factor})

plain = run()
check("no floor column without --floor", "floor" not in plain)
rel = 100 * (fp8_factor - 1)
first = plain.split("\n\n")[0]  # the table of every 50th step
rows = re.findall(r"^\| (\d+) \| ([0-9.]+) \| ([0-9.]+) \| ([+-][0-9.]+)% \|$", first, re.M)
check("a row for steps 50 and 100", [r[0] for r in rows] == ["50", "100"])
for r in rows:
    check(f"step {r[0]}: the relative difference {r[3]} is {rel:+.3f}%", abs(float(r[3]) - rel) < 0.0015)
end = "within" if abs(rel) <= 0.25 else "OUTSIDE"
check("fp8's verdicts", f"fp8 at every 50th step: largest |difference| {abs(rel):.3f}% (within 0.5%); "
                        f"at step 100: {rel:+.3f}% ({end} 0.25%)" in plain)
check("the validation table", "| eval after step |" in plain and "fp8, validation loss:" in plain)

with_floor = run("--floor", f"{work}/floor.jsonl")
frel = 100 * (floor_factor - 1)
rows = re.findall(r"^\| (\d+) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| ([+-][0-9.]+)% \| ([+-][0-9.]+)% \|$",
                  with_floor, re.M)
check("rows with the floor column", len(rows) == 4)  # steps 50, 100; validation after 50, 100
for r in rows:
    check(f"floor at {r[0]}: {r[2]} is {frel:+.3f}%", abs(float(r[2]) - frel) < 0.0015)
check("the floor's verdict", "the floor (bf16 again) at every 50th step: largest |difference| "
                             f"{abs(frel):.3f}% (OUTSIDE 0.5%)" in with_floor)

# Runs with no step in common are not judged "within".
gap = os.path.join(work, "gap")
os.makedirs(gap, exist_ok=True)
write(f"{gap}/loss_llama1b_bf16.jsonl", base[:59])
write(f"{gap}/loss_llama1b_fp8.jsonl", [None] * 59 + base[59:])
p = subprocess.run([sys.executable, table, "loss", "--out", gap], capture_output=True, text=True)
check("disjoint runs: no verdict", p.returncode == 0 and "within" not in p.stdout and
      "no step has both runs" in p.stdout)

# A run without steps is an error, not an empty table.
open(f"{work}/empty.jsonl", "w").close()
p = subprocess.run([sys.executable, table, "loss", "--out", work, "--floor", f"{work}/empty.jsonl"],
                   capture_output=True, text=True)
check("an empty floor file fails with its name", p.returncode != 0 and "empty.jsonl" in p.stderr)

print(f"{'FAILED' if failures else 'ok'}: table.py loss (fp8 x{fp8_factor:.4f}, floor x{floor_factor:.4f})")
sys.exit(1 if failures else 0)
