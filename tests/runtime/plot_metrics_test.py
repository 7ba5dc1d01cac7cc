#!/usr/bin/env python3
"""tcc-plot end to end: a small trun-style metrics file (with a resumed run
appended) becomes a PNG; bad inputs fail with exit 2 and a one-line message.

  plot_metrics_test.py TCC_PLOT WORK_DIR
"""

import importlib.machinery
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True,
                          timeout=120)


def write_jsonl(path, records, raw_lines=()):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        for line in raw_lines:
            f.write(line + "\n")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def step(s, loss):
    return {"kind": "step", "step": s, "loss": loss, "lr": 1e-3,
            "step_ms": 10.0, "data_wait_ms": 0.1, "items_per_s": 1000.0,
            "unit": "tokens", "time_s": s * 0.01}


def main():
    tool, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # A run of 60 steps, checkpointed at 40, crashed at 50, resumed from 40:
    # steps 41..50 appear twice and the resumed run's values must win.
    first = [{"kind": "run", "event": "start", "step": 0, "time_s": 0}]
    first += [step(s, 3.0 / (1 + 0.05 * s)) for s in range(1, 51)]
    first += [{"kind": "eval", "step": 25, "val_loss": 2.0, "batches": 4,
               "time_s": 1}]
    second = [{"kind": "run", "event": "resume", "step": 40, "time_s": 0}]
    second += [step(s, 100.0 + s) for s in range(41, 61)]
    second += [{"kind": "skip", "step": 61, "loss": None, "time_s": 2}]
    second += [{"kind": "eval", "step": 50, "val_loss": 1.5, "batches": 4,
                "time_s": 2},
               {"kind": "eval", "step": 60, "val_loss": 1.25, "batches": 4,
                "time_s": 3},
               {"kind": "eval", "step": 60, "test_loss": 1.4,
                "accuracy": 0.75, "batches": 4, "time_s": 3}]
    metrics = os.path.join(work, "metrics.jsonl")
    write_jsonl(metrics, first + second)

    # Last record per (kind, step) wins; evals per split.
    loader = importlib.machinery.SourceFileLoader("tcc_plot", tool)
    spec = importlib.util.spec_from_loader("tcc_plot", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    train, evals, resumes = module.read_metrics(metrics)
    check(sorted(train) == list(range(1, 61)), f"train steps {sorted(train)}")
    check(train[40] == 3.0 / (1 + 0.05 * 40), f"step 40 {train[40]}")
    check(all(train[s] == 100.0 + s for s in range(41, 61)),
          "the resumed run's steps 41..60 win")
    check(evals == {"val": {25: (2.0, None), 50: (1.5, None),
                            60: (1.25, None)},
                    "test": {60: (1.4, 0.75)}}, f"evals {evals}")
    check(resumes == [40], f"resumes {resumes}")

    out = os.path.join(work, "loss.png")
    r = run(tool, metrics, "-o", out, "--title", "test run", "--log-y")
    check(r.returncode == 0, f"plot exit {r.returncode}: {r.stderr}")
    size = png_size(out) if os.path.exists(out) else None
    check(size is not None, "output is a PNG with an IHDR chunk")
    if size is not None:
        check(size[0] > 100 and size[1] > 100, f"PNG size {size}")
    check(f"wrote {out}" in r.stdout, f"stdout: {r.stdout!r}")

    # Default output name: loss.png in the current directory.
    r = subprocess.run([tool, metrics], cwd=work, capture_output=True,
                       text=True, timeout=120)
    check(r.returncode == 0, f"default output exit {r.returncode}")

    def expect_error(args, code, message, what):
        r = run(tool, *args)
        check(r.returncode == code,
              f"{what}: exit {r.returncode}, want {code} ({r.stderr!r})")
        lines = r.stderr.strip().splitlines()
        check(len(lines) == 1 and message in lines[0],
              f"{what}: stderr {r.stderr!r} lacks {message!r}")

    missing = os.path.join(work, "missing.jsonl")
    expect_error([missing], 2,
                 f"tcc-plot: cannot read {missing}: No such file or directory",
                 "missing file")
    bad = os.path.join(work, "bad.jsonl")
    write_jsonl(bad, [step(1, 2.0), step(2, 1.9)], ['{"kind":"step","st'])
    expect_error([bad, "-o", os.path.join(work, "bad.png")], 2,
                 f"tcc-plot: {bad}:3: malformed line", "malformed line")
    not_object = os.path.join(work, "list.jsonl")
    write_jsonl(not_object, [step(1, 2.0), [1, 2]])
    expect_error([not_object], 2, f"{not_object}:2: malformed line: not a "
                 "JSON object", "non-object line")
    no_steps = os.path.join(work, "nosteps.jsonl")
    write_jsonl(no_steps, [{"kind": "run", "event": "start", "step": 0},
                           {"kind": "eval", "step": 0, "val_loss": 1.0}])
    expect_error([no_steps], 2, f"tcc-plot: {no_steps}: no step records",
                 "no step records")
    empty = os.path.join(work, "empty.jsonl")
    write_jsonl(empty, [])
    expect_error([empty], 2, "no step records", "empty file")
    unwritable = os.path.join(work, "no", "such", "dir", "x.png")
    expect_error([metrics, "-o", unwritable], 1,
                 f"tcc-plot: cannot write {unwritable}", "unwritable output")

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("tcc-plot: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
