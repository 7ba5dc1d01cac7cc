#!/usr/bin/env bash
# On the other machine: every recorded trun call of prepare.sh's DIR, per
# variant (NAME=MARCH:OPENBLAS_CORETYPE, default: the CPU's own core), into
# DIR/results.tar.gz. Prints the CPU and a line per test and variant.
#   bash tests/other_cpu/device.sh DIR [VARIANT...]
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(realpath "$1"); shift
variants=("$@")
((${#variants[@]})) || variants=(spr=sapphirerapids:default skylakex=skylake-avx512:SkylakeX cooperlake=sapphirerapids:Cooperlake)
cd "$dir" && tar -xzf payload.tar.gz
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
core=$(LD_LIBRARY_PATH="$dir/lib" python3 -c 'import ctypes; l=ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype=ctypes.c_char_p; print(l.openblas_get_corename().decode())' 2>/dev/null)
echo "OpenBLAS (Debian's, carried) core by default: ${core:-unknown}"
for d in */calls; do
  name=${d%/calls}
  echo "== $name"
  timeout 900 python3 "$root/tests/other_cpu/replay.py" device "$dir/$name" --trun "$dir/trun" \
    --lib "$dir/lib" "${variants[@]}"
done
tar -czf results.tar.gz */results
