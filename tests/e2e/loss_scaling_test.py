#!/usr/bin/env python3
"""Dynamic loss scaling end to end: tcc compile --loss-scale dynamic, trun.

The MLP sample with its loss summed over the batch (gradients 64x those of
the mean, learning rate /64) and clipping (so the step reports grad_norm)
is compiled with an initial loss scale of 2^127, which makes the scaled
gradients overflow f32, and a growth interval of 4. Trained with trun on
Fashion-MNIST (CPU):

  overflow    the first steps skip their update: "overflow": true, the
              scale halves every step, and the run goes on (exit 0) although
              those steps' grad_norm is inf/NaN: a skipped step is no
              --on-nan event.
  GradScaler  every reported scale follows torch.cuda.amp.GradScaler's rule
              (x0.5 after an overflow, x2 after 4 good steps in a row) from
              2^127, exactly; skipped_steps counts the overflows
              (loss_scaling_rule.py, which tests/gpu/run.sh uses too).
  recovery    after the overflows the loss falls.
  reports     the progress line shows "loss scale" and "overflow N", the
              end of the run "loss scaling: N of M steps skipped".
  resume      20 steps, a checkpoint, --resume to 40: every step's loss,
              scale and overflow flag equal the uninterrupted run's bit for
              bit (the scale and its counters are optimizer state).
  exact       with a power-of-two scale that does not overflow (2^16), the
              losses equal those of the step compiled without loss scaling
              bit for bit.

usage: loss_scaling_test.py TCC TRUN SAMPLE WORKDIR
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loss_scaling_rule  # noqa: E402  (beside this file)

TCC, TRUN, SAMPLE, WORK = sys.argv[1:5]
DATA = "/usr/share/datasets/fashion-mnist"
STEPS = 40
INTERVAL = 4
INITIAL = 2.0 ** 127


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(args, expect_rc=0):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != expect_rc:
        fail("%s exited %d (expected %d):\n%s%s" %
             (" ".join(args), result.returncode, expect_rc, result.stdout,
              result.stderr))
    return result


steps = loss_scaling_rule.step_records


def trun(step, metrics, extra, steps_to=STEPS):
    return run([TRUN, step, "--data", DATA, "--steps", str(steps_to),
                "--seed", "1", "--log-every", "1", "--metrics", metrics] +
               extra)


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
with open(SAMPLE) as f:
    text = f.read()
summed = text.replace('op: "mean"', 'op: "sum"').replace(
    "learning_rate: 0.1\n", "learning_rate: 0.0015625\n").replace(
    "training {\n", "training {\n  grad_clip: 1000.0\n")
if summed.count('op: "sum"') != 1 or "0.0015625" not in summed:
    fail("the MLP sample no longer has the mean loss and lr this test edits")
model = os.path.join(WORK, "mlp_sum.pbtxt")
with open(model, "w") as f:
    f.write(summed)
step = os.path.join(WORK, "scaled.so")
run([TCC, "compile", "--target", "cpu", model, "-o", step, "--loss-scale",
     "dynamic", "--initial-loss-scale", repr(INITIAL),
     "--loss-scale-growth-interval", str(INTERVAL)])

# --- overflow, GradScaler's rule, recovery, reports --------------------------
full = os.path.join(WORK, "full.jsonl")
result = trun(step, full, ["--ckpt-dir", os.path.join(WORK, "ckpt_full")])
records = loss_scaling_rule.step_records(full)
if len(records) != STEPS:
    fail("%d step records, expected %d" % (len(records), STEPS))
problem = loss_scaling_rule.check(records, INITIAL, INTERVAL)
if problem:
    fail(problem)
if not re.search(r"loss scale 1\.70141e\+38  overflow 1", result.stdout):
    fail("no progress line with 'loss scale' and 'overflow':\n" +
         result.stdout)
skipped = records[-1]["skipped_steps"]
summary = "loss scaling: %d of %d steps skipped their update" % (skipped,
                                                                STEPS)
if summary not in result.stdout:
    fail("no '%s' line:\n%s" % (summary, result.stdout))
print("overflow: " + loss_scaling_rule.summary(records))

# --- resume ------------------------------------------------------------------
parts = os.path.join(WORK, "parts.jsonl")
ckpt = os.path.join(WORK, "ckpt_parts")
trun(step, parts, ["--ckpt-dir", ckpt], steps_to=20)
trun(step, parts, ["--ckpt-dir", ckpt, "--resume"])
resumed = steps(parts)
for a, b in zip(records, resumed):
    for key in ("loss", "loss_scale", "overflow", "skipped_steps"):
        if a[key] != b[key]:
            fail("resumed run differs at step %d: %s %r vs %r" %
                 (a["step"], key, b[key], a[key]))
if len(resumed) != STEPS:
    fail("the resumed run has %d steps" % len(resumed))
print("resume: 20 + 20 steps equal the uninterrupted run bit for bit")

# --- a power-of-two scale without overflow is exact --------------------------
plain, exact = os.path.join(WORK, "plain.so"), os.path.join(WORK, "exact.so")
sample_steps = 15
run([TCC, "compile", "--target", "cpu", SAMPLE, "-o", plain])
run([TCC, "compile", "--target", "cpu", SAMPLE, "-o", exact, "--loss-scale",
     "dynamic"])
plain_metrics = os.path.join(WORK, "plain.jsonl")
exact_metrics = os.path.join(WORK, "exact.jsonl")
trun(plain, plain_metrics, [], steps_to=sample_steps)
trun(exact, exact_metrics, [], steps_to=sample_steps)
a, b = steps(plain_metrics), steps(exact_metrics)
if [r["loss"] for r in a] != [r["loss"] for r in b]:
    fail("loss scale 2^16 changed the losses:\n%r\n%r" %
         ([r["loss"] for r in a], [r["loss"] for r in b]))
if any(r["overflow"] or r["loss_scale"] != 65536.0 for r in b):
    fail("the MLP sample overflowed at 2^16")
print("exact: %d steps with loss scale 2^16 equal the unscaled step" %
      sample_steps)
print("PASS")
