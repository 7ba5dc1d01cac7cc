#!/usr/bin/python3
"""LoRA on an imported torch.nn.Module: tcc.from_torch(..., lora=
tcc.lora.LoRA(rank, alpha, targets)) puts adapters on the matching
nn.Linear calls, as tcc.lora.apply does on tcc.nn layers.

Checked: the adapter parameters (PEFT's names and PyTorch layouts), the
base frozen, tcc.lora.adapters() finding each with scale alpha / r; one
CPU step (--emit-gradients) from the weights of a PyTorch module with the
same adapters written out (A and B nonzero, so the adapter term counts):
the loss and both adapters' gradients against PyTorch's in float64
(harness limits), no gradient for the frozen base; then the refusals (a
target matching no Linear, tcc.lora.apply given a torch module).

usage: lora_import_test.py --bin-dir BUILD/bin [--work-dir DIR]
"""

import argparse
import copy
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import harness as H  # noqa: E402
import tcc  # noqa: E402
import tcc.lora  # noqa: E402

RANK, ALPHA = 4, 8.0


class Block(nn.Module):
    def __init__(self, dim=16, classes=5):
        super().__init__()
        self.q_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.out = nn.Linear(dim, classes)

    def forward(self, x):                      # x (B, T, dim)
        h = F.gelu(self.q_proj(x)) + self.v_proj(x)
        return self.out(h.mean(1))


class TorchLoRA(nn.Module):
    """A Linear with a PEFT-style adapter: weight, bias, lora_A.weight (r,
    in), lora_B.weight (out, r); y = x W^T + b + (alpha / r) x A^T B^T."""

    def __init__(self, base):
        super().__init__()
        self.weight, self.bias = base.weight, base.bias
        self.lora_A = nn.Linear(base.in_features, RANK, bias=False)
        self.lora_B = nn.Linear(RANK, base.out_features, bias=False)
        nn.init.normal_(self.lora_B.weight, std=0.2)   # nonzero: the term counts

    def forward(self, x):
        return F.linear(x, self.weight, self.bias) + \
            (ALPHA / RANK) * self.lora_B(self.lora_A(x))


def with_adapters(module):
    m = copy.deepcopy(module)
    m.q_proj, m.v_proj = TorchLoRA(m.q_proj), TorchLoRA(m.v_proj)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    args = ap.parse_args()
    torch.set_num_threads(1)
    failures = []
    with tempfile.TemporaryDirectory(prefix="tcc-lora-import-") as tmp:
        work = args.work_dir or tmp
        os.makedirs(work, exist_ok=True)
        H.seed_all(11)
        module = Block()
        adapted = with_adapters(module)
        x, y = torch.randn(3, 4, 16), torch.randint(0, 5, (3,))
        model = tcc.from_torch(module, (x,), loss=F.cross_entropy, target=y,
                               optimizer=torch.optim.AdamW(module.parameters(), lr=1e-3),
                               lora=tcc.lora.LoRA(RANK, ALPHA, ["q_proj", "v_proj"]))
        proto = model.proto()
        params = {p.name: p for p in proto.params}
        expected = {"q_proj.lora_A.weight": [16, RANK], "q_proj.lora_B.weight": [RANK, 16],
                    "v_proj.lora_A.weight": [16, RANK], "v_proj.lora_B.weight": [RANK, 16]}
        for name, shape in expected.items():
            if name not in params:
                failures.append(f"no adapter parameter {name}")
            elif list(params[name].shape.dims) != shape or list(params[name].torch.perm) != [1, 0]:
                failures.append(f"{name}: shape {list(params[name].shape.dims)}, torch perm "
                                f"{list(params[name].torch.perm)}")
            elif params[name].frozen:
                failures.append(f"{name} is frozen")
        base = [n for n, p in params.items() if n not in expected and not p.frozen]
        if base:
            failures.append(f"base parameters left trainable: {base}")
        found = tcc.lora.adapters(model)
        if sorted(found) != ["q_proj", "v_proj"] or \
                any(abs(a["scale"] - ALPHA / RANK) > 0 for a in found.values()):
            failures.append(f"tcc.lora.adapters: {found}")
        # One step from the adapted PyTorch module's weights.
        path, step = os.path.join(work, "lora.pb"), os.path.join(work, "lora.so")
        model.save(path)
        H.compile_step(args.bin_dir, path, step, "--emit-gradients")
        outs = H.step_outputs(args.bin_dir, step, work, {"x": x.numpy(), "labels": y.numpy()},
                              adapted)
        ref = H.reference_step(adapted, lambda m, x, y: F.cross_entropy(m(x), y), (x, y))
        loss = float(outs["loss"])
        d = H.relative(loss, ref["loss"])
        print(f"loss tcc {loss:.8f} float64 {ref['loss']:.8f} relative {d:.2e}")
        if not d <= H.R.step_limit(H.STEP_LOSS_FLOOR, H.relative(ref["loss32"], ref["loss"])):
            failures.append(f"loss differs from PyTorch's by {d:.2e}")
        for name in expected:
            g = H.to_torch_layout(proto, name, outs[f"grad:{name}"]).astype(np.float64)
            exact, g32 = ref["grads"][name], ref["grads32"][name]
            d = H.R.relative(g, exact)
            limit = H.R.step_limit(H.STEP_GRAD_FLOOR, H.R.relative(g32, exact))
            print(f"  grad {name:22s} relative {d:.2e} (limit {limit:.1e})")
            if not d <= limit:
                failures.append(f"gradient of {name} differs by {d:.2e}, limit {limit:.1e}")
        frozen_grads = [k for k in outs if k.startswith("grad:") and k[5:] not in expected]
        if frozen_grads:
            failures.append(f"gradients of frozen parameters: {frozen_grads}")
        failures += H.expect_tcc_errors([
            (lambda: tcc.from_torch(module, (x,), loss=F.cross_entropy, target=y,
                                    optimizer=tcc.SGD(lr=0.1),
                                    lora=tcc.lora.LoRA(RANK, ALPHA, ["k_proj"])),
             "LoRA target 'k_proj' matches no nn.Linear the forward calls (nn.Linear "
             "layers: q_proj, v_proj, out)"),
            (lambda: tcc.lora.apply(module, ["q_proj"]),
             "tcc.lora.apply takes a tcc.nn module, got"),
        ])
    return H.report(failures)


if __name__ == "__main__":
    sys.exit(main())
