#!/usr/bin/python3
"""rounding_envelope's checks on a training run small enough to write in
numpy: softmax regression by gradient descent, in float64 and in float32
with the rows in several orders (the references), and "tcc" played by
other float32 runs.

  * an honest float32 run (rows in yet another order, and one in float32
    with the sums done pairwise by numpy's other path: float32 einsum)
    passes, at every step and for the weights;
  * a run with a real bug of the size the parity tests must catch (the
    learning rate 1e-3 off, or a biased variance's 1/(n-1) on one input
    feature) fails;
  * a run whose float32 spread has grown past MAX_TOLERANCE (a learning
    rate where descent is chaotic) is reported as too ill-conditioned to
    check, not passed.

usage: rounding_envelope_test.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rounding_envelope as R  # noqa: E402


def data(n=256, d=24, classes=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) * 1.3 + 0.2
    teacher = rng.standard_normal((d, classes))
    y = (x @ teacher + 0.8 * rng.standard_normal((n, classes))).argmax(1)
    return x, y


def train(x, y, dtype, perm=None, steps=60, lr=0.5, einsum=False, scale=None):
    """Full-batch gradient descent on softmax regression; losses and W."""
    if perm is not None:
        x, y = x[perm], y[perm]
    x = x.astype(dtype)
    if scale is not None:
        x = x * np.asarray(scale, dtype)
    n, d = x.shape
    w = (np.random.default_rng(1).standard_normal((d, 5)) * 0.1).astype(dtype)
    lr = dtype(lr)
    losses = []
    for _ in range(steps):
        z = np.einsum("nd,dc->nc", x, w) if einsum else x @ w
        z = z - z.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        losses.append(float(-np.log(p[np.arange(n), y]).mean(dtype=dtype)))
        p[np.arange(n), y] -= 1
        g = (np.einsum("nd,nc->dc", x, p) if einsum else x.T @ p) / dtype(n)
        w = w - lr * g
    return losses, {"w": w.astype(np.float64)}


def check(label, got, refs, expect_pass, expect_text=None):
    runs, exact = refs
    failures = R.check_losses(label, got[0], exact[0], [r[0] for r in runs])
    failures += R.check_tensors(label, got[1], exact[1], [r[1] for r in runs], "weight")
    ok = not failures if expect_pass else bool(failures)
    if ok and expect_text:
        ok = any(expect_text in f for f in failures)
    print(f"{'ok' if ok else 'WRONG'}: {label}: "
          f"{'passed' if not failures else failures[0]}")
    return ok


def main():
    x, y = data()
    perms = R.permutations(len(x), 4)

    def refs(**kw):
        runs = [train(x, y, np.float32, **kw)] + \
            [train(x, y, np.float32, p, **kw) for p in perms[:3]]
        return runs, train(x, y, np.float64, **kw)

    good = refs()
    results = [
        check("honest float32, rows reordered", train(x, y, np.float32, perms[3]), good, True),
        check("honest float32, einsum sums", train(x, y, np.float32, einsum=True), good, True),
        check("learning rate 1e-3 off", train(x, y, np.float32, lr=0.5 * (1 + 1e-3)),
              good, False),
        check("one feature scaled by n/(n-1), n = 256",
              train(x, y, np.float32, scale=[1.0] * 23 + [256 / 255]), good, False),
    ]
    # Chaotic: a learning rate far past the stable one.
    results.append(check("chaotic descent", train(x, y, np.float32, perms[3], lr=50.0),
                         refs(lr=50.0), False, "ill-conditioned"))
    if all(results):
        print("PASS")
        return 0
    print("FAIL")
    return 1


if __name__ == "__main__":
    sys.exit(main())
