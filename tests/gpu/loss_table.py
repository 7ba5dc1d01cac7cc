#!/usr/bin/env python3
"""Prints the loss curves of several trun --metrics files side by side, at
step 1 and every EVERY steps, with each run's difference from the first
run in percent: the numbers behind an AMP check, in the run's output.

    loss_table.py TITLE LABEL=metrics.jsonl [LABEL=metrics.jsonl ...]
                  [--every 20] [--divide-by W]   (e.g. a loss weight)
"""
import argparse
import json


def losses(path, divide_by):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                if rec.get("kind") in ("step", "skip"):
                    loss = rec.get("loss")
                    out[rec["step"]] = None if loss is None else loss / divide_by
    except OSError:
        pass
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("title")
    p.add_argument("runs", nargs="+", metavar="LABEL=FILE")
    p.add_argument("--every", type=int, default=20)
    p.add_argument("--divide-by", type=float, default=1.0)
    a = p.parse_args()
    runs = [(spec.split("=", 1)[0], losses(spec.split("=", 1)[1], a.divide_by))
            for spec in a.runs]
    last = max((max(r) for _, r in runs if r), default=0)
    steps = sorted({1, last} | set(range(a.every, last + 1, a.every)))
    print(f"{a.title} (difference from {runs[0][0]}):")
    print("  step " + "".join(f"{label:>22s}" for label, _ in runs))
    for s in steps:
        ref = runs[0][1].get(s)
        cells = []
        for i, (_, r) in enumerate(runs):
            x = r.get(s)
            if x is None:
                cells.append(f"{'-':>22s}")
            elif i == 0 or not ref:
                cells.append(f"{x:>22.4f}")
            else:
                cells.append(f"{x:>12.4f} ({(x - ref) / ref * 100:+6.2f}%)")
        print(f"  {s:4d} " + "".join(cells))


if __name__ == "__main__":
    main()
