#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (ASan + UBSan, clang) and runs
# each for SECONDS over a copy of its seed corpus plus its crashes/ folder
# (every input that ever failed: a regression check that runs first), then
# prints a table. Exit status 1 when any target crashed (or a timeout / OOM),
# 2 on a build or usage error.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET (default 30)] [BUILD_DIR]
#   tests/fuzz/run.sh --check-seeds [BUILD_DIR]   # every seed parses
#
# BUILD_DIR defaults to build-fuzz at the repository root. Environment:
#   FUZZ_TARGETS  the targets to run (default all, space separated)
#   FUZZ_JOBS     targets run at once (default 1)
#   FUZZ_ARGS     more libFuzzer flags, e.g. "-dict=..." or "-seed=1"
#   CC, CXX       compilers (default clang, clang++)
# The run's work (corpora that grew, logs, artifacts) is in BUILD_DIR/run/.
set -u -o pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
ALL_TARGETS="fuzz_npy fuzz_safetensors fuzz_idx fuzz_token_shard fuzz_vocab fuzz_checkpoint_state fuzz_model"
TARGETS="${FUZZ_TARGETS:-$ALL_TARGETS}"
JOBS="${FUZZ_JOBS:-1}"

CHECK_SEEDS=0
if [[ "${1:-}" == "--check-seeds" ]]; then
  CHECK_SEEDS=1
  shift
  SECONDS_PER_TARGET=0
else
  SECONDS_PER_TARGET="${1:-30}"
  [[ $# -gt 0 ]] && shift
fi
BUILD="${1:-$REPO/build-fuzz}"
if ! [[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET] [BUILD_DIR] | --check-seeds [BUILD_DIR]" >&2
  exit 2
fi

# --- build -------------------------------------------------------------------
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
if command -v ccache >/dev/null 2>&1; then
  GEN+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S "$HERE" -B "$BUILD" \
    "${GEN[@]}" -DTCC_SRC="$REPO" || exit 2
fi
cmake --build "$BUILD" -j "${FUZZ_BUILD_JOBS:-2}" || exit 2

# --- seeds check ---------------------------------------------------------------
if [[ $CHECK_SEEDS == 1 ]]; then
  bad=0
  for t in $TARGETS; do
    for f in "$HERE/corpus/$t"/*; do
      out="$(TCC_FUZZ_VERBOSE=1 "$BUILD/$t" "$f" 2>&1)" || { echo "CRASH $t $f"; bad=1; continue; }
      if grep -qE '^[A-Za-z:() ]+: OK$' <<<"$out"; then
        echo "ok    $t $(basename "$f"): $(grep -E ': OK$' <<<"$out" | sort -u | sed 's/: OK//' | tr '\n' ' ')"
      else
        echo "BAD   $t $(basename "$f"): no parser accepts it"; bad=1
      fi
    done
  done
  exit $bad
fi

# --- fuzz ----------------------------------------------------------------------
RUN="$BUILD/run"
mkdir -p "$RUN"

fuzz_one() {
  local t="$1" dir="$RUN/$1"
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$HERE/corpus/$t"/* "$dir/corpus/" 2>/dev/null
  # Reproducers of old failures run first (libFuzzer reads every corpus
  # directory before it mutates).
  local dirs=("$dir/corpus")
  if compgen -G "$HERE/crashes/$t/*" >/dev/null; then
    mkdir -p "$dir/crashes"
    cp "$HERE/crashes/$t"/* "$dir/crashes/"
    dirs+=("$dir/crashes")
  fi
  # shellcheck disable=SC2086
  "$BUILD/$t" "${dirs[@]}" -max_total_time="$SECONDS_PER_TARGET" \
    -max_len=65536 -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" ${FUZZ_ARGS:-} >"$dir/log" 2>&1
  echo $? >"$dir/rc"
}

echo "fuzzing $SECONDS_PER_TARGET s per target ($JOBS at once), logs in $RUN/<target>/log"
running=0
for t in $TARGETS; do
  if [[ ! -x "$BUILD/$t" ]]; then echo "no target $t" >&2; exit 2; fi
  fuzz_one "$t" &
  running=$((running + 1))
  if (( running >= JOBS )); then wait -n; running=$((running - 1)); fi
done
wait

# --- report --------------------------------------------------------------------
status=0
total=0
printf '\n%-22s %7s %12s %7s %7s %7s  %s\n' target seconds executions cov ft crashes result
for t in $TARGETS; do
  dir="$RUN/$t"
  log="$dir/log"
  execs="$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')"
  if [[ -z "$execs" ]]; then # killed before the final stats: last status line
    execs="$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')"
  fi
  cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')"
  ft="$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')"
  crashes="$(find "$dir/artifacts" -type f | wc -l)"
  rc="$(cat "$dir/rc" 2>/dev/null || echo '?')"
  result=ok
  if [[ "$crashes" != 0 || "$rc" != 0 ]]; then
    result="FAIL (rc $rc): $(find "$dir/artifacts" -type f -printf '%f ' | head -c 200)"
    status=1
  fi
  total=$((total + ${execs:-0}))
  printf '%-22s %7s %12s %7s %7s %7s  %s\n' "$t" "$SECONDS_PER_TARGET" "${execs:-?}" \
    "${cov:-?}" "${ft:-?}" "$crashes" "$result"
done
printf '%-22s %7s %12s\n' total "" "$total"
if [[ $status != 0 ]]; then
  echo
  echo "failures: the reproducers are in $RUN/<target>/artifacts/; the sanitizer"
  echo "report is at the end of $RUN/<target>/log. Minimize one with"
  echo "  $BUILD/<target> -minimize_crash=1 -runs=100000 -exact_artifact_path=OUT ARTIFACT"
  echo "and keep OUT in tests/fuzz/crashes/<target>/."
fi
exit $status
