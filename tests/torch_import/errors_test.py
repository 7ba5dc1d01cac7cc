#!/usr/bin/python3
"""What tcc.from_torch and `tcc import` refuse, and how: one line naming
the op and where it is (a TccError from Python, exit status 1 and no
traceback from the CLI; 2 for a usage error), and that `import tcc` alone
does not import torch.

usage: errors_test.py --bin-dir BUILD/bin [--work-dir DIR]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tcc  # noqa: E402

failures = []


def expect_error(label, fn, *needles):
    try:
        fn()
    except tcc.TccError as e:
        msg = str(e)
        print(f"{label}: {msg[:300]}")
        if "\n" in msg:
            failures.append(f"{label}: the error has several lines: {msg!r}")
        for n in needles:
            if n not in msg:
                failures.append(f"{label}: {n!r} not in the error: {msg!r}")
        return
    except Exception as e:  # noqa: BLE001 - exactly what must not happen
        failures.append(f"{label}: {type(e).__name__} instead of a TccError: {e}")
        return
    failures.append(f"{label}: no error")


class NormNet(nn.Module):
    """nn.InstanceNorm2d has no mapping (batch norm, group norm, conv2d and
    the pools do)."""

    def __init__(self, norm=None):
        super().__init__()
        self.features = nn.Sequential(norm or nn.InstanceNorm2d(1), nn.ReLU())
        self.fc = nn.Linear(8 * 8, 10)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class Inner(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)


class CumsumNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 10)
        self.block = Inner()

    def forward(self, x):
        return self.block(self.fc(x))


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return -self.fc(x)


class NanMask(nn.Module):
    """A constant of the import holding NaN: refused (any other content is a
    constant of the model file, tests/torch_import/constants_test.py)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 10)
        self.register_buffer("mask", torch.tensor([1.0, float("nan")] * 5))

    def forward(self, x):
        return self.fc(x) * self.mask


def python_checks():
    y = torch.randint(0, 10, (4,))
    ce = nn.CrossEntropyLoss()

    def imp(net, x, **kw):
        kw.setdefault("optimizer", torch.optim.SGD(net.parameters(), lr=0.1))
        return lambda: tcc.from_torch(net, x, loss=ce, target=y, **kw)

    expect_error("instance_norm", imp(NormNet(), torch.randn(4, 1, 8, 8)),
                 "unsupported op torch.nn.InstanceNorm2d at features.0", "supported:")
    expect_error("batch_norm_cumulative",
                 imp(NormNet(nn.BatchNorm2d(1, momentum=None)), torch.randn(4, 1, 8, 8)),
                 "unsupported use of torch.nn.BatchNorm2d at features.0: momentum=None")
    expect_error("cumsum", imp(CumsumNet(), torch.randn(4, 8)),
                 "unsupported op torch.cumsum at block")
    expect_error("control flow", imp(DataDependent(), torch.randn(4, 8)),
                 "cannot trace")
    expect_error("constant with NaN", imp(NanMask(), torch.randn(4, 8)),
                 "operator.mul", "a constant tensor of shape (10,) holds NaN")
    net = CumsumNet()
    expect_error("rmsprop", imp(nn.Linear(8, 10), torch.randn(4, 8),
                                optimizer=torch.optim.RMSprop(net.parameters())),
                 "RMSprop")
    expect_error("no target", lambda: tcc.from_torch(
        nn.Linear(8, 10), torch.randn(4, 8), loss=ce,
        optimizer=tcc.SGD(lr=0.1)), "target=")
    expect_error("no loss", lambda: tcc.from_torch(
        nn.Linear(8, 10), torch.randn(4, 8), optimizer=tcc.SGD(lr=0.1)),
        "must return the loss")
    # The same tensor reached twice (tied): one parameter with an alias.
    a = nn.Linear(8, 8, bias=False)
    net = nn.Sequential(a, nn.ReLU(), nn.Linear(8, 8, bias=False))
    net[2].weight = a.weight
    m = tcc.from_torch(net, torch.randn(4, 8), loss=ce,
                       target=torch.randint(0, 8, (4,)), optimizer=tcc.SGD(lr=0.1))
    params = m.params()
    if [p.name for p in params] != ["0.weight"] or \
            list(params[0].torch.aliases) != ["2.weight"] or \
            list(params[0].torch.perm) != [1, 0]:
        failures.append(f"tied Linear weights: {params}")
    # A recipe tcc compile would refuse is refused when it is written.
    expect_error("lr nan", imp(nn.Linear(8, 10), torch.randn(4, 8),
                               optimizer=tcc.SGD(lr=float("nan"))),
                 "training: sgd learning_rate must be > 0, got nan")
    expect_error("beta 1", imp(nn.Linear(8, 10), torch.randn(4, 8),
                               optimizer=tcc.AdamW(lr=1e-3, betas=(0.9, 1.0))),
                 "training: adamw beta2 must be in [0, 1), got 1.0")
    # `import tcc` alone leaves torch unimported.
    r = subprocess.run([sys.executable, "-c", "import sys, tcc; "
                        "print('torch' in sys.modules)"],
                       stdout=subprocess.PIPE, text=True)
    if r.stdout.strip() != "False":
        failures.append(f"import tcc imported torch: {r.stdout!r}")


