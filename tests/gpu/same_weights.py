#!/usr/bin/env python3
"""Checks that two weight files (trun --save-weights) hold the same tensors
bit for bit: e.g. the initial weights trun writes for one model compiled
with --precision fp32 and with --precision bf16 (same --seed): the fp32
master weights must not depend on the precision of the products.

    same_weights.py NAME A.safetensors B.safetensors

Prints one line, PASS or FAIL with the first difference; exit 1 on FAIL.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "parity"))
import tcc_files  # noqa: E402


def difference(a, b):
    """None if the two {name: array} are identical, else what differs."""
    if set(a) != set(b):
        return (f"tensor names differ: only in A {sorted(set(a) - set(b))[:5]}, "
                f"only in B {sorted(set(b) - set(a))[:5]}")
    for name in sorted(a):
        x, y = a[name], b[name]
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"{name}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
        # Bits, not values: NaN == NaN, and -0 != +0.
        if x.tobytes() != y.tobytes():
            diff = np.flatnonzero(x.reshape(-1).view(np.uint8) != y.reshape(-1).view(np.uint8))
            i = diff[0] // x.itemsize
            return (f"{name}: element {i} differs ({x.reshape(-1)[i]!r} vs "
                    f"{y.reshape(-1)[i]!r})")
    return None


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: same_weights.py NAME A.safetensors B.safetensors")
    name, pa, pb = sys.argv[1:]
    try:
        a, _ = tcc_files.read_safetensors(pa)
        b, _ = tcc_files.read_safetensors(pb)
    except (OSError, ValueError, KeyError) as e:
        print(f"{name}: FAIL: {e}")
        return 1
    # read_safetensors widens BF16 to float32: compare the stored types too.
    stored_a, stored_b = tcc_files.safetensors_dtypes(pa), tcc_files.safetensors_dtypes(pb)
    diff = next((f"{n}: stored as {stored_a[n]} vs {stored_b.get(n)}" for n in sorted(stored_a)
                 if stored_a[n] != stored_b.get(n)), None) or difference(a, b)
    count = sum(x.size for x in a.values())
    dtypes = sorted(set(stored_a.values()))
    if diff:
        print(f"{name}: FAIL: {diff}")
        return 1
    print(f"{name}: {len(a)} tensors, {count:,} values ({'/'.join(dtypes)}), "
          f"bit-identical: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
