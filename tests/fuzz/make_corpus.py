#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets: tests/fuzz/corpus/<target>/.

Each seed is a small VALID file of the format the target parses, so the
fuzzers start from inputs that reach deep into the parsers. Deterministic:
running it again rewrites the same bytes (gzip with mtime 0).

    /usr/bin/python3 tests/fuzz/make_corpus.py [OUT_DIR]

OUT_DIR defaults to tests/fuzz/corpus beside this script. Needs numpy
(the .npy seeds are written by numpy.save).
"""
import gzip
import json
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(array):
    import io
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def npy(out):
    rng = np.random.default_rng(36)
    write(out, "fuzz_npy", "images_u8.npy",
          npy_bytes(rng.integers(0, 256, (4, 3, 3), dtype=np.uint8)))
    write(out, "fuzz_npy", "images_f32.npy",
          npy_bytes(rng.standard_normal((2, 4)).astype("<f4")))
    write(out, "fuzz_npy", "labels_i64.npy",
          npy_bytes(np.array([0, 1, 9, 3], dtype="<i8")))
    write(out, "fuzz_npy", "labels_u2.npy",
          npy_bytes(np.array([7, 255], dtype="<u2")))
    write(out, "fuzz_npy", "array_f2.npy",
          npy_bytes(np.arange(6, dtype="<f2").reshape(2, 3)))
    write(out, "fuzz_npy", "array_bool.npy",
          npy_bytes(np.array([True, False, True])))
    write(out, "fuzz_npy", "scalar_f8.npy", npy_bytes(np.array(2.5)))
    # Version 2.0 (uint32 header length), as numpy writes for big headers.
    import io
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(3, dtype="<i4"), version=(2, 0))
    write(out, "fuzz_npy", "v2_i4.npy", buf.getvalue())


def safetensors_bytes(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)], as docs/runtime.md
    "Weights (safetensors)" describes: 8-byte LE header size, JSON header
    padded with spaces to 8-byte alignment, then the data."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def safetensors(out):
    w = np.arange(6, dtype="<f4").reshape(2, 3)
    b = np.array([0.5, -1.0], dtype="<f4")
    write(out, "fuzz_safetensors", "two_f32.safetensors",
          safetensors_bytes([("fc.weight", "F32", [2, 3], w.tobytes()),
                             ("fc.bias", "F32", [2], b.tobytes())],
                            {"format": "pt"}))
    data = np.arange(4, dtype="<u2").tobytes() + np.array([1, 2], "<i8").tobytes()
    crc = __import__("zlib").crc32(data)
    write(out, "fuzz_safetensors", "bf16_i64_crc.safetensors",
          safetensors_bytes([("a", "BF16", [4], data[:8]),
                             ("b", "I64", [2], data[8:])],
                            {"tcc_data_crc32": str(crc)}))
    write(out, "fuzz_safetensors", "scalar_and_empty.safetensors",
          safetensors_bytes([("s", "F64", [], np.array(1.5, "<f8").tobytes()),
                             ("e", "U8", [0, 4], b"")]))
    write(out, "fuzz_safetensors", "empty.safetensors", safetensors_bytes([]))


def idx_bytes(magic, dims, values):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + bytes(values)


def idx(out):
    images = idx_bytes(0x803, [2, 3, 4], range(24))
    labels = idx_bytes(0x801, [5], [3, 1, 4, 1, 5])
    write(out, "fuzz_idx", "images.idx", images)
    write(out, "fuzz_idx", "labels.idx", labels)
    write(out, "fuzz_idx", "images.idx.gz", gzip.compress(images, mtime=0))
    write(out, "fuzz_idx", "labels.idx.gz", gzip.compress(labels, mtime=0))
    write(out, "fuzz_idx", "rank4.idx", idx_bytes(0x804, [1, 2, 1, 2], [9, 8, 7, 6]))


def token_shard(tokens):
    """docs/runtime.md "Token data": 256 LE int32 header (magic 20240520,
    version 1, token count), then the tokens as LE uint16."""
    header = struct.pack("<3i", 20240520, 1, len(tokens)) + b"\0" * (1024 - 12)
    return header + struct.pack("<%dH" % len(tokens), *tokens)


def shards(out):
    write(out, "fuzz_token_shard", "small.bin", token_shard([0, 1, 2, 65, 10, 255, 300, 65535]))
    write(out, "fuzz_token_shard", "empty.bin", token_shard([]))
    write(out, "fuzz_token_shard", "text.bin", token_shard(list(b"hello, fuzzer\n")))


def vocab(out):
    chars = sorted(set("\n !,.?abcdefghijklmnopqrstuvwxyzT\u00e9\u4e2d\U0001f600"))
    write(out, "fuzz_vocab", "char_vocab.json", json.dumps(
        {"format": "tcc-vocab", "version": 1, "level": "char",
         "vocab_size": len(chars), "tokens": chars}, sort_keys=True).encode() + b"\n")
    write(out, "fuzz_vocab", "byte_vocab.json", json.dumps(
        {"format": "tcc-vocab", "version": 1, "level": "byte",
         "vocab_size": 256}, sort_keys=True).encode() + b"\n")


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def state_json(step):
    """state.json as EncodeState (runtime/trun/checkpoint/CheckpointState.cpp)
    writes it for a small MLP trained with adamw: the fingerprint is FNV-1a 64
    of the interface lines, each ended by a newline."""
    lines = [
        "abi_version 3",
        'model "mlp"',
        'optimizer "adamw"',
        "lr_schedule kind=0 base_lr=0.001 warmup_steps=0 decay_steps=0 min_lr=0",
        "micro_batches 1",
        'param "fc1.weight" f32[16,8] init=normal scale=0.10000000000000001 seed=1 trainable=1',
        'param "fc1.bias" f32[16] init=zeros scale=0 seed=2 trainable=1',
        'optimizer_state "fc1.weight.m" f32[16,8] init=zeros scale=0 seed=0 trainable=0',
        'optimizer_state "step" i64[] init=zeros scale=0 seed=0 trainable=0',
        'input "x" f32[4,8]',
        'input "y" i64[4]',
        'output "loss" f32[]',
    ]
    state = {
        "format": "tcc-checkpoint", "version": 1, "step": step,
        "data_cursor": 12, "seed": "18446744073709551615",
        "data_order": "shuffle", "base_learning_rate": 0.001,
        "total_steps": 100, "data": "data/train.npy", "model": "mlp",
        "optimizer": "adamw", "fingerprint": fnv1a64("".join(l + "\n" for l in lines).encode()),
        "interface": lines,
        "params": [{"name": "fc1.weight", "dtype": "f32", "shape": [16, 8]},
                   {"name": "fc1.bias", "dtype": "f32", "shape": [16]}],
        "optimizer_state": [{"name": "fc1.weight.m", "dtype": "f32", "shape": [16, 8]},
                            {"name": "step", "dtype": "i64", "shape": []}],
        "files": {"model.safetensors": {"bytes": 1234, "crc32": 305419896},
                  "optimizer.safetensors": {"bytes": 5678, "crc32": 4294967295}},
        "written_at": "2025-01-01T00:00:00Z",
    }
    return json.dumps(state, indent=2).encode() + b"\n"


def checkpoint(out):
    # fuzz_checkpoint_state.cpp calls ReadState with step 3.
    write(out, "fuzz_checkpoint_state", "state_step3.json", state_json(3))
    empty = json.loads(state_json(3))
    empty.update(interface=[], params=[], optimizer_state=[], fingerprint=fnv1a64(b""))
    write(out, "fuzz_checkpoint_state", "state_empty.json",
          json.dumps(empty, separators=(",", ":")).encode())


def split_files(test):
    """The files of a lit test's split-file sections ("//--- NAME")."""
    files, name = {}, None
    for line in open(test, encoding="utf-8"):
        if line.startswith("//--- "):
            name = line[6:].strip()
            files[name] = ""
        elif name is not None:
            files[name] += line
    return files


