#!/usr/bin/python3
"""The zoo: modules written in the style of widely used model code
(tests/torch_import/zoo/: nanoGPT, HuggingFace LLaMA and Qwen2, Meta's
LLaMA, timm's ViT and a ViT on nn.MultiheadAttention, torchvision's ResNet
and MobileNetV2, a diffusion UNet), each imported with tcc.from_torch,
compiled for the CPU and trained N steps (default 20) by trun from the
module's own weights (tcc.export_torch_weights, trun --init-from), against
the same N steps of the same torch.optim recipe in PyTorch on the CPU.

Every step trains on the same batch: trun is given exactly the batch's
rows as named arrays (trun --data NAME=FILE.npy,...), so each of its steps
sees those rows in a shuffled order, which changes only summation orders
(losses are means over rows, batch norm's statistics and the weight
gradients are sums over rows), as parity_test.py's MLP does.

Tolerance: parity_test.py's (tests/numerics/rounding_envelope.py). The
reference is PyTorch in float64; PyTorch in float32 runs too, with the rows
in the given order and in three other orders, and e(s), the running maximum
of those float32 runs' distance from float64 up to step s, is how much this
model and recipe amplify rounding. tcc's loss at step s must be within
10 e(s) + 1.9e-6 of float64's (relative). A fixed tolerance such as 1e-4
would hold on this CPU and fail on another, or be too loose for a
well-conditioned model; the envelope is measured per model, per run. The
table's number is the largest relative difference of tcc's loss from
PyTorch float32's (rows in the given order) over the steps, with the
fraction of the envelope's limit used.

Each Case has an explicit expectation ("imports" or "refused" with a part
of the message): a module expected to import that is refused, a refusal
that no longer happens (or says something else), a failure of tcc compile
or trun, and losses outside the limit all fail the test; an expected
refusal is a passing row whose result is its one-line message. The table
(markdown) is printed and written to WORK_DIR/zoo_table.md.

usage: zoo_test.py --bin-dir BUILD/bin [--work-dir DIR] [--steps N]
                   [--only NAME[,NAME...]]
"""

import argparse
import copy
import importlib
import os
import sys
import tempfile
import time

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "numerics"))
import harness as H  # noqa: E402
import rounding_envelope as R  # noqa: E402
import tcc  # noqa: E402
from parity_test import torch_runs  # noqa: E402

FAMILIES = ["nanogpt", "hf_llama", "qwen2", "meta_llama", "vit", "resnet", "mobilenet",
            "unet"]


def first_line(e):
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def short(message):
    """A refusal for the table: without the list of what is supported."""
    return message.split(" — supported:")[0].replace("|", "\\|")


def save_arrays(work, names, tensors):
    """The batch as named .npy arrays for trun: f32 floats, i32 integers."""
    data = []
    for name, t in zip(names, tensors):
        a = t.detach().numpy()
        a = a.astype(np.float32 if a.dtype.kind == "f" else np.int32)
        path = os.path.join(work, f"{name}.npy")
        np.save(path, np.ascontiguousarray(a))
        data.append(f"{name}={path}")
    return ",".join(data)


def run_case(args, case):
    """One row: {name, imports, message, maxrel, ratio, failures}; an
    exception this test does not expect (PyTorch's own runs, say) is a
    failed row, and the other rows still run."""
    row = dict(name=case.name, imports=None, message="", maxrel=None, ratio=None,
               failures=[])
    try:
        return check_case(args, case, row)
    except Exception as e:  # noqa: BLE001 - reported as the row's failure
        row["message"] = row["message"] or f"error {type(e).__name__}: {first_line(e)}"
        row["failures"].append(f"{case.name}: {type(e).__name__}: {first_line(e)}")
        return row


