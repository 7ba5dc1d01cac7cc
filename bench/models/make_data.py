#!/usr/bin/env python3
"""Random training data for one model of bench/models, in the formats trun
reads, from the model's meta.json (prepare.py writes it):

  image / segment   images.npy (N, 3, H, W) float32 N(0, 1) and labels.npy
                    (N,) or (N, H, W) int32 class ids: trun --data
                    images=images.npy,labels=labels.npy (named arrays: the
                    step's inputs are `images` and `labels`)
  tokens            tokens.bin: a token shard (llm.c / tcc-data format: a
                    256 x int32 header, magic 20240520, version 1, count;
                    then uint16 ids < vocab): trun --data tokens.bin

Throughput does not depend on the values, so random data is enough. Made
where it is used (the GPU machine: ResNet-50's 256 images are 154 MB, over
what the device tool carries) and only when missing.

    make_data.py MODEL_DIR [--batches N] [--seed S]

Prints the trun --data argument.
"""
import argparse
import json
import os

import numpy as np


def token_shard(path, n, vocab, rng):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, n
    tokens = rng.integers(0, vocab, size=n, dtype=np.uint16)
    with open(path + ".tmp", "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())
    os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("--batches", type=int, default=4,
                   help="samples: this many batches (default 4)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    with open(os.path.join(a.model_dir, "meta.json")) as f:
        meta = json.load(f)
    cfg, kind = meta["config"], meta["kind"]
    rng = np.random.default_rng(a.seed)
    n = cfg["batch"] * a.batches
    d = a.model_dir
    if kind == "tokens":
        path = os.path.join(d, "tokens.bin")
        # trun draws windows of context + 1 tokens at random offsets.
        count = n * (cfg["context"] + 1)
        if not os.path.exists(path):
            token_shard(path, count, cfg["vocab"], rng)
        print(path)
        return
    images, labels = os.path.join(d, "images.npy"), os.path.join(d, "labels.npy")
    if not (os.path.exists(images) and os.path.exists(labels)):
        H = cfg["image"]
        np.save(images, rng.standard_normal((n, 3, H, H), dtype=np.float32))
        shape = (n,) if kind == "image" else (n, H, H)
        np.save(labels, rng.integers(0, cfg["classes"], size=shape, dtype=np.int32))
    print(f"images={images},labels={labels}")


if __name__ == "__main__":
    main()
