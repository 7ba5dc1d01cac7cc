#!/usr/bin/env python3
"""Checks a trun metrics file of a step with dynamic loss scaling against
torch.cuda.amp.GradScaler's rule: every step's reported loss_scale follows
from the initial scale and the overflow flags of the steps before it (x0.5
after an overflow, x2 after INTERVAL good steps in a row unless that is not
a finite f32), skipped_steps counts the overflows, the first steps overflow
(at least MIN_OVERFLOWS in a row), and afterwards the loss falls (the mean of
the last 10 losses below 0.6 x the mean of the first 5).

Used by tests/e2e/loss_scaling_test.py (CPU) and tests/gpu/run.sh (GPU).

usage: loss_scaling_rule.py METRICS INITIAL_SCALE INTERVAL [MIN_OVERFLOWS]
Prints one summary line; exit 1 on a violation.
"""
import json
import sys

F32_LIMIT = 2.0 ** 128  # the first power of two above the f32 range


def step_records(metrics_path):
    """The step records in step order; the last record of each step wins
    (a resumed run redoes the steps after its checkpoint)."""
    records = {}
    with open(metrics_path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("kind") == "step":
                records[record["step"]] = record
    return [records[s] for s in sorted(records)]


def check(records, initial, interval, min_overflows=3):
    """None if `records` follow the rule, else what is wrong."""
    scale, good, skipped = initial, 0, 0
    for r in records:
        if r["loss_scale"] != scale:
            return ("step %d used loss scale %r, GradScaler's rule gives %r" %
                    (r["step"], r["loss_scale"], scale))
        if r["overflow"]:
            skipped += 1
            scale, good = scale * 0.5, 0
        else:
            good += 1
            if good == interval:
                scale, good = (scale * 2 if scale * 2 < F32_LIMIT else
                               scale), 0
        if r["skipped_steps"] != skipped:
            return ("step %d reports skipped_steps %r, %d overflows so far" %
                    (r["step"], r["skipped_steps"], skipped))
    first = 0
    while first < len(records) and records[first]["overflow"]:
        first += 1
    if first < min_overflows:
        return ("only %d overflowing steps at the start, expected at least %d"
                % (first, min_overflows))
    if any(r.get("grad_norm") is not None for r in records[:first]):
        return "an overflowing step reported a finite grad_norm"
    if not any(b["loss_scale"] == 2 * a["loss_scale"]
               for a, b in zip(records, records[1:])):
        return "the scale never grew after %d good steps" % interval
    early = sum(r["loss"] for r in records[:5]) / 5
    late = sum(r["loss"] for r in records[-10:]) / 10
    if not late < 0.6 * early:
        return "the loss did not fall after the overflows: %.3f -> %.3f" % (
            early, late)
    return None


def summary(records):
    skipped = sum(1 for r in records if r["overflow"])
    first = 0
    while first < len(records) and records[first]["overflow"]:
        first += 1
    early = sum(r["loss"] for r in records[:5]) / 5
    late = sum(r["loss"] for r in records[-10:]) / 10
    return ("%d of %d steps skipped (%d at the start), last scale %g, loss "
            "%.2f -> %.2f" % (skipped, len(records), first,
                              records[-1]["loss_scale"], early, late))


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        sys.exit(2)
    records = step_records(sys.argv[1])
    min_overflows = int(sys.argv[4]) if len(sys.argv) == 5 else 3
    problem = check(records, float(sys.argv[2]), int(sys.argv[3]),
                    min_overflows) if records else "no step records"
    if problem:
        print("loss scaling (GradScaler rule): FAIL: " + problem)
        sys.exit(1)
    print("loss scaling (GradScaler rule): PASS: " + summary(records))


if __name__ == "__main__":
    main()
