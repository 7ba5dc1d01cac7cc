#!/usr/bin/env python3
"""trun reads .npy files written by real numpy (np.save, format.write_array).

  1. uint8 images [N, 28, 28] and int64 labels (numpy's default integer)
     train the linear fixture step exactly like the same data as IDX files
     (written here by hand): same losses, accuracy and normalization line.
  2. The same arrays saved as .npy versions 2.0 and 3.0, [N, 784] images and
     labels of every integer dtype give the same results.
  3. float32 images train, fed as stored ("normalization: none").
  4. Fortran-order, big-endian, float64, NaN and out-of-range arrays are
     refused with a one-line error naming the file.

usage: npy_numpy_interop.py TRUN LINEAR_STEP WORKDIR
"""
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

N_TRAIN, N_TEST, CLASSES = 600, 250, 10  # fixtures/linear_step.c: batch 100


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def synthetic(count, salt):
    """Separable images: class c has bright rows 2c+4 and 2c+5."""
    rng = np.random.default_rng(salt)
    labels = rng.integers(0, CLASSES, count)  # int64
    images = rng.integers(0, 40, (count, 28, 28)).astype(np.uint8)
    for i, label in enumerate(labels):
        images[i, (2 * label + 4) % 28] += 180
        images[i, (2 * label + 5) % 28] += 180
    return images, labels


def write_idx(path, array):
    magic = 0x800 | array.ndim  # unsigned bytes
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        f.write(struct.pack(">%dI" % array.ndim, *array.shape))
        f.write(np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def save_version(path, array, version):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=version)


def trun(args):
    return subprocess.run([TRUN, STEP] + args, capture_output=True, text=True)


def train(data, test, extra=()):
    result = trun(["--data", ",".join(data), "--test", ",".join(test),
                   "--epochs", "2", "--log-every", "2"] + list(extra))
    if result.returncode != 0:
        fail("trun %s exited %d: %s" % (data, result.returncode, result.stderr))
    if result.stderr:
        fail("trun %s wrote to stderr: %s" % (data, result.stderr))
    return result.stdout


# The lines that depend only on data, step and seed (not timings or paths).
KEPT = re.compile(r"^(step \d+/\d+  loss \S+  lr \S+|epoch \d+ done: mean "
                  r"loss \S+|test accuracy: .*|test loss: .*|normalization: .*)")


def results(out):
    lines = [m.group(0) for m in map(KEPT.match, out.splitlines()) if m]
    if len(lines) != 6 + 2 + 2 + 1:  # steps, epochs, test, normalization
        fail("unexpected output:\n" + out)
    return lines


def expect_error(data, message):
    result = trun(["--data", ",".join(data), "--steps", "1"])
    err = result.stderr
    if (result.returncode != 1 or not err.startswith("trun: error: ")
            or err.count("\n") != 1 or message not in err):
        fail("trun --data %s: expected exit 1 and one line with %r, got "
             "exit %d: %r" % (",".join(data), message, result.returncode, err))


