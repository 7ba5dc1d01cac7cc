"""The model schema's generated protobuf module (frontend/proto/tcc_model.proto).

python/install.sh generates it with protoc into tcc/_generated/. Either
missing piece (that file, or the protobuf package of the Python running
this) is one clear error naming the fix, not an ImportError from inside.
"""

import os
import sys

try:
    import google.protobuf  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the interpreter
    raise ImportError(
        f"tcc: this Python ({sys.executable}) has no protobuf package: "
        "install it (Debian: apt install python3-protobuf, for /usr/bin/python3; "
        "elsewhere: python3 -m pip install protobuf)") from e

try:
    from tcc._generated import tcc_model_pb2 as pb
except ImportError as e:  # pragma: no cover - exercised only before set-up
    generated = os.path.join(os.path.dirname(__file__), "_generated",
                             "tcc_model_pb2.py")
    raise ImportError(
        f"tcc: the model schema module {generated} is missing or unreadable; "
        "run `bash python/install.sh` (the README's set-up does) "
        f"({e})") from e

__all__ = ["pb"]
