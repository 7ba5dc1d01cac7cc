#!/usr/bin/env bash
# Makes the Python front end importable: generates the model schema's
# protobuf module (tcc/_generated/tcc_model_pb2.py, git-ignored) with the
# installed protoc, then puts this folder on Debian's python3 path with a .pth
# file in its user site-packages (no copy: edits here take effect at once).
# Safe to run again. In a virtual environment: run this once, then
# `pip install ./python` (pyproject.toml) inside the environment.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
out="$here/tcc/_generated"
mkdir -p "$out"
protoc --proto_path="$root/frontend/proto" --python_out="$out" \
  "$root/frontend/proto/tcc_model.proto"
touch "$out/__init__.py"
python=${TCC_PYTHON:-/usr/bin/python3}
site=$("$python" -c 'import site; print(site.getusersitepackages())')
mkdir -p "$site"
echo "$here" > "$site/tcc-frontend.pth"
"$python" -c 'import tcc; print("python front end: import tcc works (" + tcc.__file__ + ")")'
