#!/usr/bin/python3
"""tcc.from_torch never imports a silently different function (issue 35):

  * in-place ops: `r = F.relu(h, inplace=True); fc2(r + h)` reads the
    overwritten h, as PyTorch does (and nn.ReLU(inplace=True), `+=`):
    one CPU step's loss and every gradient against PyTorch's;
  * refused with one line: forward hooks and pre-hooks, gradient hooks, a
    global module hook (fx traces forward() itself: they would not run),
    an in-place write to a parameter, an in-place write through a view
    whose base is read later, example_inputs=None;
  * a token model's names: nanoGPT's forward(idx, targets) imports with
    inputs "tokens" and "targets" (what trun feeds a token shard to), and
    input_names= overrides;
  * trun notes a frozen parameter left at a random stand-in initializer
    (run without --init-from), and not once --init-from loads it.

usage: semantics_test.py --bin-dir BUILD/bin [--work-dir DIR]
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import harness as H  # noqa: E402
import tcc  # noqa: E402


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.fc1(x)
        r = F.relu(h, inplace=True)   # h is r now
        z = r + h                     # 2 relu(fc1 x)
        z2 = z * 2.0
        z2 += z                       # torchvision's `out += identity`
        return self.fc2(self.act(z2))


class WritesParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        self.fc.bias.add_(1.0)
        return self.fc(x)


class WritesView(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 4)

    def forward(self, x):
        h = self.fc(x)
        v = h.view(-1, 8)
        v.relu_()                     # h changes too, and is read below
        return self.out(h)


class NanoGptLike(nn.Module):
    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets):
        logits = self.lm_head(self.wte(idx))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def check_inplace(args):
    H.seed_all(5)
    module = InPlace()
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    model = tcc.from_torch(module, (x,), loss=F.cross_entropy, target=y,
                           optimizer=torch.optim.SGD(module.parameters(), lr=0.1))
    ref = H.reference_step(module, lambda m, x, y: F.cross_entropy(m(x), y), (x, y))
    work = os.path.join(args.work_dir, "inplace")
    os.makedirs(work, exist_ok=True)
    return H.check_step(args.bin_dir, "inplace", model, module, (x, y), ref, work,
                        H.STEP_LOSS_FLOOR)


def check_refusals():
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))

    def imported(module, inputs=(x,)):
        return lambda: tcc.from_torch(module, inputs, loss=F.cross_entropy, target=y,
                                      optimizer=torch.optim.SGD(module.parameters(), lr=0.1))

    hooked = nn.Sequential(nn.Linear(8, 4))
    hooked[0].register_forward_hook(lambda m, i, o: o * 2)
    pre = nn.Linear(8, 4)
    pre.register_forward_pre_hook(lambda m, i: (i[0] * 2,))
    grad = nn.Linear(8, 4)
    grad.weight.register_hook(lambda g: g * 0)
    failures = H.expect_tcc_errors([
        (imported(hooked), "0 has a forward hook, which the traced step would not run"),
        (imported(pre), "the module has a forward pre-hook"),
        (imported(grad), "parameter weight has a gradient hook (register_hook)"),
        (imported(WritesParameter()), "in-place Tensor.add_ at the top-level forward writes "
                                       "the parameter or buffer fc.bias"),
        (imported(WritesView()), "a view of fc, which PyTorch changes too and is read "
                                 "after it"),
        (imported(nn.Linear(8, 4), None), "example_inputs must be a tensor or a tuple of "
                                          "tensors"),
    ])
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
    try:
        failures += H.expect_tcc_errors([(imported(nn.Linear(8, 4)),
                                          "a global module hook is registered")])
    finally:
        handle.remove()
    return failures


def check_names():
    failures = []
    module = NanoGptLike()
    idx, targets = torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8))
    sgd = torch.optim.SGD(module.parameters(), lr=0.1)
    names = [i.name for i in tcc.from_torch(module, (idx, targets),
                                            optimizer=sgd).proto().inputs]
    if names != ["tokens", "targets"]:
        failures.append(f"nanoGPT forward(idx, targets): inputs {names}, expected "
                        "['tokens', 'targets']")
    names = [i.name for i in tcc.from_torch(module, (idx, targets), optimizer=sgd,
                                            input_names={"idx": "ids"}).proto().inputs]
    if names != ["ids", "targets"]:
        failures.append(f"input_names={{'idx': 'ids'}}: inputs {names}")
    failures += H.expect_tcc_errors([(
        lambda: tcc.from_torch(module, (idx, targets), optimizer=sgd,
                               input_names={"input_ids": "tokens"}),
        "input_names names ['input_ids'], which are not arguments of forward")])
    print(f"names: {names}")
    return failures


class FrozenTable(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.scale = nn.Parameter(torch.rand(4) + 0.5, requires_grad=False)

    def forward(self, x):
        return self.fc(x) * self.scale


def check_frozen_note(args):
    """trun says when a frozen parameter starts from a stand-in (random)
    initializer, and not once --init-from gives its values."""
    H.seed_all(7)
    module = FrozenTable()
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    model = tcc.from_torch(module, (x,), loss=F.cross_entropy, target=y,
                           optimizer=torch.optim.SGD(module.parameters(), lr=0.1))
    work = os.path.join(args.work_dir, "frozen")
    os.makedirs(work, exist_ok=True)
    path, step = os.path.join(work, "m.pb"), os.path.join(work, "m.so")
    model.save(path)
    H.compile_step(args.bin_dir, path, step)
    import numpy as np
    np.save(os.path.join(work, "x.npy"), x.numpy())
    np.save(os.path.join(work, "labels.npy"), y.numpy().astype(np.int32))
    data = f"x={work}/x.npy,labels={work}/labels.npy"
    trun = os.path.join(args.bin_dir, "trun")
    plain = H.run([trun, step, "--data", data, "--steps", 1]).stdout
    weights = tcc.export_torch_weights(module, os.path.join(work, "w.safetensors"))
    loaded = H.run([trun, step, "--data", data, "--steps", 1, "--init-from", weights]).stdout
    note = ("note: frozen parameter scale starts from a random initializer and is never "
            "trained: load its values with --init-from")
    failures = []
    if note not in plain:
        failures.append(f"trun without --init-from: no note '{note}' in:\n{plain}")
    if "frozen parameter" in loaded:
        failures.append(f"trun --init-from: the stand-in note is still printed:\n{loaded}")
    print(f"frozen note: {'printed' if note in plain else 'missing'} without --init-from")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    args = ap.parse_args()
    torch.set_num_threads(1)
    failures = []
    with tempfile.TemporaryDirectory(prefix="tcc-semantics-") as tmp:
        args.work_dir = args.work_dir or tmp
        for check in (lambda: check_inplace(args), check_refusals, check_names,
                      lambda: check_frozen_note(args)):
            try:
                failures += check()
            except (H.Failure, tcc.TccError) as e:
                failures.append(str(e))
    return H.report(failures)


if __name__ == "__main__":
    sys.exit(main())
