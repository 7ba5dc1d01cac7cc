#!/usr/bin/env python3
"""Checks the checkers of tests/gpu without a GPU: compare_losses.py and
loss_scale_check.py on made-up trun --metrics files, each in a case that
must pass and in cases that must fail (a perturbed loss, a scale that does
not halve, no skipped step, a loss that does not fall, a missing field, an
unscaled fp16 run that trains). Prints one line per case; exit 1 if a
checker gave the wrong verdict.

    python3 tests/gpu/checkers_test.py
"""
import json
import math
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import amp_names as names  # noqa: E402

S0 = 2.0 ** 32
W = 2.0 ** -14


def write(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return path


def curve(steps=200, start=4.7, end=2.4):
    return [end + (start - end) * math.exp(-s / 40) for s in range(steps)]


def overflow_run(skips=12, used=False):
    """A dynamic-scaling run from S0 whose first `skips` steps overflow."""
    recs, scale = [], S0
    losses = curve()
    for i in range(1, 201):
        skipped = i <= skips
        before = scale
        if skipped:
            scale *= names.GRADSCALER_BACKOFF
        loss = losses[0] if i <= skips + 1 else losses[i - skips - 1]
        recs.append({"kind": "step", "step": i, "loss": loss,
                     names.METRIC_LOSS_SCALE: before if used else scale,
                     names.METRIC_SKIPPED: 1 if skipped else 0})
    return recs


def plain_run(losses, **extra):
    return [{"kind": "step", "step": i + 1, "loss": x, "grad_norm": 1.0, **extra}
            for i, x in enumerate(losses)]


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        p = lambda name: os.path.join(tmp, name)  # noqa: E731

        def case(label, want_pass, cmd):
            nonlocal failures
            result = subprocess.run([sys.executable] + cmd, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            ok = (result.returncode == 0) == want_pass
            failures += not ok
            lines = result.stdout.strip().splitlines() or [""]
            shown = next((x for x in lines if "FAIL" in x), lines[0])
            print(f"{'ok  ' if ok else 'BAD '} {label}: expected {'PASS' if want_pass else 'FAIL'}, "
                  f"exit {result.returncode}: {shown.strip()}")

        compare = [os.path.join(here, "compare_losses.py"), "run"]
        amp_tol = ["--steps", "200", "--tol", "0.02", "--skip-first", "10", "--final-tol", "0.01"]
        ref = curve()
        write(p("ref.jsonl"), plain_run(ref))
        write(p("close.jsonl"), plain_run([x * (1 + 0.004 * math.sin(i)) for i, x in enumerate(ref)]))
        write(p("early.jsonl"), plain_run([x * (1.05 if i < 10 else 1.0) for i, x in enumerate(ref)]))
        write(p("step_off.jsonl"), plain_run([x * (1.03 if i == 120 else 1.0) for i, x in enumerate(ref)]))
        write(p("final_off.jsonl"), plain_run([x * (1.015 if i == 199 else 1.0) for i, x in enumerate(ref)]))
        write(p("short.jsonl"), plain_run(ref[:150]))
        case("within 0.4%", True, compare + [p("ref.jsonl"), p("close.jsonl")] + amp_tol)
        case("5% off in the first 10 steps only", True, compare + [p("ref.jsonl"), p("early.jsonl")] + amp_tol)
        case("3% off at step 121", False, compare + [p("ref.jsonl"), p("step_off.jsonl")] + amp_tol)
        case("1.5% off at the last step", False, compare + [p("ref.jsonl"), p("final_off.jsonl")] + amp_tol)
        case("150 of 200 steps", False, compare + [p("ref.jsonl"), p("short.jsonl")] + amp_tol)
        case("identical, default 1e-4", True, compare + [p("ref.jsonl"), p("ref.jsonl"), "--steps", "200"])

        check = [os.path.join(here, "loss_scale_check.py")]
        overflow = check + ["overflow"]
        scale = ["--initial-scale", repr(S0)]
        case("overflow, scale after the step", True, overflow + [write(p("o1.jsonl"), overflow_run())] + scale)
        case("overflow, scale used by the step", True,
             overflow + [write(p("o2.jsonl"), overflow_run(used=True))] + scale)
        bad = overflow_run()
        bad[5][names.METRIC_LOSS_SCALE] = bad[4][names.METRIC_LOSS_SCALE]
        case("overflow, scale not halved once", False, overflow + [write(p("o3.jsonl"), bad)] + scale)
        case("overflow, no skipped step", False, overflow + [write(p("o4.jsonl"), overflow_run(skips=0))] + scale)
        flat = [dict(r, loss=4.7) for r in overflow_run()]
        case("overflow, loss does not fall", False, overflow + [write(p("o5.jsonl"), flat)] + scale)
        bare = [{k: v for k, v in r.items() if k != names.METRIC_SKIPPED} for r in overflow_run()]
        case("overflow, no skipped field", False, overflow + [write(p("o6.jsonl"), bare)] + scale)

        fp32 = [x * W for x in ref]
        write(p("u_fp32.jsonl"), plain_run(fp32))
        write(p("u_none.jsonl"), [dict(r, grad_norm=0.0) for r in plain_run([fp32[0]] * 200)])
        scaled = {names.METRIC_LOSS_SCALE: names.GRADSCALER_INIT_SCALE, names.METRIC_SKIPPED: 0}
        write(p("u_dyn.jsonl"), plain_run([x * 1.005 for x in fp32], **scaled))
        write(p("u_dyn_off.jsonl"), plain_run([x * 1.05 for x in fp32], **scaled))
        under = lambda none, dyn: check + [  # noqa: E731
            "underflow", "--fp32", p("u_fp32.jsonl"), "--fp16-none", p(none), "--fp16-dynamic", p(dyn),
            "--bf16", p("u_fp32.jsonl"), "--loss-weight", repr(W)]
        case("underflow, fp16 unscaled stalls", True, under("u_none.jsonl", "u_dyn.jsonl"))
        case("underflow, fp16 unscaled trains", False, under("u_fp32.jsonl", "u_dyn.jsonl"))
        case("underflow, fp16 scaled 5% off", False, under("u_none.jsonl", "u_dyn_off.jsonl"))
        case("underflow, fp16 scaled reports no scale", False, under("u_none.jsonl", "u_fp32.jsonl"))
    print("checkers_test: " + ("all verdicts right" if not failures else f"{failures} wrong verdicts"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
