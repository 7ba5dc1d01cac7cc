"""The model schema's generated protobuf module (frontend/proto/tcc_model.proto).

python/install.sh generates it with protoc into tcc/_generated/; a clear
error says so when it is missing rather than an ImportError deep inside.
"""

try:
    from tcc._generated import tcc_model_pb2 as pb
except ImportError as e:  # pragma: no cover - exercised only before set-up
    raise ImportError(
        "tcc: the model schema module tcc/_generated/tcc_model_pb2.py is "
        "missing; run `bash python/install.sh` (the README's set-up does) "
        f"({e})") from e

__all__ = ["pb"]
