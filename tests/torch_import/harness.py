"""Shared pieces of the tests of tcc.from_torch / tcc import: running the
tools, weights in either layout, trun's outputs and metrics."""

import copy
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

import tcc
from tcc import safetensors

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numerics"))
import rounding_envelope as R  # noqa: E402

# One step's loss and gradients: tcc against PyTorch in float64, within
# max(floor, K x PyTorch float32's own distance from float64). The floors
# (~100 and ~1000 float32 ulps) hold for well-conditioned sums on any CPU;
# where a gradient is a sum that nearly cancels, float32 itself is off by
# more, measured here, and the limit widens with it instead of failing on
# some CPUs (issue 32).
STEP_LOSS_FLOOR, STEP_GRAD_FLOOR = 1e-5, 1e-4


class Failure(Exception):
    pass


def run(cmd, check=True, env=None):
    cmd = [str(c) for c in cmd]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env)
    if check and r.returncode != 0:
        raise Failure(f"exit status {r.returncode}: {' '.join(cmd)}\n{r.stdout}")
    return r


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def to_torch_layout(model_proto, name, array):
    """A tcc parameter (or its gradient) in PyTorch's layout."""
    for p in model_proto.params:
        if p.name == name:
            if len(p.torch.perm):
                return np.transpose(array, list(p.torch.perm))
            return array
    raise Failure(f"no parameter {name}")


def read_metrics_losses(path, steps):
    losses = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "step":
                losses[rec["step"]] = rec["loss"]
    missing = [s for s in range(1, steps + 1) if s not in losses]
    if missing:
        raise Failure(f"{path}: no loss for steps {missing[:5]}")
    return [losses[s] for s in range(1, steps + 1)]


def compile_step(bin_dir, model_path, out, *extra):
    run([os.path.join(bin_dir, "tcc"), "compile", "--target", "cpu", model_path,
         "-o", out, *extra])


def step_outputs(bin_dir, step, work, arrays, module):
    """One trun step on named arrays ({input name: array}) whose rows are
    all one batch, from the module's weights (tcc.export_torch_weights:
    PyTorch names and layouts, read by trun --init-from): the train outputs
    (loss, and grad:<param> for a step compiled with --emit-gradients)."""
    data = []
    for name, a in arrays.items():
        path = os.path.join(work, f"{name}.npy")
        a = np.asarray(a)
        np.save(path, np.ascontiguousarray(a, dtype=np.float32 if a.dtype.kind == "f"
                                           else np.int32))
        data.append(f"{name}={path}")
    w = tcc.export_torch_weights(module, os.path.join(work, "w.safetensors"))
    outs = os.path.join(work, "outs.safetensors")
    run([os.path.join(bin_dir, "trun"), step, "--data", ",".join(data),
         "--steps", 1, "--init-from", w, "--save-train-outputs", outs])
    return safetensors.load_file(outs)


def reference_step(module, loss_of, inputs):
    """PyTorch's loss and gradients of one step of `module` on `inputs`
    (loss_of(module, *inputs) -> loss), in float64 and in float32:
    {"loss", "grads", "loss32", "grads32"} (gradients float64 numpy by
    parameter name). The module itself is not changed."""
    out = {}
    for dtype, suffix in ((torch.float64, ""), (torch.float32, "32")):
        m = copy.deepcopy(module).to(dtype)
        m.zero_grad()
        args = [t.to(dtype) if torch.is_tensor(t) and t.is_floating_point() else t
                for t in inputs]
        loss = loss_of(m, *args)
        loss.backward()
        out["loss" + suffix] = float(loss)
        out["grads" + suffix] = {
            n: p.grad.detach().double().numpy().copy() if p.grad is not None
            else np.zeros(tuple(p.shape)) for n, p in m.named_parameters()}
    return out


def compare_step(label, model_proto, tcc_outs, ref, loss_floor=STEP_LOSS_FLOOR,
                 grad_floor=STEP_GRAD_FLOOR):
    """The loss and every gradient of a step compiled with --emit-gradients
    against reference_step's float64 values, each within max(floor, K x
    float32's distance from them). Returns failures."""
    failures = []
    loss = float(tcc_outs["loss"])
    d, d32 = relative(loss, ref["loss"]), relative(ref["loss32"], ref["loss"])
    tol = R.step_limit(loss_floor, d32)
    print(f"{label}: loss tcc {loss:.8f} float64 {ref['loss']:.8f} relative {d:.2e} "
          f"(torch float32 {d32:.1e}, limit {tol:.1e})")
    if not d <= tol:
        failures.append(f"{label}: loss differs from float64 by {d:.2e}, limit {tol:.1e}")
    for p in model_proto.params:
        key = "grad:" + p.name
        if key not in tcc_outs:
            failures.append(f"{label}: no {key} in the train outputs")
            continue
        g = to_torch_layout(model_proto, p.name, tcc_outs[key]).astype(np.float64)
        name = p.torch.name or p.name
        exact, g32 = ref["grads"][name], ref["grads32"][name]
        if g.shape != exact.shape:
            failures.append(f"{label}: {key} shape {g.shape}, torch {exact.shape}")
            continue
        d, d32 = R.relative(g, exact), R.relative(g32, exact)
        tol = R.step_limit(grad_floor, d32)
        print(f"  {label} grad {p.name:24s} relative {d:.2e} (torch float32 {d32:.1e}, "
              f"limit {tol:.1e})")
        if not d <= tol:
            failures.append(f"{label}: gradient of {p.name} differs from float64 by "
                            f"{d:.2e}, limit {tol:.1e}")
    return failures


def check_step(bin_dir, name, model, module, inputs, ref, work, tolerance):
    """One CPU step of `model` (a tcc.Model) compiled with --emit-gradients,
    run by trun on `inputs` (torch tensors, in the model's input order) from
    `module`'s weights, against reference_step's `ref`: its parameters must
    be torch's, then compare_step. Returns failures."""
    proto = model.proto()
    if sorted(p.name for p in proto.params) != sorted(ref["grads"]):
        return [f"{name}: parameters {sorted(p.name for p in proto.params)} vs torch "
                f"{sorted(ref['grads'])}"]
    path, step = os.path.join(work, "model.pb"), os.path.join(work, "step.so")
    model.save(path)
    compile_step(bin_dir, path, step, "--emit-gradients")
    names = [i.name for i in proto.inputs]
    outs = step_outputs(bin_dir, step, work,
                        dict(zip(names, (t.numpy() for t in inputs))), module)
    return compare_step(name, proto, outs, ref, tolerance, tolerance)


def expect_tcc_errors(cases):
    """cases: (make, expected): make() must raise a TccError whose message
    contains `expected`. Returns failures."""
    failures = []
    for make, expected in cases:
        try:
            make()
            failures.append(f"no error for '{expected}'")
        except tcc.TccError as e:
            if expected not in str(e):
                failures.append(f"error '{e}' does not say '{expected}'")
    return failures


def cross_entropy(out, target):
    if out.dim() == 3:
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return F.cross_entropy(out, target)


def seed_all(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)


def report(failures):
    """Prints each failure and PASS or the count; the exit status."""
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0
