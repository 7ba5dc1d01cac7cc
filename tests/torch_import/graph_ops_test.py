#!/usr/bin/python3
"""Each op tcc.from_torch maps, checked end to end: small nn.Modules that
use it are imported, compiled by tcc (--target cpu --emit-gradients) and
run one step by trun on the same weights and batch as PyTorch; the loss and
every gradient (norm-wise) must be as close to PyTorch's in float64 as
max(1e-5 / 1e-4 relative, 10x PyTorch float32's own distance from it)
(harness.compare_step). The step is
fed named arrays (input (N, 12), labels (N) or float targets (N, 6)) whose
batch is the whole data set, so trun's shuffling only reorders rows of a
mean.

usage: graph_ops_test.py --bin-dir BUILD/bin --work-dir DIR [--case NAME]
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tcc  # noqa: E402

N, D, C = 8, 12, 6


class Activations(nn.Module):
    """Modules and functions of every activation, exp/log/sqrt/rsqrt."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 4 * C)
        self.acts = nn.ModuleList([nn.ReLU(), nn.GELU(), nn.GELU(approximate="tanh"),
                                   nn.SiLU(), nn.Tanh(), nn.Sigmoid()])
        self.out = nn.Linear(4 * C, C)

    def forward(self, x):
        h = self.fc(x)
        y = sum(a(h) for a in self.acts)
        y = y + F.relu(h) + F.gelu(h, approximate="tanh") + F.silu(h) + torch.tanh(h)
        y = y + torch.sigmoid(h) * torch.exp(-h * h) + torch.log(h * h + 1.0)
        y = y + torch.sqrt(h * h + 2.0) - torch.rsqrt(h * h + 0.5) + h.relu()
        return self.out(y)


class Arithmetic(nn.Module):
    """+ - * / neg pow, scalars on either side, torch.add/sub/mul/div."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(D, C)
        self.b = nn.Linear(D, C)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, C))

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        y = (a + b) * self.scale - a / (b * b + 1.0) + (-a)
        y = y + 1.0 - 2.0 * b + a ** 2 / 4 + torch.pow(b, 3) / 8 - 3 / (a * a + 2)
        return torch.sub(torch.add(y, a, alpha=0.5), torch.mul(b, 0.25)).div(1.5)


class Shapes(nn.Module):
    """view/reshape/flatten/transpose/permute/contiguous, split/chunk/cat,
    slicing, size(), unsqueeze/squeeze, .T, expand."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 24)
        self.out = nn.Linear(24 + 12, C)

    def forward(self, x):
        B = x.size(0)
        h = self.fc(x)                            # (B, 24)
        t = h.view(B, 2, 3, 4).permute(0, 3, 1, 2).contiguous()   # (B, 4, 2, 3)
        t = t.transpose(1, 3).reshape(B, -1)      # (B, 24)
        p, q = t.split(12, dim=1)
        r, s = torch.chunk(q, 2, dim=-1)          # (B, 6) each
        u = torch.cat([s, r], dim=1) * p[:, :12]  # (B, 12)
        v = h[:, 2:14].unsqueeze(1).squeeze(1) + u[..., :].flatten(1)
        w = (v.T * 0.5).T + v[:, None, :].expand(B, 3, 12).sum(1)
        return self.out(torch.cat((h, w), -1))


class Reductions(nn.Module):
    """softmax / log_softmax (module and function), mean and sum over dims
    with and without keepdim."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 3 * 4 * C)
        self.sm = nn.Softmax(dim=-1)

    def forward(self, x):
        h = self.fc(x).view(x.shape[0], 3, 4, C)
        y = self.sm(h).mean(dim=1) + F.log_softmax(h, dim=2).sum(1) / 10
        y = y - h.mean(-1, keepdim=True).mean(1) + torch.sum(h, dim=(1, 3)).unsqueeze(-1) / 50
        return y.mean(1) + h.softmax(1).sum(dim=[1, 2]) + torch.mean(h, 2)[:, 0, :]


class Products(nn.Module):
    """matmul / @ / bmm of activations, F.linear with and without bias, and
    a parameter used both as a Linear weight and directly (stored in
    PyTorch's layout)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 24)
        self.w = nn.Parameter(torch.randn(C, 24) * 0.2)
        self.proj = nn.Linear(24, C)
        self.proj2 = nn.Linear(24, C, bias=False)
        self.proj2.weight = self.w  # tied: also used by matmul below

    def forward(self, x):
        B = x.shape[0]
        h = self.fc(x)
        a, b = h.view(B, 4, 6), h.view(B, 6, 4)
        m = torch.bmm(a, b) @ a              # (B, 4, 6)
        m = torch.matmul(m, b).reshape(B, 16)
        y = F.linear(h, self.proj.weight, self.proj.bias) + self.proj2(h)
        return y + F.linear(m, self.w[:, :16]) / 10 + h @ self.w.t() / 5


class Norms(nn.Module):
    """nn.LayerNorm, F.layer_norm with and without affine, nn.Dropout(0),
    nn.Identity, nn.Flatten."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 2 * 16)
        self.ln = nn.LayerNorm(16)
        self.ln2 = nn.LayerNorm(16, elementwise_affine=False)
        self.g = nn.Parameter(torch.linspace(0.5, 2.0, 16))
        self.drop = nn.Dropout(0.0)
        self.flat = nn.Flatten()
        self.ident = nn.Identity()
        self.out = nn.Linear(2 * 16, C)

    def forward(self, x):
        h = self.fc(x).view(x.shape[0], 2, 16)
        # ln2 and the weight-only F.layer_norm both read h: their input
        # gradients are summed by one norm-gradient kernel (`plus`), which
        # once crashed tg-lower-to-kern.
        y = self.ln(h) + self.ln2(h) + F.layer_norm(h, (16,), self.g, None, 1e-3)
        return self.out(self.ident(self.flat(self.drop(y))))


class Masks(nn.Module):
    """masked_fill with a registered tril buffer (the causal pattern:
    causal_mask), with a strict triangle (not causal: select), torch.where
    with a condition computed from the data."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 4 * 4)
        self.register_buffer("tril", torch.tril(torch.ones(4, 4)))
        self.out = nn.Linear(16 * 3, C)

    def forward(self, x):
        B = x.shape[0]
        s = self.fc(x).view(B, 1, 4, 4)
        a = F.softmax(s.masked_fill(self.tril[:4, :4] == 0, float("-inf")), dim=-1)
        strict = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=-1)
        b = s.masked_fill(~strict, -3.0)
        c = torch.where(s > 0.1, s, s * 0.5)
        return self.out(torch.cat([a, b, c], dim=1).view(B, -1))


