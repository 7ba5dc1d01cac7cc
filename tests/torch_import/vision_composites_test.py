#!/usr/bin/python3
"""GroupNorm, adaptive average pooling and interpolate / Upsample (tcc's
composite ops, python/tcc/composite_ops.py) and ConvTranspose2d
(conv_transpose2d) against PyTorch: small CNNs
(conv -> the ops -> conv -> flatten -> linear -> cross-entropy), each
imported by tcc.from_torch (modules and F.* calls) or written with tcc.nn,
one step compiled by `tcc compile --target cpu --emit-gradients` and run by
trun on the same weights and batch. Loss and every gradient (the first
convolution's gradient flows back through each op) must be as close to
PyTorch's in float64 as max(1e-5 relative, 10x PyTorch float32's own
distance from it) (harness.compare_step). Then the refusals: modes and
arguments that are not supported end in one line that names them.

usage: vision_composites_test.py --bin-dir BUILD/bin --work-dir DIR [--case NAME]
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

N, C, HW, K, CH = 3, 3, 10, 5, 8
RTOL = 1e-5


class Net(tnn.Module):
    """conv1 -> mid -> conv2 -> flatten -> fc; `mid` a module or a function
    of (module, h)."""

    def __init__(self, mid, mid_channels=CH):
        super().__init__()
        self.conv1 = tnn.Conv2d(C, CH, 3, padding=1)
        if isinstance(mid, tnn.Module):
            self.mid = mid
            self.fn = None
        else:
            self.fn = mid
            self.gn = tnn.GroupNorm(2, CH)  # for the F.group_norm case's weights
            self.ct = tnn.ConvTranspose2d(CH, CH, 3)  # and F.conv_transpose2d's
        self.conv2 = tnn.Conv2d(mid_channels, 4, 3, padding=1)
        with torch.no_grad():
            flat = self.trunk(torch.zeros(1, C, HW, HW)).numel()
        self.fc = tnn.Linear(flat, K)

    def trunk(self, x):
        h = torch.tanh(self.conv1(x))
        h = self.fn(self, h) if self.fn is not None else self.mid(h)
        return self.conv2(h)

    def forward(self, x):
        return self.fc(self.trunk(x).flatten(1))


def seq(*ms):
    return tnn.Sequential(*ms)


# name -> the middle of the network (modules, or functions of (net, h)).
CASES = {
    "group_norm": lambda: seq(tnn.GroupNorm(4, CH), tnn.SiLU()),
    "group_norm_1_no_affine": lambda: tnn.GroupNorm(1, CH, affine=False),
    "group_norm_function": lambda: (
        lambda m, h: TF.group_norm(h, 2, m.gn.weight, m.gn.bias, eps=1e-4)),
    "adaptive_global_and_divisible": lambda: seq(
        tnn.AdaptiveAvgPool2d((5, 2)), tnn.Upsample(scale_factor=2)),
    "adaptive_uneven": lambda: tnn.AdaptiveAvgPool2d((3, 4)),
    "adaptive_function_none": lambda: (
        lambda m, h: TF.adaptive_avg_pool2d(h, (None, 3)) + TF.adaptive_avg_pool2d(h, 1)),
    "nearest_x2_and_size": lambda: (
        lambda m, h: TF.interpolate(TF.interpolate(h, scale_factor=2), size=(7, 13))),
    "nearest_x3_and_exact": lambda: seq(
        tnn.Upsample(scale_factor=3), tnn.Upsample(size=(13, 11), mode="nearest-exact")),
    "bilinear_x2": lambda: tnn.Upsample(scale_factor=2, mode="bilinear"),
    "bilinear_corners_size": lambda: (
        lambda m, h: TF.interpolate(h, size=(13, 17), mode="bilinear", align_corners=True)),
    "bilinear_down_and_fraction": lambda: (
        lambda m, h: TF.interpolate(TF.interpolate(h, scale_factor=0.5, mode="bilinear"),
                                    scale_factor=1.5, mode="bilinear")),
    "conv_transpose_2x2": lambda: tnn.ConvTranspose2d(CH, CH, 2, stride=2),
    "conv_transpose_padded_groups": lambda: tnn.ConvTranspose2d(
        CH, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
    "conv_transpose_function_dilated": lambda: (
        lambda m, h: TF.conv_transpose2d(h, m.ct.weight, m.ct.bias, stride=(1, 2),
                                         padding=(2, 1), dilation=2)),
    "upsampling_modules": lambda: seq(
        tnn.UpsamplingBilinear2d(scale_factor=2), tnn.UpsamplingNearest2d(size=(9, 9))),
}


class TccNet(nn.Module):
    """"tcc_nn": the network of the "tcc_nn" torch twin, written with tcc.nn."""

    def __init__(self, flat):
        super().__init__()
        self.conv1 = nn.Conv2d(C, CH, 3, padding=1)
        self.mid = nn.Sequential(nn.GroupNorm(4, CH), nn.Upsample(scale_factor=2,
                                                                  mode="bilinear"),
                                 nn.AdaptiveAvgPool2d((7, 6)),
                                 nn.ConvTranspose2d(CH, CH, 2, stride=2))
        self.conv2 = nn.Conv2d(CH, 4, 3, padding=1)
        self.fc = nn.Linear(flat, K)

    def forward(self, x):
        h = self.conv2(self.mid(ops.tanh(self.conv1(x))))
        return self.fc(ops.reshape(h, (N, -1)))


def torch_twin():
    return Net(seq(tnn.GroupNorm(4, CH), tnn.Upsample(scale_factor=2, mode="bilinear"),
                   tnn.AdaptiveAvgPool2d((7, 6)), tnn.ConvTranspose2d(CH, CH, 2, stride=2)))


def tcc_nn_model(flat):
    m = tcc.Model("composites")
    x = m.input("x", (N, C, HW, HW))
    y = m.input("y", (N,), "i32")
    m.train(F.cross_entropy(TccNet(flat)(x), y), tcc.SGD(lr=0.1))
    return m


H_BIN = [None]


def refusals(x, y):
    """Unsupported forms end in a TccError naming them; bad sizes too."""
    failures = []
    bad_torch = [
        ("bicubic", lambda m, h: TF.interpolate(h, scale_factor=2, mode="bicubic")),
        ("antialias", lambda m, h: TF.interpolate(h, size=(5, 5), mode="bilinear",
                                                  antialias=True)),
    ]
    for expected, fn in bad_torch:
        net = Net(fn)
        try:
            tcc.from_torch(net, (x,), loss=TF.cross_entropy, target=y,
                           optimizer=torch.optim.SGD(net.parameters(), lr=0.1))
            failures.append(f"from_torch accepted {expected}")
        except tcc.TccError as e:
            if expected not in str(e) or "\n" in str(e).strip():
                failures.append(f"from_torch error for {expected} is not one line naming "
                                f"it: {e}")
    m = tcc.Model("bad")
    t = m.input("t", (2, 8, 6, 6))
    bad_ops = [
        (lambda: ops.group_norm(t, 3), "must divide the 8 channels"),
        (lambda: ops.interpolate(t, size=(4, 4), scale_factor=2), "exactly one of"),
        (lambda: ops.interpolate(t, scale_factor=2, mode="area"), "mode 'area'"),
        (lambda: ops.interpolate(t, scale_factor=2, align_corners=True),
         "align_corners only applies"),
        (lambda: ops.interpolate(t, scale_factor=0.01), "must be positive"),
        (lambda: ops.adaptive_avg_pool2d(t, (0, 2)), "must be positive"),
        (lambda: ops.adaptive_avg_pool2d(ops.reshape(t, (2, 288)), 1), "(N, C, H, W)"),
        (lambda: nn.GroupNorm(3, 8), "divide num_channels"),
        (lambda: ops.conv_transpose2d(t, m.param("wt", (8, 4, 3, 3)), stride=2,
                                      output_padding=2), "output_padding 2"),
        (lambda: ops.conv_transpose2d(t, m.param("wt2", (4, 4, 3, 3))), "C_in = 8"),
        (lambda: ops.conv_transpose2d(t, m.param("wt3", (8, 4, 3, 3)), dilation=2,
                                      output_padding=1), "smaller than the stride 1"),
    ]
    return failures + H.expect_tcc_errors(bad_ops)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    ap.add_argument("--case", action="append", help="run only these cases")
    args = ap.parse_args()
    H_BIN[0] = args.bin_dir
    torch.set_num_threads(1)
    H.seed_all(5)
    x = torch.randn(N, C, HW, HW)
    y = torch.randint(0, K, (N,))

    def loss_of(m, x, y):
        return TF.cross_entropy(m(x), y)

    failures = refusals(x, y)
    names = list(CASES) + ["tcc_nn"]
    with tempfile.TemporaryDirectory(prefix="tcc-composites-") as tmp:
        root = args.work_dir or tmp
        for name in names:
            if args.case and name not in args.case:
                continue
            work = os.path.join(root, name)
            os.makedirs(work, exist_ok=True)
            torch.manual_seed(len(name))
            mid_channels = 6 if name == "conv_transpose_padded_groups" else CH
            net = torch_twin() if name == "tcc_nn" else Net(CASES[name](), mid_channels)
            with torch.no_grad():  # affine norms away from their ones/zeros init
                for n_, p in net.named_parameters():
                    if ".weight" in n_ and p.dim() == 1:
                        p.add_(0.3 * torch.randn_like(p))
                    elif ".bias" in n_ and p.dim() == 1 and "conv" not in n_:
                        p.add_(0.3 * torch.randn_like(p))
            ref = H.reference_step(net, loss_of, (x, y))
            try:
                if name == "tcc_nn":
                    model = tcc_nn_model(net.fc.in_features)
                else:
                    model = tcc.from_torch(net, (x,), loss=TF.cross_entropy, target=y,
                                           optimizer=torch.optim.SGD(net.parameters(),
                                                                     lr=0.1))
                failures += H.check_step(H_BIN[0], name, model, net, (x, y), ref, work,
                                         RTOL)
            except (H.Failure, tcc.TccError) as e:
                failures.append(f"{name}: {e}")
    return H.report(failures)


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    sys.exit(main())
