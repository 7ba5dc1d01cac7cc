#!/usr/bin/env bash
# Installs every build and test dependency from Debian packages (bookworm +
# bookworm-security, where MLIR/LLVM 22 live). Safe to run again: apt skips
# what is installed. Uses sudo when not root.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  build-essential cmake ninja-build ccache git
  # MLIR/LLVM 22: libraries, mlir-tblgen, and lit/FileCheck/not/split-file
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # the rest of the toolchain named in docs/dependencies.md
  libprotobuf-dev protobuf-compiler libabsl-dev libfmt-dev
  libgtest-dev libgmock-dev zlib1g-dev
  # BLAS for CPU matrix products in generated steps
  libopenblas-dev
  # PyTorch parity test (tests/parity): CPU PyTorch 1.13 for /usr/bin/python3
  python3-torch
  # real data: Fashion-MNIST IDX files under /usr/share/datasets/fashion-mnist
  dataset-fashion-mnist
  # JSON for safetensors headers and vocab files in trun (header-only)
  nlohmann-json3-dev
  # real text: ~2.5 MB of English under /usr/share/games/fortunes
  fortunes
  # reading trun's safetensors and token shards back in tests
  python3-numpy
  # tcc-plot: loss curves from trun --metrics files (and its test)
  python3-matplotlib
  # MPI for cpu steps across ranks (trun's libtcc_mpi.so, mpirun in tests)
  openmpi-bin libopenmpi-dev
  # the cuDNN frontend's headers come from PyPI (below)
  python3-pip
  # the Python front end (python/tcc): the model schema's protobuf runtime;
  # ONNX import (tcc import model.onnx, tcc.onnx_import)
  python3-protobuf python3-onnx
  # libFuzzer targets of the file parsers (tests/fuzz, ctest fuzz_parsers):
  # clang with its sanitizer and fuzzer runtimes
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Header-only C++ libraries, pinned, unpacked from their PyPI wheels into
# .deps/NAME/include (git-ignored; tcc compile finds them there):
# fetch_wheel_headers NAME PACKAGE VERSION CHECK PREFIX...: the wheel's files
# under each PREFIX go into .deps/NAME/include (merged), unless CHECK (a path
# under it) and VERSION are there already.
fetch_wheel_headers() {
  local name=$1 package=$2 version=$3 check=$4
  shift 4
  local dir="$root/.deps/$name"
  if [ -f "$dir/include/$check" ] && [ "$(cat "$dir/VERSION" 2>/dev/null)" = "$version" ]; then
    return 0
  fi
  local tmp
  tmp=$(mktemp -d)
  echo "setup: fetching the $name $version headers (PyPI $package)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: "$package==$version" -d "$tmp"
  rm -rf "$dir" && mkdir -p "$dir/include"
  python3 - "$tmp" "$dir/include" "$@" <<'PY'
import glob, os, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        for prefix in sys.argv[3:]:
            if name.startswith(prefix) and not name.endswith("/"):
                out = os.path.join(sys.argv[2], name[len(prefix):])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with z.open(name) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
PY
  echo "$version" > "$dir/VERSION"
  rm -rf "$tmp"
}
# The cuDNN frontend (MIT licence: cuDNN attention in cuda steps) and
# CUTLASS (BSD-3-Clause: the Hopper epilogue GEMMs' unit of a cuda step,
# compiler/codegen/cuda/cutlass/; include/ and tools/util/include merged);
# docs/dependencies.md says why each is there.
fetch_headers() {
  fetch_wheel_headers cudnn-frontend nvidia-cudnn-frontend 1.32.0 cudnn_frontend.h include/
  fetch_wheel_headers cutlass nvidia-cutlass 4.2.0.0 cutlass/cutlass.h \
    cutlass_library/source/include/ cutlass_library/source/tools/util/include/
}

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  fetch_headers
  bash "$root/python/install.sh"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fetch_headers
bash "$root/python/install.sh"