def main():
    global TRUN, STEP
    if len(sys.argv) != 4:
        fail(__doc__)
    TRUN, STEP, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    path = lambda name: os.path.join(work, name)

    x, y = synthetic(N_TRAIN, 1)
    tx, ty = synthetic(N_TEST, 2)
    if y.dtype != np.int64:
        fail("numpy's default integer is %s, not int64" % y.dtype)

    # 1. .npy from np.save against IDX.
    for name, array in [("x", x), ("tx", tx)]:
        write_idx(path(name + ".idx"), array)
        np.save(path(name + ".npy"), array)
    for name, array in [("y", y), ("ty", ty)]:
        write_idx(path(name + ".idx"), array.astype(np.uint8))
        np.save(path(name + ".npy"), array)
    idx = results(train([path("x.idx"), path("y.idx")],
                        [path("tx.idx"), path("ty.idx")]))
    npy = results(train([path("x.npy"), path("y.npy")],
                        [path("tx.npy"), path("ty.npy")]))
    if npy != idx:
        fail("np.save data trains differently from IDX:\n%s\nvs\n%s" %
             ("\n".join(npy), "\n".join(idx)))
    accuracy = float(re.search(r"test accuracy: (\S+)", "\n".join(npy))[1])
    if accuracy < 0.95:
        fail("test accuracy %g < 0.95" % accuracy)

    # 2. Other versions, [N, 784], every integer label dtype.
    for version in [(2, 0), (3, 0)]:
        save_version(path("xv.npy"), x, version)
        save_version(path("yv.npy"), y, version)
        with open(path("xv.npy"), "rb") as f:
            if f.read(8)[6] != version[0]:
                fail("numpy did not write version %s" % (version,))
        got = results(train([path("xv.npy"), path("yv.npy")],
                            [path("tx.npy"), path("ty.npy")]))
        if got != idx:
            fail("version %s trains differently" % (version,))
    np.save(path("xflat.npy"), x.reshape(N_TRAIN, 784))
    for dtype in ["u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8"]:
        np.save(path("yd.npy"), y.astype(dtype))
        got = results(train([path("xflat.npy"), path("yd.npy")],
                            [path("tx.npy"), path("ty.npy")]))
        if got != idx:
            fail("[N, 784] images with %s labels train differently" % dtype)

    # 3. float32 images, fed as stored.
    np.save(path("xf.npy"), (x / 255.0).astype(np.float32))
    np.save(path("txf.npy"), (tx / 255.0).astype(np.float32))
    out = train([path("xf.npy"), path("y.npy")],
                [path("txf.npy"), path("ty.npy")])
    for line in ["normalization: none (float32 images)",
                 "images: float32 from %s, fed as stored (no normalization)" %
                 path("xf.npy"),
                 "images: float32 from %s, fed as stored (no normalization)" %
                 path("txf.npy")]:
        if line + "\n" not in out:
            fail("float32 run lacks %r:\n%s" % (line, out))
    accuracy = float(re.search(r"test accuracy: (\S+)", out)[1])
    if accuracy < 0.9:
        fail("float32 test accuracy %g < 0.9" % accuracy)

    # 4. Refused arrays.
    fortran = np.asfortranarray(x)
    np.save(path("fortran.npy"), fortran)
    with open(path("fortran.npy"), "rb") as f:
        if b"'fortran_order': True" not in f.read(128):
            fail("numpy did not write a Fortran-order header")
    expect_error([path("fortran.npy"), path("y.npy")],
                 path("fortran.npy") + ": Fortran-order arrays are not "
                 "supported; save with np.ascontiguousarray")
    np.save(path("big.npy"), (x / 255.0).astype(">f4"))
    expect_error([path("big.npy"), path("y.npy")],
                 path("big.npy") + ": big-endian data ('>f4') is not "
                 "supported")
    np.save(path("bigy.npy"), y.astype(">i8"))
    expect_error([path("x.npy"), path("bigy.npy")],
                 path("bigy.npy") + ": big-endian data ('>i8') is not "
                 "supported")
    np.save(path("f64.npy"), x / 255.0)
    expect_error([path("f64.npy"), path("y.npy")],
                 path("f64.npy") + ": unsupported dtype '<f8' (float64)")
    nan = (x / 255.0).astype(np.float32)
    nan[3, 2, 1] = np.nan
    np.save(path("nan.npy"), nan)
    expect_error([path("nan.npy"), path("y.npy")],
                 path("nan.npy") + ": value %d (sample 3, element 57) is nan" %
                 (3 * 784 + 57))
    bad = y.copy()
    bad[7] = -1
    np.save(path("neg.npy"), bad)
    expect_error([path("x.npy"), path("neg.npy")],
                 path("neg.npy") + ": label -1 at index 7 is out of range")
    np.save(path("col.npy"), y.reshape(-1, 1))
    expect_error([path("x.npy"), path("col.npy")],
                 path("col.npy") + ": labels have shape (600, 1); expected "
                 "(count,)")
    print("OK: .npy files from numpy %s read as expected" % np.__version__)


if __name__ == "__main__":
    main()
