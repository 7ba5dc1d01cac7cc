#!/usr/bin/env bash
# Here, after device.sh: unpacks DIR/results.tar.gz and reruns each test
# with trun's calls answered by the other machine's results, per variant;
# prints a table (test, variant, PASS/FAIL) last.
#   bash tests/other_cpu/check.sh DIR [RESULTS.tar.gz]
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(realpath "${1:-$root/.devrun-other-cpu}")
results="${2:-$dir/results.tar.gz}"
tar -C "$dir" -xzf "$results"
source "$root/tests/other_cpu/tests.sh"
table=()
status=0
for t in "${tests[@]}"; do
  name=${t%%|*} command=${t#*|}
  for v in "$dir/$name"/results/*; do
    variant=$(basename "$v")
    log="$dir/$name.check-$variant.log"
    # shellcheck disable=SC2086
    if /usr/bin/python3 "$root/tests/other_cpu/replay.py" check "$dir/$name" "$variant" -- $command > "$log" 2>&1; then
      r=PASS
    else
      r=FAIL status=1
    fi
    margin=$(grep -E "at most [0-9.]+ of the limit" "$log" | sed -E 's/.*at most ([0-9.]+) of the limit.*/\1/' | sort -g | tail -1)
    table+=("$(printf '%-16s %-11s %s  (worst: %s of its limit)  %s' "$name" "$variant" "$r" "${margin:-?}" "$log")")
  done
done
printf '%s\n' "${table[@]}"
exit $status
