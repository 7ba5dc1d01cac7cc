#!/usr/bin/env bash
# The registers, spills, stack and shared memory of every CUDA kernel in a
# model's step, with no GPU: tcc compiles MODEL for the GPU (--no-cache, so
# that every unit goes through nvcc) with ptxas's report (-Xptxas -v) kept,
# and scripts/kernel_resources.py prints it as one table, spilling kernels
# first, then by registers.
#
#   bash scripts/kernel-resources.sh MODEL [TCC COMPILE FLAGS...] [-- TABLE FLAGS...]
#
# e.g. bash scripts/kernel-resources.sh samples/gpt2/gpt2_124m.pbtxt --precision fp8 \
#        -- --match 'norm|fp8'
# TCC COMPILE FLAGS go to `tcc compile` (default --target cuda --arch
# sm_90); TABLE FLAGS to kernel_resources.py (--spills-only, --match
# REGEX, --width N). The reports stay in $TCC_RESOURCES_DIR (default a
# temporary folder, removed). Takes as long as a cold compile (GPT-2 124M:
# ~2 minutes on 2 cores; CUTLASS instances, when the step has them, 1-2
# minutes each more).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage="usage: kernel-resources.sh MODEL [TCC COMPILE FLAGS...] [-- TABLE FLAGS...]"
model=${1:?$usage}
shift
[ -f "$model" ] || { echo "kernel-resources.sh: $model: no such file" >&2; exit 2; }
tcc_flags=() table_flags=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; table_flags=("$@"); break; fi
  tcc_flags+=("$1"); shift
done
tcc=${TCC:-${TCC_BUILD_DIR:-$root/build}/bin/tcc}
[ -x "$tcc" ] || { echo "kernel-resources.sh: $tcc missing: bash scripts/build.sh tcc" >&2; exit 1; }
nvcc=${TCC_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "kernel-resources.sh: no nvcc ($nvcc)" >&2; exit 1; }
keep=${TCC_RESOURCES_DIR:-}
work=${keep:-$(mktemp -d)}
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work/reports"
# nvcc with ptxas's report: each compile (-c) writes its stderr to a file
# of its own (units compile in parallel), then passes it on, so tcc sees
# nvcc's errors and status as before; the file is whole when nvcc returns.
cat > "$work/nvcc" <<WRAP
#!/usr/bin/env bash
case " \$* " in
  *" -c "*)
    "$nvcc" "\$@" -Xptxas -v 2> "$work/reports/\$\$.txt"
    status=\$?
    cat "$work/reports/\$\$.txt" >&2
    exit \$status ;;
  *) exec "$nvcc" "\$@" ;;
esac
WRAP
chmod +x "$work/nvcc"
has_target=0
for f in "${tcc_flags[@]}"; do [ "$f" = "--target" ] && has_target=1; done
[ $has_target = 1 ] || tcc_flags=(--target cuda --arch sm_90 "${tcc_flags[@]}")
if ! TCC_NVCC="$work/nvcc" "$tcc" compile --no-cache "${tcc_flags[@]}" "$model" \
    -o "$work/step.so" > "$work/compile.log" 2>&1; then
  echo "kernel-resources.sh: tcc compile failed:" >&2
  tail -n 20 "$work/compile.log" >&2
  exit 1
fi
shopt -s nullglob
reports=("$work"/reports/*.txt)
[ ${#reports[@]} -gt 0 ] || { echo "kernel-resources.sh: no ptxas report (was anything compiled for the GPU?)" >&2; exit 1; }
python3 "$root/scripts/kernel_resources.py" "${table_flags[@]}" "${reports[@]}"
