#!/usr/bin/env python3
"""Compares the per-step training losses of two trun --metrics files (a CPU
run and a GPU run of the same model, seed and data) and fails if any of the
first STEPS differs by more than TOL relative.

    compare_losses.py NAME CPU.jsonl GPU.jsonl [--steps 100] [--tol 1e-4]
                      [--labels cpu,gpu]   (what to call the two runs)
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("cpu")
    p.add_argument("gpu")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--labels", default="cpu,gpu")
    a = p.parse_args()
    la, lb = a.labels.split(",")
    cpu, gpu = losses(a.cpu), losses(a.gpu)
    worst, worst_step, bad = 0.0, 0, []
    for step in range(1, a.steps + 1):
        if step not in cpu or step not in gpu:
            print(f"{a.name}: step {step} missing ({la} has {len(cpu)}, {lb} has {len(gpu)} steps)")
            return 1
        rel = abs(gpu[step] - cpu[step]) / max(abs(cpu[step]), 1e-30)
        if rel > worst:
            worst, worst_step = rel, step
        if rel > a.tol:
            bad.append(step)
    print(f"{a.name}: {a.steps} steps, loss step 1 {la} {cpu[1]:.6f} {lb} {gpu[1]:.6f}, "
          f"step {a.steps} {la} {cpu[a.steps]:.6f} {lb} {gpu[a.steps]:.6f}; "
          f"worst relative difference {worst:.2e} at step {worst_step} "
          f"(tolerance {a.tol:g}): {'PASS' if not bad else 'FAIL at steps ' + str(bad[:10])}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
