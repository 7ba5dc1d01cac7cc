"""Readers for the files trun and tcc-data write, with numpy only (Debian
has no safetensors package): safetensors weights and token shards."""

import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16,
           "I32": np.int32, "I64": np.int64, "U16": np.uint16, "U8": np.uint8,
           "BF16": np.uint16}  # numpy has no bfloat16: widened below


def _bf16_to_f32(bits):
    """bfloat16 is the top half of a float32: shift the bits back up."""
    return (bits.astype(np.uint32) << 16).view(np.float32)

SHARD_MAGIC = 20240520
SHARD_VERSION = 1


def safetensors_dtypes(path):
    """{name: dtype as stored ("F32", "BF16", ...)} from the header."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len).decode("utf-8"))
    header.pop("__metadata__", None)
    return {name: info["dtype"] for name, info in header.items()}


def read_safetensors(path):
    """Returns ({name: array}, metadata); BF16 tensors come back as
    float32 (exactly: every bfloat16 is a float32)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (header_len,) = struct.unpack("<Q", data[:8])
    if 8 + header_len > len(data):
        raise ValueError(f"{path}: header length {header_len} past the end")
    header = json.loads(data[8:8 + header_len].decode("utf-8"))
    body = memoryview(data)[8 + header_len:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        dtype = _DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        array = np.frombuffer(body[begin:end], dtype=dtype)
        if array.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name}: {array.size} values "
                             f"for shape {shape}")
        if info["dtype"] == "BF16":
            array = _bf16_to_f32(array)
        tensors[name] = array.reshape(shape).copy()
    return tensors, metadata


def read_shard(path):
    """Token shard: 256 x int32 header (magic, version, count), uint16 tokens."""
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype="<i4")
        if header[0] != SHARD_MAGIC or header[1] != SHARD_VERSION:
            raise ValueError(f"{path}: not a token shard (magic {header[0]}, "
                             f"version {header[1]})")
        tokens = np.frombuffer(f.read(), dtype="<u2")
    if tokens.size != header[2]:
        raise ValueError(f"{path}: header says {header[2]} tokens, "
                         f"file has {tokens.size}")
    return tokens
