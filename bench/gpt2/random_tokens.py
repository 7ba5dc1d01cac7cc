#!/usr/bin/env python3
"""A token shard of N uniformly random GPT-2 token ids (< 50257) in the
llm.c / trun format (256 int32 header: magic 20240520, version 1, count;
then uint16 tokens). Throughput does not depend on the text, so the
benchmark needs no tokenizer or dataset on the device machine.

    random_tokens.py OUT.bin N [--seed S] [--vocab V]
"""
import argparse

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("n", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", type=int, default=50257, help="ids < V (default GPT-2's 50257)")
    a = p.parse_args()
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, a.n
    tokens = np.random.default_rng(a.seed).integers(0, a.vocab, size=a.n, dtype=np.uint16)
    with open(a.out, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


if __name__ == "__main__":
    main()