def check_case(args, case, row):
    work = os.path.join(args.work_dir, case.name)
    os.makedirs(work, exist_ok=True)
    start = copy.deepcopy(case.module)
    try:
        model = tcc.from_torch(case.module, case.inputs, loss=case.loss, target=case.target,
                               optimizer=case.optimizer(case.module))
        row["imports"] = True
    except tcc.TccError as e:
        row["imports"], row["message"] = False, first_line(e)
        if not row["message"].startswith("tcc.from_torch:"):
            # not one of from_torch's refusals: an error of the importer
            row["message"] = f"error {type(e).__name__}: {row['message']}"
            row["failures"].append(f"{case.name}: tcc.from_torch raised "
                                   f"{type(e).__name__}: {first_line(e)}")
            return row
    except Exception as e:  # a failure inside the importer, not a refusal
        row["imports"] = False
        row["message"] = f"error {type(e).__name__}: {first_line(e)}"
        row["failures"].append(f"{case.name}: tcc.from_torch raised "
                               f"{type(e).__name__}: {first_line(e)}")
        return row
    if not row["imports"]:
        if case.expect == "imports":
            row["failures"].append(f"{case.name}: expected to import, refused: "
                                   f"{short(row['message'])}")
        elif case.refusal not in row["message"]:
            row["failures"].append(f"{case.name}: refused as expected but the message "
                                   f"does not say {case.refusal!r}: {short(row['message'])}")
        return row
    if case.expect == "refused":
        row["failures"].append(f"{case.name}: expected a refusal ({case.refusal!r}), "
                               "but it imports: set the expectation to imports")
    try:
        path, step = os.path.join(work, "model.pb"), os.path.join(work, "step.so")
        model.save(path)
        H.compile_step(args.bin_dir, path, step)
        init = tcc.export_torch_weights(start, os.path.join(work, "init.safetensors"))
        names = [i.name for i in model.proto().inputs]
        tensors = list(case.inputs) + ([case.target] if case.target is not None else [])
        if len(names) != len(tensors):
            raise H.Failure(f"the step's inputs {names} are not the forward's "
                            f"{len(case.inputs)} inputs and the target")
        metrics = os.path.join(work, "metrics.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        H.run([os.path.join(args.bin_dir, "trun"), step,
               "--data", save_arrays(work, names, tensors), "--steps", args.steps,
               "--init-from", init, "--metrics", metrics, "--log-every", 0])
        got = H.read_metrics_losses(metrics, args.steps)
    except (H.Failure, tcc.TccError, OSError) as e:
        msg = str(e).strip().splitlines()
        row["message"] = "step failed: " + (msg[-1] if msg else "?")
        row["failures"].append(f"{case.name}: " + "\n".join(msg[-20:]))
        return row
    batches = [(case.inputs, case.target)] * args.steps
    runs, exact = torch_runs(start, case.optimizer, batches, case.torch_loss, case.inputs)
    ref32, ref64 = runs[0]["losses"], exact["losses"]
    row["maxrel"] = max(H.relative(a, b) for a, b in zip(got, ref32))
    e = R.envelope(ref64, [r["losses"] for r in runs])
    row["ratio"] = max(H.relative(a, b) / (R.K * es + R.FLOOR)
                       for a, b, es in zip(got, ref64, e))
    row["loss"] = (ref64[0], ref64[-1], got[-1])
    for s in range(args.steps):
        print(f"  {case.name} step {s + 1:3d}  tcc {got[s]:.7f}  torch32 {ref32[s]:.7f}  "
              f"float64 {ref64[s]:.7f}  limit {R.K * e[s] + R.FLOOR:.1e}")
    row["failures"] += R.check_losses(case.name, got, ref64, [r["losses"] for r in runs],
                                      ref32=ref32, verbose=False)
    if not ref64[-1] < ref64[0]:
        row["failures"].append(f"{case.name}: the loss did not fall")
    return row


def table(rows, cases, steps):
    out = [f"| module | imports | max rel. loss diff vs torch fp32 ({steps} steps) "
           "| of the limit | expected | result |",
           "|---|---|---|---|---|---|"]
    for row in rows:
        case = cases[row["name"]]
        if row["imports"]:
            imports = "yes"
        elif row["message"].startswith("error "):
            imports = "no, " + short(row["message"])
        else:
            imports = "refused: " + short(row["message"])
        if row["message"] and row["imports"]:
            imports += " — " + row["message"]
        diff = f"{row['maxrel']:.1e}" if row["maxrel"] is not None else "—"
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "—"
        expect = "refused" if case.expect == "refused" else "imports"
        result = "fail" if row["failures"] else "pass"
        out.append(f"| {row['name']} | {imports} | {diff} | {ratio} | {expect} | {result} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--only", help="comma-separated row or family names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    only = set(args.only.split(",")) if args.only else None
    with tempfile.TemporaryDirectory(prefix="tcc-zoo-") as tmp:
        args.work_dir = args.work_dir or tmp
        os.makedirs(args.work_dir, exist_ok=True)
        cases, rows = {}, []
        for family in FAMILIES:
            if only and family not in only and not any(o.startswith(family) for o in only):
                continue
            for case in importlib.import_module(f"zoo.{family}").make():
                if only and case.name not in only and family not in only:
                    continue
                cases[case.name] = case
                t0 = time.time()
                print(f"== {case.name}: {case.what}", flush=True)
                row = run_case(args, case)
                rows.append(row)
                print(f"== {case.name}: {'FAIL' if row['failures'] else 'pass'} "
                      f"({time.time() - t0:.1f} s)", flush=True)
        text = table(rows, cases, args.steps)
        with open(os.path.join(args.work_dir, "zoo_table.md"), "w") as f:
            f.write(text)
    failures = [f for row in rows for f in row["failures"]]
    print()
    print(text)
    for row in rows:
        if not row["imports"] and row["message"]:
            print(f"{row['name']}: {short(row['message'])}")
    for f in failures:
        print("FAIL:", f)
    if not rows:
        print("FAIL: no zoo module matched --only")
        return 1
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
