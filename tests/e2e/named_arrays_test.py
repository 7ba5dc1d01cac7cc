#!/usr/bin/env python3
"""trun feeds any model: named arrays end to end (tcc's Python front end,
tcc compile --target cpu, trun).

(a) A linear regression with two float inputs, x [B, F] and y [B, 1], and an
    MSE loss built from primitives (mean((x @ w + b - y)^2)), trained on
    float64 .npy arrays (y saved as (N,): rounded to f32, reshaped to
    [B, 1]) drawn from a known linear function plus noise. The loss must
    fall well below its start, the test loss near the noise floor, and the
    weights read back from --save-weights (safetensors, read here with
    numpy) must approach the true ones.
(b) A model with two feature inputs besides the target, a [B, 3] and
    c [B, 2], concatenated: pred = concat(a, c) @ w + b, y [B]. a from a
    float32 .npy, c from a tensor of a safetensors file written here
    (NAME=FILE:TENSOR), y from a float64 .npy; the test split is a folder of
    NAME.npy files. Same checks, and a run stopped at a checkpoint and
    resumed ends with exactly the uninterrupted run's test loss.
(c) Mistakes are one-line errors (exit 1) naming the input, array or file.

usage: named_arrays_test.py TCC TRUN PYTHON_DIR WORKDIR
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

TCC, TRUN, PYTHON_DIR, WORK = sys.argv[1:5]
sys.path.insert(0, PYTHON_DIR)
import tcc  # noqa: E402
from tcc import ops  # noqa: E402

B = 32
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def run(args, expect=0):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != expect:
        sys.exit(f"FAIL: {' '.join(args)} exited {result.returncode}, "
                 f"expected {expect}\n{result.stdout}\n{result.stderr}")
    return result


def path(name):
    return os.path.join(WORK, name)


def compile_model(model, name):
    pb = model.save(path(name + ".pb"))
    so = path(name + ".so")
    run([TCC, "compile", pb, "--target", "cpu", "-o", so])
    return so


def step_losses(out):
    return [float(m) for m in re.findall(r"^step \d+/\d+  loss (\S+)", out, re.M)]


def test_loss(out):
    m = re.search(r"^test loss: (\S+)$", out, re.M)
    return float(m.group(1)) if m else float("nan")


def read_safetensors(file):
    """name -> float32 array, read independently of trun's reader."""
    with open(file, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", entry
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[8 + n + begin:8 + n + end],
                                      dtype="<f4").reshape(entry["shape"])
    return tensors


