"""Shared pieces of the tests of tcc.from_torch / tcc import: running the
tools, weights in either layout, trun's outputs and metrics."""

import json
import os
import subprocess

import numpy as np
import torch
import torch.nn.functional as F

import tcc
from tcc import safetensors


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


def torch_loss_and_grads(module, loss_fn, inputs, target):
    module.zero_grad()
    out = module(*inputs)
    loss = loss_fn(out, target) if loss_fn is not None else out
    loss.backward()
    grads = {n: p.grad.detach().numpy().copy() if p.grad is not None
             else np.zeros(tuple(p.shape), np.float32)
             for n, p in module.named_parameters()}
    return float(loss), grads


def compare_grads(label, model_proto, tcc_outs, torch_grads, rtol):
    """Norm-wise relative difference of every gradient; returns failures."""
    failures = []
    for p in model_proto.params:
        key = "grad:" + p.name
        if key not in tcc_outs:
            failures.append(f"{label}: no {key} in the train outputs")
            continue
        g = to_torch_layout(model_proto, p.name, tcc_outs[key]).astype(np.float64)
        ref = torch_grads[p.torch.name or p.name].astype(np.float64)
        if g.shape != ref.shape:
            failures.append(f"{label}: {key} shape {g.shape}, torch {ref.shape}")
            continue
        r = np.linalg.norm(g - ref) / max(np.linalg.norm(ref), 1e-30)
        print(f"  {label} grad {p.name:24s} relative {r:.2e}")
        if not r <= rtol:
            failures.append(f"{label}: gradient of {p.name} differs by {r:.2e}")
    return failures


def cross_entropy(out, target):
    if out.dim() == 3:
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return F.cross_entropy(out, target)


def seed_all(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
