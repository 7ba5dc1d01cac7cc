#!/usr/bin/env bash
# Here (no GPU needed; nvcc, Debian's /usr/bin/python3 with torch 1.13 and
# numpy): everything bench/models/run.sh needs on the GPU machine, in one
# git-ignored folder (.devrun-* is in .gitignore):
#
#   bash bench/models/prepare.sh [DIR]          (default DIR: .devrun-models)
#
# DIR/bin/trun, DIR/lib.tar.gz   trun and the Debian libraries it links
# DIR/NAME/   per model (prepare.py): model.pb (tcc.from_torch of
#             torch_models.py's GPU config, with its loss and optimizer),
#             step.so (tcc compile --target cuda --arch ARCH --precision
#             bf16), meta.json, info.txt (trun --info), reports/, compile.log,
#             or error.txt with the exact error of the stage that failed.
# Data and initial weights are made on the GPU machine by run.sh
# (make_data.py, torch_bench.py --export-init): ResNet-50's images and
# GPT-2's weights alone are over the 64 MiB the device tool carries.
#
# Then on the GPU machine (the device tool's run, carry=[DIR]):
#   bash bench/models/run.sh DIR "$OUT/models"
#
# MODELS=a,b (default: all of torch_models.MODELS), ARCH (sm_90),
# PRECISION (bf16), TIMEOUT per compile in s (1800), TCC_BUILD_DIR (build/).
# Compiles run under nice (a shared 2-core machine); the GPT-2 and LLaMA
# steps take ~3-5 min each there, the conv nets ~3 min.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun-models}"
for tool in tcc trun; do
  [ -x "$build/bin/$tool" ] || { echo "prepare.sh: $build/bin/$tool missing: bash scripts/build.sh" >&2; exit 1; }
done
mkdir -p "$dir/bin"
dir=$(cd "$dir" && pwd)
# trun and its Debian libraries (the device machine runs another distribution).
cp "$build/bin/trun" "$dir/bin/"
rm -rf "$dir/lib" && mkdir -p "$dir/lib"
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"

# Each model on its own: a failed import or compile leaves DIR/NAME/error.txt
# and the next model goes on (prepare.py never stops at one).
args=(--config gpu --target cuda --arch "${ARCH:-sm_90}" --precision "${PRECISION:-bf16}"
      --bin "$build/bin" --timeout "${TIMEOUT:-1800}")
if [ -n "${MODELS:-}" ]; then args+=(--models "$MODELS"); fi
nice -n 19 /usr/bin/python3 "$here/prepare.py" "${args[@]}" "$dir"

for f in "$dir"/*/error.txt; do
  if [ -f "$f" ]; then echo "$(basename "$(dirname "$f")"): $(head -n 1 "$f" | cut -c1-300)"; fi
done
size=$(du -sm "$dir" | cut -f1)
echo "DIR $dir: ${size} MiB (the device tool carries at most 64 MiB)"
[ "$size" -le 64 ] || echo "prepare.sh: warning: DIR is over the 64 MiB carry limit" >&2
