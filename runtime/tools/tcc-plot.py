#!/usr/bin/python3
"""tcc-plot: the loss curve of a trun --metrics file as a PNG.

  tcc-plot METRICS.jsonl [-o loss.png] [--title T] [--log-y]

Plots the train loss of every "step" record (thin) with a smoothed curve
over it, and the eval losses ("val_loss", "test_loss", ... of "eval"
records) as markers, against the step. A resumed run appends to the same
file, so a step may appear more than once: the last record of each (kind,
step) wins -- for evals, of each (split, step) -- and the curve continues
where the resumed run picked up. "run" resume events are drawn as dotted
vertical lines; "skip" records (steps rolled back by --on-nan skip) and
null losses are left out.

Exit status: 0 on success, 1 when the picture cannot be written, 2 on a
bad command line or input file (missing, a malformed line, no step records).

Needs Debian's python3-matplotlib (drawn with the Agg backend, no display).
"""

import argparse
import json
import math
import os
import sys

PROG = "tcc-plot"


class InputError(Exception):
    """A problem with the metrics file: reported in one line, exit 2."""


def is_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def read_metrics(path):
    """Returns (train, evals, resumes): train {step: loss}, evals
    {split: {step: (loss, accuracy or None)}}, resumes [step, ...]."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}")
    train, evals, resumes = {}, {}, []
    steps_seen = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{number}: malformed line: {e.msg} "
                             f"(column {e.colno})")
        if not isinstance(record, dict):
            raise InputError(f"{path}:{number}: malformed line: not a JSON "
                             f"object")
        kind = record.get("kind")
        step = record.get("step")
        if kind in ("step", "skip", "eval") and not (
                isinstance(step, int) and not isinstance(step, bool)):
            raise InputError(f"{path}:{number}: malformed line: a '{kind}' "
                             f"record without an integer \"step\"")
        if kind == "step":
            steps_seen += 1
            loss = record.get("loss")
            if is_number(loss):
                train[step] = loss
            else:
                train.pop(step, None)  # the last record wins, even a null
        elif kind == "eval":
            accuracy = record.get("accuracy")
            for key, loss in record.items():
                if not key.endswith("_loss"):
                    continue
                split = evals.setdefault(key[:-len("_loss")], {})
                if is_number(loss):
                    split[step] = (loss,
                                   accuracy if is_number(accuracy) else None)
                else:
                    split.pop(step, None)
        elif kind == "run" and record.get("event") == "resume":
            if is_number(step):
                resumes.append(step)
    if steps_seen == 0:
        raise InputError(f"{path}: no step records (is it a trun --metrics "
                         f"file?)")
    if not train:
        raise InputError(f"{path}: no step record has a finite loss")
    return train, evals, resumes


def smooth(values):
    """Exponential moving average, bias-corrected at the start; the span
    grows with the run (1/20 of its length, 2 to 100 steps)."""
    span = min(100, max(2, len(values) // 20))
    alpha = 2.0 / (span + 1)
    average, weight, out = 0.0, 0.0, []
    for v in values:
        average = (1 - alpha) * average + alpha * v
        weight = (1 - alpha) * weight + alpha
        out.append(average / weight)
    return out


def plot(path, train, evals, resumes, output, title, log_y):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=100)
    steps = sorted(train)
    losses = [train[s] for s in steps]
    if steps:
        ax.plot(steps, losses, linewidth=0.7, alpha=0.35, color="C0",
                label="train loss")
        if len(steps) >= 10:
            ax.plot(steps, smooth(losses), linewidth=2, color="C0",
                    label="train loss (smoothed)")
    markers = {"val": ("o", "C1"), "test": ("s", "C2")}
    for index, split in enumerate(sorted(evals)):
        points = evals[split]
        if not points:
            continue
        x = sorted(points)
        y = [points[s][0] for s in x]
        marker, color = markers.get(split, ("^", f"C{3 + index}"))
        label = f"{split} loss"
        accuracy = points[x[-1]][1]
        if accuracy is not None:
            label += f" (accuracy {accuracy:.4f} at step {x[-1]})"
        ax.plot(x, y, marker=marker, markersize=6, linewidth=1,
                linestyle="--", color=color, label=label)
    for i, step in enumerate(sorted(set(resumes))):
        ax.axvline(step, linestyle=":", linewidth=1, color="gray",
                   label="resumed" if i == 0 else None)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title if title is not None else os.path.basename(path))
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(output)
    except (OSError, ValueError) as e:
        message = e.strerror if isinstance(e, OSError) and e.strerror else e
        print(f"{PROG}: cannot write {output}: {message}", file=sys.stderr)
        return 1
    finally:
        plt.close(fig)
    print(f"{PROG}: wrote {output} ({len(steps)} steps, "
          f"{sum(len(p) for p in evals.values())} evals)")
    return 0


def main(argv):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Plot the loss curve of a trun --metrics JSON-lines file.")
    parser.add_argument("metrics", help="the JSON-lines file from trun --metrics")
    parser.add_argument("-o", "--output", default="loss.png",
                        help="the picture to write (default: loss.png; the "
                        "extension picks the format)")
    parser.add_argument("--title", help="the plot title (default: the file name)")
    parser.add_argument("--log-y", action="store_true",
                        help="logarithmic loss axis")
    args = parser.parse_args(argv)
    try:
        train, evals, resumes = read_metrics(args.metrics)
    except InputError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    return plot(args.metrics, train, evals, resumes, args.output, args.title,
                args.log_y)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