def cli_checks(bin_dir, work):
    tcc_bin = os.path.join(bin_dir, "tcc")

    def run(args, code, *needles):
        r = subprocess.run([tcc_bin, "import", *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        label = "tcc import " + " ".join(os.path.basename(a) for a in args)
        print(f"{label}: exit {r.returncode}: {r.stderr.strip()[:300]}")
        if r.returncode != code:
            failures.append(f"{label}: exit {r.returncode}, expected {code}: {r.stderr}")
        if "Traceback" in r.stderr:
            failures.append(f"{label}: a Python traceback: {r.stderr}")
        for n in needles:
            if n not in r.stderr:
                failures.append(f"{label}: {n!r} not in {r.stderr!r}")
        if code == 1 and len(r.stderr.strip().splitlines()) != 1:
            failures.append(f"{label}: the error is not one line: {r.stderr!r}")

    conv = os.path.join(work, "conv.onnx")
    torch.onnx.export(NormNet(), torch.randn(4, 1, 8, 8), conv)
    out = os.path.join(work, "out.pb")
    run([conv, "-o", out, "--lr", "0.1"], 1,
        "unsupported op InstanceNormalization at node /features/")
    run([os.path.join(work, "missing.onnx"), "-o", out, "--lr", "0.1"], 1,
        "missing.onnx: no such file")
    run([conv, "-o", out], 2, "--lr")
    # Recipes tcc compile would refuse, refused here (issue 36).
    run([conv, "-o", out, "--lr", "nan"], 2, "sgd learning_rate must be > 0, got nan")
    run([conv, "-o", out, "--lr", "-1"], 2, "sgd learning_rate must be > 0, got -1.0")
    run([conv, "-o", out, "--lr", "0.1", "--momentum", "1.5"], 2,
        "sgd momentum must be in [0, 1), got 1.5")
    run([conv, "-o", out, "--lr", "0.1", "--optimizer", "adamw", "--eps", "0"], 2,
        "adamw eps must be > 0, got 0.0")
    # Not a file: a directory, a device.
    run([work, "-o", out, "--lr", "0.1"], 1, "is a directory, not an .onnx file")
    run(["/dev/zero", "-o", out, "--lr", "0.1"], 1, "/dev/zero: not a regular file")
    # Malformed graphs: one line, not an internal error.
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])

    def save(name, nodes, inits):
        path = os.path.join(work, name)
        onnx_model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                                       opset_imports=[helper.make_opsetid("", 17)])
        with open(path, "wb") as f:
            f.write(onnx_model.SerializeToString())
        return path

    dangling = save("dangling.onnx", [helper.make_node("Add", ["x", "nowhere"], ["y"])], [])
    run([dangling, "-o", out, "--lr", "0.1", "--loss", "mse"], 1,
        "input 'nowhere' is not computed before it")
    w = helper.make_tensor("W", TensorProto.FLOAT, [8, 8], [0.5] * 64)
    short = save("short_gemm.onnx", [helper.make_node("Gemm", ["x"], ["y"])], [w])
    run([short, "-o", out, "--lr", "0.1", "--loss", "mse"], 1,
        "short_gemm.onnx is not a valid ONNX model")
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[-16, 8],
                    float_data=[0.5] * 128)
    negative = save("negative.onnx", [helper.make_node("MatMul", ["x", "W"], ["y"])], [w])
    run([negative, "-o", out, "--lr", "0.1", "--loss", "mse"], 1, "'W'")
    w64 = helper.make_tensor("W", TensorProto.INT64, [8, 8], [1] * 64)
    ints = save("int_weight.onnx", [helper.make_node("Gemm", ["x", "W"], ["y"])], [w64])
    run([ints, "-o", out, "--lr", "0.1", "--loss", "mse"], 1, "W")
    # Models that crashed onnx's shape inference (tests/fuzz/crashes/
    # fuzz_onnx_import/: a segfault, SIGFPE), refused in one line before it.
    crashes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz",
                           "crashes", "fuzz_onnx_import")
    run([os.path.join(crashes, "shape-of-undefined-value.onnx"), "-o", out, "--lr", "0.1",
         "--loss", "mse"], 1, "is not a valid ONNX model: node Shape (Shape): input "
        "'nowhere' is not computed before it")
    run([os.path.join(crashes, "averagepool-zero-stride.onnx"), "-o", out, "--lr", "0.1",
         "--loss", "mse"], 1, "attribute strides = [2, 0]: must be >= 1")
    run([conv, "-o", out, "--lr", "0.1", "--no-decay", "bias,weights"], 2, "weights")
    r = subprocess.run([tcc_bin, "--help"], stdout=subprocess.PIPE, text=True)
    if "tcc import" not in r.stdout:
        failures.append("tcc --help does not list tcc import")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tcc-torch-errors-") as tmp:
        work = args.work_dir or tmp
        os.makedirs(work, exist_ok=True)
        python_checks()
        cli_checks(args.bin_dir, work)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
