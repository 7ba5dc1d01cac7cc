#!/usr/bin/python3
"""Batch norm on the GPU (tests/gpu/batch_norm_prepare.sh, batch_norm_run.sh).

  batch_norm_compare.py --prepare DIR   writes the MLP with BatchNorm1d
                                        (DIR/work/mlp_bn.pb), its data and weights
  batch_norm_compare.py DIR FILES       compares what batch_norm_run.sh wrote
                                        (FILES: the device tool's files_at)

The cuda steps' 50 losses and saved state (weights, running statistics,
counters) against the same 50 steps in PyTorch on the CPU, fp32 and float64
(fp32 training drifts from float64 by ~1e-4 over 50 steps of this CNN: the
fp32 comparison is the tight one), and against trun's CPU run of the parity
test. Limits: fp32 cuda vs PyTorch fp32 losses 1e-5 relative, state 1e-4;
bf16 vs float64 losses 2e-2 (reported, not a parity claim).
"""

import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "torch_import"))
import batch_norm_parity_test as P  # noqa: E402
import tcc  # noqa: E402
from tcc import safetensors  # noqa: E402


def mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64),
                         nn.BatchNorm1d(64, momentum=0.3), nn.ReLU(), nn.Linear(64, 10))


def mlp_data():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(128, 32, generator=g) * 2 + 1
    y = (x @ torch.randn(32, 10, generator=g)).argmax(1)
    y[:32] = torch.randint(0, 10, (32,), generator=g)
    return x, y


def prepare(d):
    torch.manual_seed(1)
    m = mlp()
    x, y = mlp_data()
    opt = torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9)
    tcc.from_torch(m, (x,), loss=nn.CrossEntropyLoss(), target=y,
                   optimizer=opt).save(f"{d}/work/mlp_bn.pb")
    tcc.export_torch_weights(m, f"{d}/data/mlp_init.safetensors")
    np.save(f"{d}/data/mx.npy", x.numpy().astype(np.float32))
    np.save(f"{d}/data/my.npy", y.numpy().astype(np.int64))


def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if r.get("kind") == "step"]


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def torch_run(module, x, y, lr, steps=50):
    opt = torch.optim.SGD(module.parameters(), lr=lr, momentum=0.9)
    module.train()
    out = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(module(x), y)
        loss.backward()
        opt.step()
        out.append(float(loss))
    return out


def worst_loss(a, b):
    return max(abs(p - q) / abs(q) for p, q in zip(a, b))


def state_diff(saved, state, which):
    keys = [k for k in state if which(k)]
    return max(rel(saved[k], state[k].numpy()) for k in keys)


def compare(d, files):
    failures = []
    init = safetensors.load_file(f"{d}/data/cnn_init.safetensors")
    x = torch.from_numpy(np.load(f"{d}/data/cx.npy"))
    y = torch.from_numpy(np.load(f"{d}/data/cy.npy"))
    refs = {}
    for dtype in (torch.float32, torch.float64):
        m = P.cnn().to(dtype)
        m.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in init.items()})
        refs[dtype] = (torch_run(m, x.to(dtype), y, P.LR), m.state_dict())
    cpu = safetensors.load_file(f"{d}/work/trained.safetensors")
    stats = lambda k: "running" in k  # noqa: E731
    params = lambda k: "running" not in k and "num_batches" not in k  # noqa: E731
    for name in ("cnn_fp32", "cnn_bf16"):
        got = losses(f"{files}/{name}.jsonl")
        saved = safetensors.load_file(f"{files}/{name}.safetensors")
        l32, s32 = refs[torch.float32]
        l64, s64 = refs[torch.float64]
        counters = {int(saved[k]) for k in s32 if "num_batches" in k}
        expected = {int(v) for k, v in s32.items() if "num_batches" in k}
        print(f"{name}: losses vs PyTorch fp32 {worst_loss(got, l32):.2e}, vs float64 "
              f"{worst_loss(got, l64):.2e}; running statistics vs fp32 "
              f"{state_diff(saved, s32, stats):.2e}, vs float64 {state_diff(saved, s64, stats):.2e}; "
              f"parameters vs fp32 {state_diff(saved, s32, params):.2e}; vs trun cpu "
              f"{max(rel(saved[k], cpu[k]) for k in cpu if 'num_batches' not in k):.2e}; "
              f"counters {sorted(counters)} (PyTorch {sorted(expected)})")
        if counters != expected:
            failures.append(f"{name}: counters {counters}, PyTorch {expected}")
        if name == "cnn_fp32" and not (worst_loss(got, l32) <= 1e-5 and
                                       state_diff(saved, s32, stats) <= 1e-4 and
                                       state_diff(saved, s32, params) <= 1e-4):
            failures.append(f"{name}: differs from PyTorch fp32 beyond 1e-5 / 1e-4")
        if name == "cnn_bf16" and not worst_loss(got, l64) <= 2e-2:
            failures.append(f"{name}: losses differ from float64 by more than 2e-2")
    torch.manual_seed(1)
    m = mlp()
    w = safetensors.load_file(f"{d}/data/mlp_init.safetensors")
    m.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in w.items()})
    mx, my = mlp_data()
    ref = torch_run(m, mx, my, 0.02)
    got = losses(f"{files}/mlp_fp32.jsonl")
    print(f"mlp_fp32 (BatchNorm1d on (N, C)): losses vs PyTorch fp32 {worst_loss(got, ref):.2e}")
    if not worst_loss(got, ref) <= 1e-5:
        failures.append("mlp_fp32: losses differ from PyTorch fp32 beyond 1e-5")
    print("FAIL:\n  " + "\n  ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--prepare":
        prepare(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(compare(sys.argv[1], sys.argv[2]))
