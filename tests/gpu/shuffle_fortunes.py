#!/usr/bin/env python3
"""Debian's fortunes with the fortunes in a seeded random order, as one text
file: the AMP checks train with --data-order sequential (so PyTorch can feed
the same batches), and the files in their own order make each stretch of
batches one file's style (ASCII art, then limericks...), whose loss jumps
from one to the next. Shuffled, every batch mixes them, as trun's random
windows do. Same characters, so the same 113-character vocabulary.

    shuffle_fortunes.py FORTUNES_DIR OUT.txt [--seed 0]

Reads the regular files of FORTUNES_DIR except *.dat (symbolic links
skipped), in byte order of their names, as prepare.sh tokenizes them;
fortunes are separated by lines holding only '%'.
"""
import argparse
import os
import random
import re


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    fortunes = []
    for name in sorted(os.listdir(a.dir)):
        path = os.path.join(a.dir, name)
        if name.endswith(".dat") or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read()
        for piece in re.split(rb"(?m)^%\n", text):
            if piece.strip():
                fortunes.append(piece if piece.endswith(b"\n") else piece + b"\n")
    if not fortunes:
        raise SystemExit(f"shuffle_fortunes.py: no fortunes in {a.dir}")
    random.Random(a.seed).shuffle(fortunes)  # the same order on any Python 3
    with open(a.out, "wb") as f:
        f.write(b"%\n".join(fortunes))
    print(f"{len(fortunes)} fortunes shuffled (seed {a.seed}) into {a.out}")


if __name__ == "__main__":
    main()
