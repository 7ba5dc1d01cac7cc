"""Safetensors files with numpy only (the `safetensors` package need not be
installed): what trun --init-from reads and --save-weights writes.

    from tcc import safetensors
    safetensors.save_file({"fc1.weight": w, "fc1.bias": b}, "w.safetensors",
                          metadata={"format": "pt"})
    tensors = safetensors.load_file("w.safetensors")   # name -> np.ndarray
    tensors, metadata = safetensors.load_file_with_metadata("w.safetensors")
    safetensors.save_state_dict(module.state_dict(), "w.safetensors")

The format (https://github.com/huggingface/safetensors): an 8-byte
little-endian header size N, N bytes of JSON ({"NAME": {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {str: str}}, padded with
spaces so the data starts 8-byte aligned), then the tensors' little-endian,
row-major bytes, tiling the data section exactly.

numpy has no bfloat16: BF16 tensors are read as float32 (exact), and
written from torch.bfloat16 tensors or from `Bf16(uint16_bits_array)`.
Errors are `SafetensorsError` (a ValueError) naming the file and tensor.
"""

import json
import os
import struct
import zlib
from typing import Dict, Mapping, Optional, Tuple

import numpy as np

__all__ = ["Bf16", "SafetensorsError", "load_file", "load_file_with_metadata",
           "save_file", "save_state_dict"]

# safetensors dtype <-> numpy dtype (little-endian).
_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"), "U64": np.dtype("<u8"), "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_MAX_HEADER = 100_000_000  # the reference implementation's limit


class SafetensorsError(ValueError):
    """A file that is not valid safetensors, or a tensor it cannot hold."""


class Bf16:
    """A bfloat16 tensor to write, given as its raw uint16 bits."""

    def __init__(self, bits):
        bits = np.array(bits, order="C")  # a copy, C-contiguous, any rank
        if bits.dtype.kind not in "iu" or bits.dtype.itemsize != 2:
            raise SafetensorsError(f"Bf16 needs 16-bit integer bits, got {bits.dtype}")
        self.bits = bits.view("<u2")  # the same bits (a view, not a cast)


def _dtype_name(array: np.ndarray, name: str, path: str) -> str:
    for tag, dtype in _DTYPES.items():  # any byte order: written little-endian
        if (array.dtype.kind, array.dtype.itemsize) == (dtype.kind, dtype.itemsize):
            return tag
    raise SafetensorsError(f"{path}: tensor {name!r} has dtype {array.dtype}, "
                           "which safetensors cannot hold")


def _as_array(value, name: str, path: str):
    """(tag, little-endian C-contiguous array) of a numpy array, a Bf16 or a
    torch tensor (torch need not be installed for the others)."""
    if isinstance(value, Bf16):
        return "BF16", value.bits
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            import torch  # only here: a torch tensor implies torch
            return "BF16", Bf16(value.contiguous().view(torch.int16).numpy()).bits
        value = value.numpy()
    array = np.asarray(value)
    tag = _dtype_name(array, name, path)
    # astype, not ascontiguousarray, which makes a scalar 1-D.
    return tag, array.astype(_DTYPES[tag], order="C", copy=False)


def save_file(tensors: Mapping[str, object], path: str,
              metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes `tensors` (name -> numpy array, torch tensor or Bf16) in the
    given order, with `metadata` (str -> str) as __metadata__."""
    path = os.fspath(path)
    header, blobs, offset = {}, [], 0
    if metadata:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise SafetensorsError(f"{path}: metadata {key!r}: {value!r} "
                                       "must map strings to strings")
        header["__metadata__"] = dict(metadata)
    # A checksum copied from the file these tensors were read from would
    # not describe them (tcc.lora.merge keeps the metadata): trun checks
    # tcc_data_crc32 (runtime/trun/io/Safetensors.cpp), so it is recomputed.
    checksummed = "tcc_data_crc32" in header.get("__metadata__", {})
    for name, value in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise SafetensorsError(f"{path}: invalid tensor name {name!r}")
        tag, array = _as_array(value, name, path)
        data = array.tobytes()
        header[name] = {"dtype": tag, "shape": [int(d) for d in array.shape],
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    if checksummed:
        crc = 0
        for blob in blobs:
            crc = zlib.crc32(blob, crc)
        header["__metadata__"]["tcc_data_crc32"] = str(crc)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def save_state_dict(state_dict: Mapping[str, object], path: str,
                    metadata: Optional[Mapping[str, str]] = None) -> None:
    """A torch.nn.Module's state_dict as PyTorch's safetensors writer saves
    it: metadata {"format": "pt"} unless given."""
    save_file(state_dict, path, {"format": "pt"} if metadata is None else metadata)


def load_file_with_metadata(path: str) -> Tuple[Dict[str, np.ndarray],
                                                Dict[str, str]]:
    """(name -> numpy array in file order, metadata). BF16 becomes float32."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()

    def bad(what):
        return SafetensorsError(f"{path}: {what}")

    if len(raw) < 8:
        raise bad(f"{len(raw)} bytes, too short for the header size "
                  "(truncated or not safetensors)")
    (size,) = struct.unpack("<Q", raw[:8])
    if size > _MAX_HEADER or size > len(raw) - 8:
        raise bad(f"header size {size} does not fit the {len(raw)}-byte file "
                  "(truncated or not safetensors)")
    try:
        header = json.loads(raw[8:8 + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    data = memoryview(raw)[8 + size:]
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
            isinstance(v, str) for v in metadata.values()):
        raise bad("__metadata__ is not an object of strings")
    tensors, ranges = {}, []
    for name, entry in header.items():
        try:
            tag, shape = entry["dtype"], [int(d) for d in entry["shape"]]
            begin, end = (int(o) for o in entry["data_offsets"])
        except (TypeError, KeyError, ValueError):
            raise bad(f"tensor {name!r} needs dtype, shape and "
                      "data_offsets [begin, end]") from None
        if tag != "BF16" and tag not in _DTYPES:
            raise bad(f"tensor {name!r} has unknown dtype {tag!r}")
        itemsize = 2 if tag == "BF16" else _DTYPES[tag].itemsize
        count = int(np.prod(shape, dtype=np.int64))
        if any(d < 0 for d in shape) or not 0 <= begin <= end <= len(data) \
                or end - begin != count * itemsize:
            raise bad(f"tensor {name!r}: {tag} {shape} does not match "
                      f"data_offsets [{begin}, {end}] of the {len(data)}-byte "
                      "data section")
        chunk = data[begin:end]
        if tag == "BF16":
            bits = np.frombuffer(chunk, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(chunk, dtype=_DTYPES[tag]).copy()
        tensors[name] = array.reshape(shape)
        ranges.append((begin, end))
    covered = 0
    for begin, end in sorted(ranges):
        if begin != covered:
            raise bad(f"tensor data {'overlaps' if begin < covered else 'has a gap'}"
                      f" at byte {min(begin, covered)}")
        covered = end
    if covered != len(data):
        raise bad(f"{len(data) - covered} bytes after the last tensor")
    return tensors, dict(metadata)


def load_file(path: str) -> Dict[str, np.ndarray]:
    """name -> numpy array (BF16 as float32)."""
    return load_file_with_metadata(path)[0]
