#!/usr/bin/python3
"""conv2d, max_pool2d and avg_pool2d against PyTorch (torch.nn.Conv2d,
MaxPool2d, AvgPool2d), one step of a tiny CNN (conv -> relu -> max pool ->
grouped conv -> avg pool with padding -> flatten -> linear -> cross-entropy)
compiled by `tcc compile --target cpu --emit-gradients` and run by trun on
the same weights (torch's state_dict, trun --init-from) and batch:
  - "tcc_nn": the network written with tcc.nn (Conv2d weights stored in
    torch's (out, in/groups, kh, kw) layout, no perm);
  - "from_torch": the torch network imported by tcc.from_torch;
  - "functional": the same through F.conv2d / F.max_pool2d / F.avg_pool2d.
Loss and every gradient (norm-wise) must be as close to PyTorch's in float64
as max(1e-5 relative, 10x PyTorch float32's own distance from it)
(harness.compare_step).

usage: vision_ops_test.py --bin-dir BUILD/bin --work-dir DIR
"""

import argparse
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tcc  # noqa: E402
from tcc import nn, ops  # noqa: E402
from tcc.nn import functional as F  # noqa: E402

N, C, HW, K = 4, 3, 10, 6
RTOL = 1e-5
FLAT = 8 * 3 * 3  # after avg pool (2, stride 2, padding 1) of 5 x 5


class TorchCnn(tnn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = tnn.Conv2d(C, 8, 3, padding=1)
        self.pool1 = tnn.MaxPool2d(2)
        self.conv2 = tnn.Conv2d(8, 8, 3, padding=(1, 2), dilation=(1, 2), groups=2)
        self.pool2 = tnn.AvgPool2d(2, stride=2, padding=1)
        self.fc = tnn.Linear(FLAT, K)

    def forward(self, x):
        h = self.pool1(torch.relu(self.conv1(x)))
        h = self.pool2(self.conv2(h))
        return self.fc(h.flatten(1))


class TorchCnnFunctional(TorchCnn):
    """The same network through F.conv2d, F.max_pool2d, F.avg_pool2d."""

    def forward(self, x):
        c1, c2 = self.conv1, self.conv2
        h = TF.max_pool2d(torch.relu(TF.conv2d(x, c1.weight, c1.bias, padding=1)), 2)
        h = TF.conv2d(h, c2.weight, c2.bias, 1, (1, 2), (1, 2), 2)
        h = TF.avg_pool2d(h, 2, stride=2, padding=1)
        return self.fc(h.flatten(1))


class TccCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(C, 8, 3, padding=1)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=(1, 2), dilation=(1, 2), groups=2)
        self.pool2 = nn.AvgPool2d(2, stride=2, padding=1)
        self.fc = nn.Linear(FLAT, K)

    def forward(self, x):
        h = self.pool1(ops.relu(self.conv1(x)))
        h = self.pool2(self.conv2(h))
        return self.fc(ops.reshape(h, (N, FLAT)))


def tcc_nn_model():
    m = tcc.Model("cnn")
    x = m.input("x", (N, C, HW, HW))
    y = m.input("y", (N,), "i32")
    m.train(F.cross_entropy(TccCnn()(x), y), tcc.SGD(lr=0.1))
    return m


def run_case(name, model, net, x, y, ref, work):
    for p in model.proto().params:
        if p.name.endswith("conv1.weight") and list(p.torch.perm):
            return [f"{name}: Conv2d weight must keep torch's layout, got perm "
                    f"{list(p.torch.perm)}"]
    return H.check_step(H_BIN[0], name, model, net, (x, y), ref, work, RTOL)


H_BIN = [None]


def shape_checks():
    """The Python front end's shape rules (tcc/shapes.py) against torch's
    output sizes, and its errors for shapes torch refuses too."""
    failures = []
    m = tcc.Model("shapes")
    x = m.input("x", (2, 4, 9, 7))
    for kw in ({}, {"stride": 2, "padding": 1}, {"dilation": 2, "padding": (2, 0)},
               {"groups": 2, "stride": (1, 3)}, {"groups": 4}):
        g = kw.get("groups", 1)
        w = m.param(f"w{len(m.proto().params)}", (6 if g != 4 else 4, 4 // g, 3, 2))
        ours = ops.conv2d(x, w, **kw).shape
        ref = tuple(TF.conv2d(torch.zeros(2, 4, 9, 7), torch.zeros(tuple(w.shape)),
                              **kw).shape)
        if ours != ref:
            failures.append(f"conv2d {kw}: shape {ours}, torch {ref}")
    for op, fn in ((ops.max_pool2d, TF.max_pool2d), (ops.avg_pool2d, TF.avg_pool2d)):
        for k, s, p in ((2, None, 0), (3, 2, 1), ((3, 2), (1, 2), (1, 1))):
            ours = op(x, k, s, p).shape
            ref = tuple(fn(torch.zeros(2, 4, 9, 7), k, s, p).shape)
            if ours != ref:
                failures.append(f"{op.__name__} {k, s, p}: shape {ours}, torch {ref}")
    bad = [(lambda: ops.conv2d(x, m.param("wg", (6, 2, 3, 3)), groups=3), "groups 3"),
           (lambda: ops.conv2d(x, m.param("wc", (6, 3, 3, 3))), "must have 4 input channels"),
           (lambda: ops.conv2d(x, m.param("wk", (6, 4, 11, 3))), "larger than the padded"),
           (lambda: ops.conv2d(x, m.param("ws", (6, 4, 3, 3)), stride=-1), ">= 1"),
           (lambda: ops.max_pool2d(x, 3, 1, 2), "at most half the kernel")]
    return failures + H.expect_tcc_errors(bad)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    args = ap.parse_args()
    H_BIN[0] = args.bin_dir
    torch.set_num_threads(1)
    H.seed_all(3)
    net = TorchCnn()
    x = torch.randn(N, C, HW, HW)
    y = torch.randint(0, K, (N,))
    def loss_of(m, x, y):
        return TF.cross_entropy(m(x), y)

    ref = H.reference_step(net, loss_of, (x, y))
    failures = shape_checks()
    with tempfile.TemporaryDirectory(prefix="tcc-vision-") as tmp:
        root = args.work_dir or tmp
        functional = TorchCnnFunctional()
        functional.load_state_dict(net.state_dict())
        f_ref = H.reference_step(functional, loss_of, (x, y))
        for name in ("tcc_nn", "from_torch", "functional"):
            work = os.path.join(root, name)
            os.makedirs(work, exist_ok=True)
            module = functional if name == "functional" else net
            try:
                model = tcc_nn_model() if name == "tcc_nn" else tcc.from_torch(
                    module, (x,), loss=TF.cross_entropy, target=y,
                    optimizer=torch.optim.SGD(module.parameters(), lr=0.1))
                if name == "functional":
                    failures += run_case(name, model, module, x, y, f_ref, work)
                else:
                    failures += run_case(name, model, net, x, y, ref, work)
            except (H.Failure, tcc.TccError) as e:
                failures.append(f"{name}: {e}")
    return H.report(failures)


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    sys.exit(main())
