#!/usr/bin/env python3
"""The first N Fashion-MNIST training images and labels as .npy (uint8
[N, 28, 28] and [N]): a small copy of the data for the device machine.

    idx_subset.py DATASET_DIR N OUT_DIR
"""
import gzip
import os
import sys

import numpy as np


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    src, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    images = read_idx(os.path.join(src, "train-images-idx3-ubyte.gz"))[:n]
    labels = read_idx(os.path.join(src, "train-labels-idx1-ubyte.gz"))[:n]
    np.save(os.path.join(out, "mnist_images.npy"), np.ascontiguousarray(images))
    np.save(os.path.join(out, "mnist_labels.npy"), np.ascontiguousarray(labels))


if __name__ == "__main__":
    main()
