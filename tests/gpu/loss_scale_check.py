#!/usr/bin/env python3
"""The fp16 loss-scaling checks of tests/gpu/amp_checks.sh, read from trun
--metrics files (field names: amp_names.py).

overflow: a run with a huge initial loss scale S0. Passes if
  - every step record has the loss scale and the skipped flag;
  - the scale follows GradScaler's rule at every step: halved by a skipped
    step, unchanged by a good one (doubled after 2000 good steps in a row);
    the record may hold the scale after its step or the one it used: one of
    the two readings must fit every step, and the check says which;
  - steps 1..K are skipped, K >= --min-skips (S0 overflows), the scale
    after them is S0 / 2^K, and at most --max-later-skips of the later steps
    are skipped;
  - the loss falls after the skips: the mean loss of the last 20 steps is
    below --fall (default 0.8) times the loss of step 1.

    loss_scale_check.py overflow METRICS --initial-scale S0 [--min-skips 3]

underflow: the same model (amp_models.py's "underflow": loss x LOSS_WEIGHT)
in fp32, fp16 without loss scaling, fp16 with dynamic scaling and bf16
without it, same seed and batches. Losses are divided by the weight (the
cross-entropy in nats). Passes if
  - fp32 trains: mean of the last 20 steps < --fall x step 1;
  - fp16 without scaling stalls: mean of the last 20 steps >= --stall
    (default 0.95) x step 1 (its gradients round to zero in fp16);
  - fp16 with dynamic scaling and bf16 without it both train: mean of the
    last 20 steps within --final-tol (default 2%) of fp32's.

    loss_scale_check.py underflow --fp32 A --fp16-none B --fp16-dynamic C
        --bf16 D --loss-weight W
"""
import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import amp_names as names  # noqa: E402

TAIL = 20  # steps averaged for "the loss at the end"


class CheckError(Exception):
    pass


def read_steps(path):
    """{step: record} of the step records (and trun's skip records)."""
    steps = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") in ("step", names.SKIP_RECORD_KIND):
                steps[rec["step"]] = rec
    if not steps:
        raise CheckError(f"{path}: no step records")
    return steps


def number(value):
    return float("nan") if value is None else float(value)


def skipped_flags(path, steps):
    """[bool] per step 1..n: was the step skipped."""
    flags, before = [], 0
    for s in sorted(steps):
        rec = steps[s]
        if rec.get("kind") == names.SKIP_RECORD_KIND:
            flags.append(True)
            continue
        if names.METRIC_SKIPPED not in rec:
            raise CheckError(f"{path}: step {s} has no '{names.METRIC_SKIPPED}' field "
                             f"(amp_names.METRIC_SKIPPED); fields: {sorted(rec)}")
        value = rec[names.METRIC_SKIPPED]
        if names.SKIPPED_COUNTS == "per_step":
            if value not in (0, 1, True, False):
                raise CheckError(f"{path}: step {s}: '{names.METRIC_SKIPPED}' is {value}, "
                                 "not 0/1: is it a running count? (amp_names.SKIPPED_COUNTS)")
            flags.append(bool(value))
        else:
            if value < before:
                raise CheckError(f"{path}: step {s}: '{names.METRIC_SKIPPED}' fell from "
                                 f"{before} to {value}: not a running count "
                                 "(amp_names.SKIPPED_COUNTS)")
            flags.append(value > before)
            before = value
    return flags


def expected_scales(start, flags):
    """GradScaler's scale after each step, from `start` before step 1."""
    scale, good, out = start, 0, []
    for skipped in flags:
        if skipped:
            scale, good = scale * names.GRADSCALER_BACKOFF, 0
        else:
            good += 1
            if good == names.GRADSCALER_GROWTH_INTERVAL:
                scale, good = scale * names.GRADSCALER_GROWTH, 0
        out.append(scale)
    return out


def first_mismatch(actual, expected):
    for i, (a, e) in enumerate(zip(actual, expected)):
        if not abs(a - e) <= 1e-4 * abs(e):  # the JSON may round
            return i + 1, a, e
    return None


def tail_mean(losses):
    return statistics.fmean(losses[-TAIL:])


def tail_text(losses):
    return f"mean of the last {min(TAIL, len(losses))} steps"


