#!/usr/bin/env python3
"""Data of the GPU vision check: N images (N, 3, 16, 16) f32, uniform in
[-1, 1], and labels (N,) int32 from a fixed random teacher on the 4x4
block means of each channel (argmax of 10 projections of those 48
features): local averages a small CNN can learn.

    make_data.py OUT_DIR [N] [SEED]
"""
import os
import sys

import numpy as np


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 3, 16, 16)).astype(np.float32)
    teacher = rng.normal(size=(3 * 4 * 4, 10))
    blocks = x.astype(np.float64).reshape(n, 3, 4, 4, 4, 4).mean(axis=(3, 5)).reshape(n, -1)
    y = np.argmax(blocks @ teacher, axis=1).astype(np.int32)
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "y.npy"), y)
    print(f"{n} images, label counts {np.bincount(y, minlength=10).tolist()}")


if __name__ == "__main__":
    main()
