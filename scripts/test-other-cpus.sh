#!/usr/bin/env bash
# Runs the test suite again as other x86-64 CPUs would compute it, so that a
# numeric check tuned on one CPU fails here, before it fails on someone
# else's machine (issue 32; docs/runtime.md, "What is reproducible").
#
# What differs from one CPU to another, and how each variant imitates it:
#   - the generated code of cpu steps (-march=native: vector width, FMA
#     contraction): TCC_CPU_ARCH, the -march tcc compile passes;
#   - the BLAS kernels (OpenBLAS picks them by CPU model; tcc's steps and
#     Debian's PyTorch and numpy all multiply through it): OPENBLAS_CORETYPE;
#   - PyTorch's own vectorized CPU kernels: ATEN_CPU_CAPABILITY, and its
#     oneDNN convolutions: ONEDNN_MAX_CPU_ISA.
# A variant runs only where this CPU can execute its instructions (an
# AVX-512 variant on an AVX2-only machine would die of SIGILL); the others
# are listed as SKIPPED with the missing feature, never silently dropped.
#
# Usage: scripts/test-other-cpus.sh [--list] [VARIANT...] [-- CTEST ARGS...]
#   no VARIANT: every variant this CPU can run. CTEST ARGS go to ctest
#   (e.g. -L parity for the parity tests only; default: the whole suite).
#   The build must exist (scripts/test.sh or scripts/build.sh made it).
#   Logs: build/test-other-cpus-VARIANT.log (ctest's), .all.log (every
#   test's output, with the margins the numeric tests print).
# Exit status: 0 when every variant that ran passed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"

# name        -march for tcc  OpenBLAS core  ATen     oneDNN            needs (/proc/cpuinfo flags)
variants=(
  "haswell      x86-64-v3       Haswell        avx2     AVX2              avx2,fma"
  "zen          znver1          Zen            avx2     AVX2              avx2,fma"
  "sandybridge  sandybridge     Sandybridge    default  AVX               avx"
  "nehalem      x86-64-v2       Nehalem        default  SSE41             sse4_2"
  "skylakex     skylake-avx512  SkylakeX       avx512   AVX512_CORE       avx512f,avx512bw,avx512dq,avx512vl"
  "cooperlake   cooperlake      Cooperlake     avx512   AVX512_CORE_BF16  avx512f,avx512bw,avx512vl,avx512_bf16"
)

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

wanted=() ctest_args=()
while (($#)); do
  case "$1" in
    --list) for v in "${variants[@]}"; do echo "$v"; done; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; ctest_args=("$@"); break ;;
    *) wanted+=("$1") ;;
  esac
  shift
done
for w in "${wanted[@]}"; do
  found=0
  for v in "${variants[@]}"; do [ "${v%% *}" = "$w" ] && found=1; done
  if ((!found)); then echo "test-other-cpus: unknown variant '$w' (--list shows them)" >&2; exit 2; fi
done
if [ ! -f "$build/CTestTestfile.cmake" ]; then
  echo "test-other-cpus: no build at $build (run scripts/build.sh or scripts/test.sh first)" >&2
  exit 2
fi

cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
cpu_model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "test-other-cpus: this CPU: $cpu_model"

# The OpenBLAS core a process gets under OPENBLAS_CORETYPE (OpenBLAS falls
# back to another core, silently, when the CPU lacks the requested one).
blas_core() {
  OPENBLAS_CORETYPE="$1" /usr/bin/python3 -c '
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null
}

summary=() status=0
for v in "${variants[@]}"; do
  read -r name arch core aten onednn needs <<<"$v"
  if ((${#wanted[@]})); then
    keep=0
    for w in "${wanted[@]}"; do [ "$w" = "$name" ] && keep=1; done
    ((keep)) || continue
  fi
  missing=()
  for f in ${needs//,/ }; do [[ "$cpu_flags" == *" $f "* ]] || missing+=("$f"); done
  if ((${#missing[@]})); then
    summary+=("$(printf '%-12s SKIPPED: this CPU lacks %s' "$name" "${missing[*]}")")
    continue
  fi
  got=$(blas_core "$core")
  if [ "${got,,}" != "${core,,}" ]; then
    summary+=("$(printf '%-12s SKIPPED: OpenBLAS gave core %s for %s here' "$name" "${got:-none}" "$core")")
    continue
  fi
  echo "=== $name: TCC_CPU_ARCH=$arch OPENBLAS_CORETYPE=$core ATEN_CPU_CAPABILITY=$aten ONEDNN_MAX_CPU_ISA=$onednn"
  log="$build/test-other-cpus-$name.log"
  start=$(date +%s)
  (cd "$build" && TCC_CPU_ARCH="$arch" OPENBLAS_CORETYPE="$core" ATEN_CPU_CAPABILITY="$aten" \
     ONEDNN_MAX_CPU_ISA="$onednn" ctest --output-on-failure -j"${TCC_TEST_JOBS:-2}" "${ctest_args[@]}") >"$log" 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  # Every test's output (passing ones too: their margins), beside the log.
  cp "$build/Testing/Temporary/LastTest.log" "$build/test-other-cpus-$name.all.log" 2>/dev/null
  result=$(grep -E '^[0-9]+% tests passed' "$log" | tail -1)
  failed=$(sed -n '/The following tests FAILED/,$p' "$log" | grep -E '^\s+[0-9]+ -' | sed 's/^ *//' | tr '\n' ';')
  if ((rc == 0)); then
    summary+=("$(printf '%-12s PASS  %s (%ss, -march=%s, OpenBLAS %s, ATen %s)' "$name" "$result" "$secs" "$arch" "$core" "$aten")")
  else
    status=1
    summary+=("$(printf '%-12s FAIL  %s (%ss) %s  log: %s' "$name" "${result:-ctest exit $rc}" "$secs" "$failed" "$log")")
  fi
done

echo
echo "test-other-cpus: summary ($cpu_model)"
for line in "${summary[@]}"; do echo "  $line"; done
exit $status