def check_overflow(a):
    steps = read_steps(a.metrics)
    order = sorted(steps)
    if order != list(range(1, len(order) + 1)):
        raise CheckError(f"{a.metrics}: steps are not 1..{len(order)}")
    flags = skipped_flags(a.metrics, steps)
    scales = []
    for s in order:
        if names.METRIC_LOSS_SCALE not in steps[s]:
            raise CheckError(f"{a.metrics}: step {s} has no '{names.METRIC_LOSS_SCALE}' "
                             f"field (amp_names.METRIC_LOSS_SCALE)")
        scales.append(number(steps[s][names.METRIC_LOSS_SCALE]))
    after = expected_scales(a.initial_scale, flags)
    readings = {"the scale after the step": after,
                "the scale the step used": [a.initial_scale] + after[:-1]}
    fits = {k: first_mismatch(scales, v) for k, v in readings.items()}
    reading = next((k for k, m in fits.items() if m is None), None)
    failures = []
    if reading is None:
        for k, (s, got, want) in fits.items():
            failures.append(f"read as {k}, step {s} has scale {got:g}, GradScaler's rule gives {want:g}")
    k = next((i for i, f in enumerate(flags) if not f), len(flags))
    later = sum(flags[k:])
    if k < a.min_skips:
        failures.append(f"only {k} skipped steps at the start (expected >= {a.min_skips}: "
                        f"the initial scale {a.initial_scale:g} should overflow)")
    if later > a.max_later_skips:
        failures.append(f"{later} skipped steps after the first {k} (at most {a.max_later_skips})")
    losses = [number(steps[s]["loss"]) for s in order]
    good = [x for x, f in zip(losses, flags) if not f]
    if not all(math.isfinite(x) for x in good):
        failures.append("a step that was not skipped has a non-finite loss")
    end = tail_mean(losses)
    if not end < a.fall * losses[0]:
        failures.append(f"the loss did not fall: {tail_text(losses)} {end:.4f} "
                        f"vs step 1 {losses[0]:.4f} (must be below {a.fall:g}x)")
    shown = " -> ".join(f"{x:.4g}" for x in scales[:min(k + 2, 6)])
    if k + 2 > 6:
        shown += f" ... {scales[k]:.4g}"
    skips = f"steps 1-{k} skipped" if k else "step 1 not skipped"
    print(f"fp16 overflow (initial loss scale {a.initial_scale:g}): {skips} "
          f"({later} later), scale {shown} (= S0/2^{k}: "
          f"{a.initial_scale / 2 ** k:.4g}) read as {reading or 'neither reading'}; "
          f"loss step 1 {losses[0]:.4f}, step {k + 1} {losses[min(k, len(losses) - 1)]:.4f}, "
          f"{tail_text(losses)} {end:.4f}: {'PASS' if not failures else 'FAIL'}")
    for f in failures:
        print(f"  FAIL: {f}")
    return not failures


def weighted_losses(path, weight):
    steps = read_steps(path)
    return ([number(steps[s]["loss"]) / weight for s in sorted(steps)],
            [number(steps[s].get("grad_norm")) for s in sorted(steps)],
            steps)


def check_underflow(a):
    runs = {name: weighted_losses(path, a.loss_weight) for name, path in
            (("fp32", a.fp32), ("fp16-none", a.fp16_none),
             ("fp16-dynamic", a.fp16_dynamic), ("bf16", a.bf16))}
    ce = {k: v[0] for k, v in runs.items()}
    lengths = {k: len(v) for k, v in ce.items()}
    if len(set(lengths.values())) != 1:
        raise CheckError(f"the runs have different step counts: {lengths}")
    end = {k: tail_mean(v) for k, v in ce.items()}
    first = ce["fp32"][0]
    ok = True

    def line(claim, passed, text):
        nonlocal ok
        ok &= passed
        print(f"fp16 underflow ({claim}): {text}: {'PASS' if passed else 'FAIL'}")

    line("fp32 trains", end["fp32"] < a.fall * first,
         f"cross-entropy step 1 {first:.4f} -> {tail_text(ce['fp32'])} {end['fp32']:.4f} "
         f"(below {a.fall:g}x)")
    norms = [n for n in runs["fp16-none"][1] if not math.isnan(n)]
    norm_text = (f"gradient norm at most {max(norms):.3g} (fp32: median "
                 f"{statistics.median(runs['fp32'][1]):.3g})" if norms else "no gradient norms")
    line("fp16 without loss scaling stalls", end["fp16-none"] >= a.stall * ce["fp16-none"][0],
         f"cross-entropy {ce['fp16-none'][0]:.4f} -> {end['fp16-none']:.4f} "
         f"(not below {a.stall:g}x); {norm_text}")
    for name in ("fp16-dynamic", "bf16"):
        rel = abs(end[name] - end["fp32"]) / end["fp32"]
        extra, reported = "", True
        if name == "fp16-dynamic":  # must report its scale and skipped steps
            steps = runs[name][2]
            last = steps[max(steps)]
            try:
                skipped = sum(skipped_flags(a.fp16_dynamic, steps))
                extra = f"; {skipped} skipped steps"
            except CheckError as e:
                extra, reported = f"; {e}", False
            reported &= names.METRIC_LOSS_SCALE in last
            extra += f", final loss scale {last.get(names.METRIC_LOSS_SCALE, 'not reported')}"
        claim = ("fp16 with dynamic loss scaling trains" if name == "fp16-dynamic"
                 else "bf16 without loss scaling trains")
        line(claim, rel <= a.final_tol and reported,
             f"cross-entropy {ce[name][0]:.4f} -> {end[name]:.4f} vs fp32 {end['fp32']:.4f}, "
             f"relative {rel:.2e} (tolerance {a.final_tol:g}){extra}")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="check", required=True)
    o = sub.add_parser("overflow")
    o.add_argument("metrics")
    o.add_argument("--initial-scale", type=float, required=True)
    o.add_argument("--min-skips", type=int, default=3)
    o.add_argument("--max-later-skips", type=int, default=10)
    o.add_argument("--fall", type=float, default=0.8)
    u = sub.add_parser("underflow")
    for run in ("fp32", "fp16-none", "fp16-dynamic", "bf16"):
        u.add_argument("--" + run, required=True)
    u.add_argument("--loss-weight", type=float, required=True)
    u.add_argument("--fall", type=float, default=0.8)
    u.add_argument("--stall", type=float, default=0.95)
    u.add_argument("--final-tol", type=float, default=0.02)
    a = p.parse_args()
    try:
        ok = check_overflow(a) if a.check == "overflow" else check_underflow(a)
    except (CheckError, OSError, ValueError, KeyError) as e:
        print(f"fp16 {a.check}: FAIL: {e}")
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