def model(out):
    """The sample MLP, the first model of a few tests/lit/import tests, and
    binary encodings (protoc --encode) of two of them."""
    seeds = {"mlp.pbtxt": open(os.path.join(REPO, "samples/mlp/mlp.pbtxt"), "rb").read()}
    for test in ["elementwise", "vision", "training", "constants", "torch",
                 "batch-norm", "structural"]:
        files = split_files(os.path.join(REPO, "tests/lit/import", test + ".test"))
        name = next(n for n in files if n.endswith(".pbtxt"))
        seeds["%s_%s" % (test, name)] = files[name].encode()
    for name, data in seeds.items():
        write(out, "fuzz_model", name, data)
    protoc = shutil.which("protoc")
    if protoc:
        import subprocess
        for name in ["mlp.pbtxt", "training_" + next(
                n for n in split_files(os.path.join(REPO, "tests/lit/import/training.test"))
                if n.endswith(".pbtxt"))]:
            binary = subprocess.run(
                [protoc, "--encode=tcc.model.Model",
                 "-I" + os.path.join(REPO, "frontend/proto"), "tcc_model.proto"],
                input=seeds[name], stdout=subprocess.PIPE, check=True).stdout
            write(out, "fuzz_model", name.replace(".pbtxt", ".pb"), binary)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    for t in ["fuzz_npy", "fuzz_safetensors", "fuzz_idx", "fuzz_token_shard",
              "fuzz_vocab", "fuzz_checkpoint_state", "fuzz_model"]:
        shutil.rmtree(os.path.join(out, t), ignore_errors=True)
        os.makedirs(os.path.join(out, t))
    npy(out)
    safetensors(out)
    idx(out)
    shards(out)
    vocab(out)
    checkpoint(out)
    model(out)


if __name__ == "__main__":
    main()
