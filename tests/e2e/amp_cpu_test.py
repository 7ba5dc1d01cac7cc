#!/usr/bin/env python3
"""Mixed precision end to end on the CPU: bf16 and fp16 steps track fp32.

A small character-level GPT (rotary and learned positions, micro-batches,
clipping, AdamW) is compiled three times from one model file, with
--precision fp32, bf16 and fp16, and trained on Debian's fortunes with the
same seed, so the initial weights (fp32 master weights in every variant)
and the batches are the same. The CPU backend runs the 16-bit graphs with
the same casts as the GPU (16-bit storage, f32 math, sgemm on converted
operands), so this checks the tg-amp policy and the CPU kernels together:

  * the 16-bit runs' mean loss over steps 11-80 stays within 2% of
    fp32's, and every 10-step window's within 5% (single steps are single
    small batches: their noise is printed, not judged). Windows alone were
    judged at 2% until 2026-12-05: learned bf16 then measured 2.98% with a
    kern IR identical to a build that measured 0.32% -- only the host
    compiler's code for one unchanged-path norm kernel differed, and the
    rounding it moved shifted when the run left the unigram plateau (loss
    ~3.4) by a few steps. The mean over the run (1.32% there) and the
    validation loss (0.02%) are what the casts' drift shows in;
  * at the end, the validation loss (the same 16 held-out batches for
    every variant) is within 1% of fp32's. Training batches are too noisy
    for a 1% bound: the last 10-step window of rope fp16 measured 1.02%
    away (CI, 2026-12-02) while its validation loss was 0.22% away; the
    validation loss removes the batch-to-batch noise and leaves the drift
    the casts cause (the windows are still printed);
  * the runs differ at all (the casts take effect);
  * the loss falls by at least 20% in every variant;
  * the step's descriptor reports its precision (trun --info).

usage: amp_cpu_test.py TCC TCC_MODELS TCC_DATA TRUN WORKDIR
"""
import os
import shutil
import sys

import json

from e2e_steps import fail, losses, run
from fortunes_text import tokenize_fortunes

TCC, TCC_MODELS, TCC_DATA, TRUN, WORK = sys.argv[1:6]
STEPS = 80
EVAL_BATCHES = 16


def final_val_loss(metrics):
    """The validation loss trun logged after the last step."""
    with open(metrics) as f:
        evals = [json.loads(line) for line in f]
    evals = [r for r in evals if r.get("kind") == "eval" and "val_loss" in r]
    if not evals or evals[-1]["step"] != STEPS:
        fail("%s: no validation loss at step %d" % (metrics, STEPS))
    return evals[-1]["val_loss"]


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    data, vocab = tokenize_fortunes(run, TCC_DATA, WORK)

    for positions in ("learned", "rope"):
        model = os.path.join(WORK, "gpt_%s.pbtxt" % positions)
        run([TCC_MODELS, "gpt", "--vocab", str(vocab), "--context", "32",
             "--layers", "2", "--width", "64", "--heads", "2", "--batch", "8",
             "--micro-batches", "2", "--positions", positions,
             "--lr", "3e-3", "-o", model])
        curves, finals = {}, {}
        for precision in ("fp32", "bf16", "fp16"):
            step = os.path.join(WORK, "%s_%s.so" % (positions, precision))
            run([TCC, "compile", "--target", "cpu", "--precision", precision,
                 model, "-o", step])
            info = run([TRUN, step, "--info"]).stdout
            if "precision %s" % precision not in info:
                fail("trun --info of the %s step does not say 'precision %s':\n%s"
                     % (precision, precision, info))
            metrics = os.path.join(WORK, "%s_%s.jsonl" % (positions, precision))
            run([TRUN, step, "--data", data + "_train.bin", "--steps", str(STEPS),
                 "--val", data + "_val.bin", "--eval-every", str(STEPS),
                 "--eval-batches", str(EVAL_BATCHES),
                 "--seed", "3", "--log-every", "20", "--metrics", metrics])
            curves[precision] = losses(metrics)
            finals[precision] = final_val_loss(metrics)
            if len(curves[precision]) != STEPS:
                fail("%s %s: %d step records, expected %d"
                     % (positions, precision, len(curves[precision]), STEPS))

        base = curves["fp32"]
        for precision in ("bf16", "fp16"):
            curve = curves[precision]
            if curve == base:
                fail("%s %s: losses identical to fp32 (the casts did nothing)"
                     % (positions, precision))
            # Each step's loss is one small batch's: two runs whose weights
            # differ by rounding drift apart by a few % on single steps
            # (PyTorch's autocast does the same), so windows of 10 steps are
            # compared; the per-step worst is printed for information.
            worst_step = max(abs(a - b) / b for a, b in zip(curve[10:], base[10:]))
            windows = [(sum(curve[i:i + 10]) / 10, sum(base[i:i + 10]) / 10)
                       for i in range(10, STEPS, 10)]
            worst = max(abs(a - b) / b for a, b in windows)
            last_window = abs(windows[-1][0] - windows[-1][1]) / windows[-1][1]
            final_error = abs(finals[precision] - finals["fp32"]) / finals["fp32"]
            print("%-7s %s: worst 10-step window %.2f%% (single step %.2f%%, last "
                  "window %.2f%%); validation loss at step %d %.4f vs fp32 %.4f (%.2f%%)"
                  % (positions, precision, 100 * worst, 100 * worst_step,
                     100 * last_window, STEPS, finals[precision], finals["fp32"],
                     100 * final_error))
            run_mean = (abs(sum(curve[10:]) - sum(base[10:])) / sum(base[10:]))
            print("%-7s %s: mean loss over steps 11-%d %.2f%% away from fp32's"
                  % (positions, precision, STEPS, 100 * run_mean))
            if run_mean > 0.02:
                fail("%s %s: the mean loss over steps 11-%d %.2f%% away from fp32's "
                     "(limit 2%%)" % (positions, precision, STEPS, 100 * run_mean))
            if worst > 0.05:
                fail("%s %s: a 10-step mean loss %.2f%% away from fp32's (limit 5%%)"
                     % (positions, precision, 100 * worst))
            if final_error > 0.01:
                fail("%s %s: validation loss at step %d %.2f%% away from fp32's (limit 1%%)"
                     % (positions, precision, STEPS, 100 * final_error))
        for precision, curve in curves.items():
            if not curve[-1] < 0.8 * curve[0]:
                fail("%s %s: loss %.4f -> %.4f did not fall by 20%%"
                     % (positions, precision, curve[0], curve[-1]))
    print("PASS")


if __name__ == "__main__":
    main()
