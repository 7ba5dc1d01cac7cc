#!/usr/bin/env bash
# Here (any x86-64 machine with the build): runs each test of tests.sh once
# through replay.py's recording shims, each cpu step also compiled for the
# other CPU's -march values, and packs what the other machine needs:
#
#   bash tests/other_cpu/prepare.sh [DIR] [ARCHES]
#     DIR     default .devrun-other-cpu (git-ignored; carry it to the device)
#     ARCHES  default sapphirerapids,skylake-avx512
# Then there: bash tests/other_cpu/device.sh DIR; here: tests/other_cpu/check.sh DIR.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(realpath -m "${1:-$root/.devrun-other-cpu}")
arches="${2:-sapphirerapids,skylake-avx512}"
source "$root/tests/other_cpu/tests.sh"
rm -rf "$dir" && mkdir -p "$dir/lib"
for t in "${tests[@]}"; do
  name=${t%%|*} command=${t#*|}
  echo "=== recording $name"
  # shellcheck disable=SC2086
  /usr/bin/python3 "$root/tests/other_cpu/replay.py" record "$dir/$name" --arch "$arches" -- $command \
    > "$dir/$name.record.log" 2>&1 || { echo "prepare.sh: $name failed here: $dir/$name.record.log" >&2; exit 1; }
  tail -1 "$dir/$name.record.log"
done
cp "$root/build/bin/trun" "$dir/"
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/trun" "$dir/lib"
# Debian's OpenBLAS (the one CI computes with) and its runtime, not the
# other machine's.
copy_cpu_step_libs "$dir/lib"
# Only what the device needs travels: the calls (not the work folders).
(cd "$dir" && tar -czf payload.tar.gz lib trun */calls */arches.json && rm -rf lib)
du -sh "$dir/payload.tar.gz"
