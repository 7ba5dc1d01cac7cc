#!/usr/bin/env python3
"""trun and tcc-data checked against independent numpy implementations.

  1. tcc-data tokenize --level char: the shards and vocab.json match a
     tokenization done here (sorted distinct characters).
  2. Weights written here with numpy (safetensors, by hand) are loaded by
     trun --init-from; trun trains the bigram fixture step 20 steps on
     sequential windows and saves with --save-weights.
  3. The saved file is parsed here (header, metadata, dtype, shape, offsets)
     and its weights match the same 20 SGD steps replayed in numpy on the
     windows docs/runtime.md specifies; trun's "val loss" matches numpy's.
  4. Greedy sampling matches a greedy bigram chain computed here.

usage: safetensors_numpy_interop.py TRUN TCC_DATA BIGRAM_STEP WORKDIR
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

B, T, V = 8, 16, 256  # fixtures/bigram_step.c
LR = 5.0
STEPS = 20
EVAL_BATCHES = 3


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(args), result.returncode,
                                   result.stderr))
    return result.stdout


def read_shard(path):
    header = np.fromfile(path, dtype="<i4", count=256)
    tokens = np.fromfile(path, dtype="<u2", offset=1024)
    if header[0] != 20240520 or header[1] != 1 or header[2] != len(tokens):
        fail("%s: bad header %s for %d tokens" % (path, header[:3], len(tokens)))
    if np.any(header[3:]):
        fail("%s: header padding is not zero" % path)
    return tokens.astype(np.int64)


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    offset, blobs = 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    if size % 8:
        fail("header size %d is not a multiple of 8" % size)
    header = json.loads(raw[8:8 + size])
    data = raw[8 + size:]
    tensors, covered = {}, []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        if entry["dtype"] != "F32":
            fail("%s: dtype %s" % (name, entry["dtype"]))
        array = np.frombuffer(data[begin:end], dtype="<f4")
        tensors[name] = array.reshape(entry["shape"])
        covered.append((begin, end))
    covered.sort()
    position = 0
    for begin, end in covered:
        if begin != position:
            fail("data offsets leave a gap or overlap at %d" % begin)
        position = end
    if position != len(data):
        fail("data section has %d bytes, tensors cover %d" % (len(data), position))
    return header.get("__metadata__", {}), tensors


def windows(tokens):
    """Aligned windows of T+1 tokens at offsets 0, T, 2T, ..."""
    count = (len(tokens) - 1) // T
    return np.stack([tokens[w * T:w * T + T + 1] for w in range(count)])


def batch(wins, k):
    """Sequential batch k: windows (k mod S) * B .. + B - 1."""
    per_epoch = len(wins) // B
    rows = wins[(k % per_epoch) * B:(k % per_epoch) * B + B]
    return rows[:, :T], rows[:, 1:]


def probabilities(table, bias, tokens):
    z = (table[tokens] + bias).astype(np.float64)  # (B, T, V)
    z -= z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def loss(table, bias, tokens, targets):
    p = probabilities(table, bias, tokens)
    picked = np.take_along_axis(p, targets[..., None], axis=-1)[..., 0]
    return float(np.mean(-np.log(picked)))


def main():
    trun, tcc_data, step, work = sys.argv[1:5]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # 1. Text from a fixed LCG over a few words, tokenized by tcc-data.
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran",
             "caf\u00e9", "na\u00efve", "\u20ac5"]
    state, parts = 12345, []
    for _ in range(3000):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        parts.append(words[(state >> 33) % len(words)])
        parts.append("\n" if (state >> 20) % 7 == 0 else " ")
    text = "".join(parts)
    with open(os.path.join(work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    prefix = os.path.join(work, "t")
    run([tcc_data, "tokenize", "--level", "char", "--val-fraction", "0.2",
         "-o", prefix, os.path.join(work, "text.txt")])
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.int64)
    n_val = int(len(ids) * 0.2)
    train, val = read_shard(prefix + "_train.bin"), read_shard(prefix + "_val.bin")
    if not np.array_equal(train, ids[:len(ids) - n_val]) or \
            not np.array_equal(val, ids[len(ids) - n_val:]):
        fail("tcc-data shards differ from numpy's tokenization")
    with open(prefix + "_vocab.json", encoding="utf-8") as f:
        vocab = json.load(f)
    if vocab != {"format": "tcc-vocab", "version": 1, "level": "char",
                 "vocab_size": len(chars), "tokens": chars}:
        fail("vocab.json differs: %s" % vocab)

    # 2. Start weights written here; trun trains on sequential windows.
    rng = np.random.default_rng(7)
    table0 = (rng.standard_normal((V, V)) * 0.1).astype(np.float32)
    bias0 = (rng.standard_normal(V) * 0.1).astype(np.float32)
    start = os.path.join(work, "start.safetensors")
    write_safetensors(start, {"bias": bias0, "table": table0}, {"by": "numpy"})
    saved = os.path.join(work, "trained.safetensors")
    out = run([trun, step, "--data", prefix + "_train.bin", "--val",
               prefix + "_val.bin", "--data-order", "sequential", "--steps",
               str(STEPS), "--lr", str(LR), "--eval-batches",
               str(EVAL_BATCHES), "--init-from", start, "--save-weights",
               saved, "--log-every", "0"])
    match = re.search(r"val loss: ([0-9.]+) \(step %d\)" % STEPS, out)
    if not match:
        fail("no final val loss in trun's output:\n" + out)
    trun_val_loss = float(match.group(1))

    # 3. The file, parsed here, holds the weights numpy's replay computes.
    metadata, tensors = read_safetensors(saved)
    if metadata.get("model") != "bigram":
        fail("metadata %s has no model 'bigram'" % metadata)
    if sorted(tensors) != ["bias", "table"] or tensors["table"].shape != (V, V):
        fail("unexpected tensors %s" % {k: v.shape for k, v in tensors.items()})
    table, bias = table0.astype(np.float64), bias0.astype(np.float64)
    train_windows = windows(train)
    for k in range(STEPS):
        tokens, targets = batch(train_windows, k)
        d = probabilities(table, bias, tokens)
        np.put_along_axis(d, targets[..., None],
                          np.take_along_axis(d, targets[..., None], -1) - 1, -1)
        d *= LR / (B * T)
        np.add.at(table, tokens.reshape(-1), -d.reshape(-1, V))
        bias -= d.reshape(-1, V).sum(axis=0)
    for name, expected in (("table", table), ("bias", bias)):
        error = np.max(np.abs(tensors[name] - expected))
        if error > 1e-4:
            fail("%s differs from the numpy replay by %g" % (name, error))
    val_windows = windows(val)
    batches = min(EVAL_BATCHES, len(val_windows) // B)
    numpy_val_loss = np.mean([loss(tensors["table"], tensors["bias"],
                                   *batch(val_windows, k))
                              for k in range(batches)])
    if abs(numpy_val_loss - trun_val_loss) > 2e-5 * max(1, numpy_val_loss):
        fail("val loss: trun %.6f, numpy %.6f" % (trun_val_loss, numpy_val_loss))

    # 4. Greedy sampling = the greedy bigram chain.
    out = run([trun, step, "--init-from", saved, "--sample", "12",
               "--temperature", "0", "--prompt", "the", "--vocab",
               prefix + "_vocab.json"])
    w = tensors["table"] + tensors["bias"]
    current, expected = chars.index("e"), "the"
    for _ in range(12):
        current = int(np.argmax(w[current, :len(chars)]))
        expected += chars[current]
    if "\n" + expected + "\n" not in "\n" + out.split("seed 0\n", 1)[-1]:
        fail("sample %r, numpy's greedy chain %r" % (out, expected))
    print("OK: shards, vocab, safetensors both ways, %d sequential SGD steps, "
          "val loss %.6f, greedy sample %r" % (STEPS, trun_val_loss, expected))


if __name__ == "__main__":
    main()