def write_safetensors(file, tensors):
    """float32 tensors as safetensors (header JSON, 8-byte aligned)."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def regression():
    F, N, NOISE = 4, 1024, 0.01
    m = tcc.Model("linreg")
    x = m.input("x", (B, F))
    y = m.input("y", (B, 1))
    w = m.param("w", (F, 1), init=tcc.zeros())
    b = m.param("b", (1,), init=tcc.zeros())
    err = x @ w + b - y
    m.output("pred", x @ w + b)
    m.train(ops.mean(err * err, name="mse"), tcc.SGD(lr=0.1))
    so = compile_model(m, "linreg")

    rng = np.random.default_rng(1)
    w_true = rng.uniform(-2, 2, size=F)
    b_true = rng.uniform(-1, 1)
    def split(n, prefix):
        X = rng.normal(size=(n, F))  # float64, numpy's default
        Y = X @ w_true + b_true + NOISE * rng.normal(size=n)
        np.save(path(prefix + "x.npy"), X)
        np.save(path(prefix + "y.npy"), Y)  # (n,) for input y [B, 1]
    split(N, "reg_")
    split(256, "reg_test_")

    weights = path("linreg.safetensors")
    r = run([TRUN, so, "--data", f"x={path('reg_x.npy')},y={path('reg_y.npy')}",
             "--test", f"x={path('reg_test_x.npy')},y={path('reg_test_y.npy')}",
             "--epochs", "8", "--log-every", "1", "--seed", "2",
             "--save-weights", weights])
    out = r.stdout
    check(f"input 'x' f32 [{B}, {F}] <- {path('reg_x.npy')} (float64 ({N}, {F}), "
          f"converted to f32), {N} samples" in out, "(a) binding line of x")
    check(f"input 'y' f32 [{B}, 1] <- {path('reg_y.npy')} (float64 ({N},), "
          f"converted to f32), {N} samples" in out, "(a) binding line of y")
    losses = step_losses(out)
    check(len(losses) == 8 * (N // B), f"(a) {len(losses)} steps logged")
    first, last = np.mean(losses[:4]), np.mean(losses[-8:])
    check(last < 0.01 * first, f"(a) loss falls: {first:.4g} -> {last:.4g}")
    tl = test_loss(out)
    check(tl < 10 * NOISE ** 2, f"(a) test loss {tl:.3g} near the noise "
          f"floor {NOISE ** 2:.1g}")
    got = read_safetensors(weights)
    w_err = np.abs(got["w"].reshape(-1) - w_true).max()
    b_err = abs(float(got["b"].reshape(-1)[0]) - b_true)
    check(w_err < 0.01 and b_err < 0.01,
          f"(a) learned weights approach the true ones (max error w "
          f"{w_err:.2g}, b {b_err:.2g})")
    return so


def two_features():
    N = 960
    m = tcc.Model("two_features")
    a = m.input("a", (B, 3))
    c = m.input("c", (B, 2))
    y = m.input("y", (B,))
    w = m.param("w", (5, 1), init=tcc.zeros())
    b = m.param("b", (1,), init=tcc.zeros())
    pred = ops.reshape(ops.concat([a, c], axis=1) @ w + b, (B,))
    err = pred - y
    m.output("pred", pred)
    m.train(ops.mean(err * err, name="mse"), tcc.SGD(lr=0.1))
    so = compile_model(m, "two_features")

    rng = np.random.default_rng(3)
    w_true = rng.uniform(-1, 1, size=5)
    b_true = 0.25
    def split(n):
        A = rng.normal(size=(n, 3)).astype(np.float32)
        C = rng.normal(size=(n, 2)).astype(np.float32)
        Y = np.concatenate([A, C], axis=1).astype(np.float64) @ w_true + b_true
        return A, C, Y + 0.01 * rng.normal(size=n)
    A, C, Y = split(N)
    np.save(path("tf_a.npy"), A)
    write_safetensors(path("tf_feats.safetensors"),
                      {"feat_c": C, "unused": np.zeros((2, 2))})
    np.save(path("tf_y.npy"), Y)
    test_dir = path("tf_test")
    os.makedirs(test_dir, exist_ok=True)
    TA, TC, TY = split(200)
    for name, arr in (("a", TA), ("c", TC), ("y", TY)):
        np.save(os.path.join(test_dir, name + ".npy"), arr)

    data = (f"a={path('tf_a.npy')},c={path('tf_feats.safetensors')}:feat_c,"
            f"y={path('tf_y.npy')}")
    args = [TRUN, so, "--data", data, "--test", test_dir, "--seed", "4",
            "--log-every", "1"]
    weights = path("two_features.safetensors")
    r = run(args + ["--epochs", "6", "--save-weights", weights])
    out = r.stdout
    check(f"input 'c' f32 [{B}, 2] <- {path('tf_feats.safetensors')}:feat_c "
          f"(float32 ({N}, 2), as stored), {N} samples" in out,
          "(b) binding line of c (a safetensors tensor)")
    check(f"test input 'y' f32 [{B}] <- {os.path.join(test_dir, 'y.npy')} "
          f"(float64 (200,), converted to f32), 200 samples" in out,
          "(b) binding line of the test folder's y")
    losses = step_losses(out)
    first, last = np.mean(losses[:4]), np.mean(losses[-6:])
    check(last < 0.01 * first, f"(b) loss falls: {first:.4g} -> {last:.4g}")
    got = read_safetensors(weights)
    w_err = np.abs(got["w"].reshape(-1) - w_true).max()
    check(w_err < 0.01, f"(b) learned weights approach the true ones "
          f"(max error {w_err:.2g})")

    # Stopped after 40 steps (mid-epoch 2 of 30 steps each), resumed.
    ckpt = path("tf_ckpt")
    run(args + ["--steps", "40", "--ckpt-dir", ckpt])
    resumed = run(args + ["--epochs", "6", "--ckpt-dir", ckpt, "--resume"]).stdout
    check("data cursor 40 batches" in resumed, "(b) resumed at the data cursor")
    check(step_losses(resumed) == losses[40:],
          "(b) the resumed run makes the uninterrupted run's steps 41..180")
    check(test_loss(resumed) == test_loss(out),
          f"(b) the same test loss ({test_loss(resumed)} vs {test_loss(out)})")


def errors(so):
    x, y = path("reg_x.npy"), path("reg_y.npy")
    np.save(path("bad_x5.npy"), np.zeros((1024, 5)))
    np.save(path("bad_y.npy"), np.zeros(1000))
    cases = [
        (f"x={x}", "step input 'y' f32 [32, 1] has no array in --data "
                   "(add y=FILE.npy)"),
        (f"x={x},y={y},z={y}", f"--data: array 'z' ({y}) is not an input of "
                               "step 'linreg' (inputs: x, y); name it INPUT=FILE"),
        (f"x={path('bad_x5.npy')},y={y}",
         f"{path('bad_x5.npy')}: array 'x' float64 (1024, 5) has samples "
         "shaped (5,); step input 'x' f32 [32, 4] takes (4,) per sample"),
        (f"x={x},y={path('bad_y.npy')}",
         f"--data: sample counts differ: 'x' ({x}) has 1024, 'y' "
         f"({path('bad_y.npy')}) has 1000"),
        (f"x={x},y={path('missing.npy')}",
         f"cannot open {path('missing.npy')}: No such file or directory"),
    ]
    for data, message in cases:
        r = run([TRUN, so, "--data", data], expect=1)
        check(r.stderr == f"trun: error: {message}\n",
              f"(c) error: {message}" + ("" if r.stderr == f"trun: error: "
                                          f"{message}\n" else f" (got {r.stderr!r})"))


def main():
    shutil.rmtree(WORK, ignore_errors=True)  # no checkpoints of a former run
    os.makedirs(WORK)
    so = regression()
    two_features()
    errors(so)
    if FAILURES:
        sys.exit(f"{len(FAILURES)} check(s) failed")
    print("all named-arrays checks passed")


if __name__ == "__main__":
    main()