class OwnLoss(nn.Module):
    """A forward that returns the loss itself (input and label both given)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, C))

    def forward(self, x, label):
        logits = self.body(x)
        return logits, F.cross_entropy(logits, label)


class Misc(nn.Module):
    """maximum/minimum, casts that are no-ops, nn.LogSoftmax, dropout with
    training=False, type_as, comparisons."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 2 * C)
        self.lsm = nn.LogSoftmax(dim=1)

    def forward(self, x):
        h = self.fc(x).float()
        a, b = h.chunk(2, dim=1)
        y = torch.maximum(a, b) + torch.minimum(a * 2, b).to(torch.float32)
        y = F.dropout(y, 0.3, training=False) + self.lsm(a).type_as(b)
        return torch.where(a <= b, y, -y) + (a != b).float() * 0.0


class Regression(nn.Module):
    """A float target: trained with nn.MSELoss and with a traced loss."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(D, 16), nn.SiLU(), nn.Linear(16, C))

    def forward(self, x):
        return self.body(x)


def smooth_loss(out, target):
    """A loss fx traces (not one of the known ones)."""
    d = out - target
    return (d * d / (1.0 + d * d)).sum(-1).mean()


CASES = {"activations": Activations, "arithmetic": Arithmetic, "shapes": Shapes,
         "reductions": Reductions, "products": Products, "norms": Norms,
         "masks": Masks, "own_loss": OwnLoss, "misc": Misc, "mse": Regression,
         "traced_loss": Regression}
LOSSES = {"mse": nn.MSELoss(), "traced_loss": smooth_loss}


def check(name, args):
    H.seed_all(1)
    module = CASES[name]()
    x = torch.randn(N, D)
    y = torch.randn(N, C) if name in LOSSES else torch.randint(0, C, (N,))
    loss_fn = LOSSES.get(name, F.cross_entropy)
    work = os.path.join(args.work_dir, name)
    os.makedirs(work, exist_ok=True)
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    if name == "own_loss":
        model = tcc.from_torch(module, (x, y), optimizer=opt)
        ref = H.reference_step(module, lambda m, x, y: m(x, y)[1], (x, y))
    else:
        model = tcc.from_torch(module, (x,), loss=loss_fn, target=y, optimizer=opt)
        ref = H.reference_step(module, lambda m, x, y: loss_fn(m(x), y), (x, y))
    proto = model.proto()
    path = os.path.join(work, f"{name}.pbtxt")
    model.save(path)
    step = os.path.join(work, f"{name}.so")
    H.compile_step(args.bin_dir, path, step, "--emit-gradients")
    names = [i.name for i in proto.inputs]  # x, then label / labels
    outs = H.step_outputs(args.bin_dir, step, work, dict(zip(names, (x.numpy(), y.numpy()))),
                          module)
    return H.compare_step(name, proto, outs, ref), proto


def structural_checks(protos):
    """What the op mapping must have emitted, beyond matching numbers."""
    failures = []
    ops = {name: [n.op for n in p.nodes] for name, p in protos.items()}
    if "masks" in ops:
        if ops["masks"].count("causal_mask") != 1:
            failures.append(f"masks: expected one causal_mask, got {ops['masks']}")
        if "select" not in ops["masks"]:
            failures.append("masks: the non-causal mask should be a select")
    if "norms" in ops and "dropout" in ops["norms"]:
        failures.append("norms: nn.Dropout(0.0) should be the identity")
    if "products" in protos:
        p = {q.name: q for q in protos["products"].params}
        if list(p["w"].torch.perm) or list(p["w"].torch.aliases) != ["proj2.weight"]:
            failures.append(f"products: w should keep PyTorch's layout with alias "
                            f"proj2.weight: {p['w']}")
        if list(p["fc.weight"].torch.perm) != [1, 0]:
            failures.append("products: fc.weight should be stored (in, out)")
    if "own_loss" in protos:
        if [o.name for o in protos["own_loss"].outputs] != ["logits"]:
            failures.append("own_loss: the (B, C) output should be 'logits'")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tcc-torch-ops-") as tmp:
        args.work_dir = args.work_dir or tmp
        failures, protos = [], {}
        for name in args.case or list(CASES):
            try:
                f, protos[name] = check(name, args)
                failures += f
            except (H.Failure, tcc.TccError) as e:
                failures.append(f"{name}: {e}")
        failures += structural_checks(protos)
    return H.report(failures)


if __name__ == "__main__":
    sys.exit(main())
