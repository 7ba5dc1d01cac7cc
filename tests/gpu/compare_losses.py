#!/usr/bin/env python3
"""Compares the per-step training losses of two trun --metrics files (two
runs of the same model, initial weights and batches: CPU vs GPU, bf16 vs
fp32, tcc vs PyTorch) and fails if one of the first STEPS differs by more
than TOL relative (steps after --skip-first only; the last step against
--final-tol, default TOL).

    compare_losses.py NAME A.jsonl B.jsonl [--steps 100] [--tol 1e-4]
                      [--skip-first 0] [--final-tol TOL]
                      [--labels cpu,gpu]   (what to call the two runs)

The relative difference is |loss_B - loss_A| / |loss_A|: A is the reference.
"""
import argparse
import json
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "step":
                out[rec["step"]] = rec["loss"]
    return out


def relative(value, reference):
    if value is None or reference is None:  # trun writes non-finite numbers as null
        return float("inf")
    return abs(value - reference) / max(abs(reference), 1e-30)


def fmt(loss):
    return "null" if loss is None else f"{loss:.6f}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("cpu", metavar="A")
    p.add_argument("gpu", metavar="B")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--skip-first", type=int, default=0,
                   help="steps 1..N are not held to --tol")
    p.add_argument("--final-tol", type=float,
                   help="tolerance of the last step (default: --tol)")
    p.add_argument("--labels", default="cpu,gpu")
    a = p.parse_args()
    final_tol = a.tol if a.final_tol is None else a.final_tol
    la, lb = a.labels.split(",")
    ref, run = losses(a.cpu), losses(a.gpu)
    worst, worst_step, bad = 0.0, 0, []
    for step in range(1, a.steps + 1):
        if step not in ref or step not in run:
            print(f"{a.name}: step {step} missing ({la} has {len(ref)}, {lb} has {len(run)} steps)")
            return 1
        if step <= a.skip_first:
            continue
        rel = relative(run[step], ref[step])
        if rel > worst or worst_step == 0:
            worst, worst_step = rel, step
        if not rel <= a.tol:
            bad.append(step)
    final = relative(run[a.steps], ref[a.steps])
    final_ok = final <= final_tol
    checked = f"steps {a.skip_first + 1}-{a.steps}" if a.skip_first else f"{a.steps} steps"
    final_text = (f"; final {final:.2e} (tolerance {final_tol:g})"
                  if a.final_tol is not None else "")
    verdict = "PASS" if not bad and final_ok else "FAIL"
    if bad:
        verdict += " at steps " + str(bad[:10])
    elif not final_ok:
        verdict += " at the final step"
    print(f"{a.name}: {a.steps} steps, loss step 1 {la} {fmt(ref[1])} {lb} {fmt(run[1])}, "
          f"step {a.steps} {la} {fmt(ref[a.steps])} {lb} {fmt(run[a.steps])}; "
          f"worst relative difference over {checked} {worst:.2e} at step {worst_step} "
          f"(tolerance {a.tol:g}){final_text}: {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
