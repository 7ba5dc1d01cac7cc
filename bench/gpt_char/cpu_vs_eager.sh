#!/usr/bin/env bash
# The gpt_char sample's training step on the CPU: tcc (trun, a --target cpu
# step) against PyTorch eager on the same model (tests/parity/gpt_reference.py,
# the reference the parity tests check tcc against), the same weights (trun's
# initial ones), the same sequential batches (32 x 128 tokens), the same
# number of threads. Each system runs WARMUP steps, then STEPS timed ones;
# ROUNDS rounds alternate tcc, PyTorch, tcc, PyTorch ... so that a drift in
# the machine's speed reaches both. Prints each round's median ms/step, the
# median over rounds, the fastest step and the ratios PyTorch / tcc. Other
# processes on the cores slow tcc's step most (each of its ~1000 OpenMP
# regions a step may wait a scheduler slice for a thread, see
# docs/performance.md): the load average is printed before and after.
#
#   bash bench/gpt_char/cpu_vs_eager.sh [OUT_DIR]     (default /tmp/gpt_char_cpu_vs_eager)
#
#   THREADS  threads of both (default: nproc): OMP_NUM_THREADS for the tcc
#            step (its OpenMP loops; it keeps OpenBLAS at one thread),
#            torch.set_num_threads for PyTorch
#   WARMUP (5), STEPS (20), ROUNDS (2)
#   TCC_BUILD_DIR  where bin/{tcc,trun,tcc-data} are (default build/)
#   PYTHON   a python with torch and numpy (default /usr/bin/python3, Debian's)
#   OPENBLAS_CORETYPE  passed to both (both multiply through OpenBLAS: the
#            tcc step directly, Debian's torch as its BLAS). On a VM whose
#            CPU model is hidden OpenBLAS picks its SSE3 "Prescott" kernels;
#            the script prints the core OpenBLAS uses, and e.g.
#            OPENBLAS_CORETYPE=SkylakeX selects the AVX-512 ones
#
# Timing: trun's step_ms (--metrics) is the step call alone, batch loading
# (a background thread) excluded; PyTorch's is the loop of
# gpt_reference.train from the end of one step to the end of the next (its
# batches are made up front). Both are whole training steps: forward,
# backward, gradient clipping, AdamW.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
out="${1:-/tmp/gpt_char_cpu_vs_eager}"
threads="${THREADS:-$(nproc)}"
warmup="${WARMUP:-5}"
steps="${STEPS:-20}"
rounds="${ROUNDS:-2}"
py="${PYTHON:-/usr/bin/python3}"
for tool in tcc trun tcc-data; do
  if [ ! -x "$build/bin/$tool" ]; then
    echo "cpu_vs_eager.sh: $build/bin/$tool is missing: build first (bash scripts/build.sh)" >&2
    exit 1
  fi
done
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
  echo "cpu_vs_eager.sh: $py cannot import torch and numpy (set PYTHON)" >&2
  exit 1
fi
mkdir -p "$out"

# The sample's data and step, as samples/gpt_char/prepare.sh makes them but
# always for the CPU (prepare.sh picks cuda where there is a GPU).
text_dir=/usr/share/games/fortunes
mapfile -t files < <(find "$text_dir" -maxdepth 1 -type f ! -name '*.dat' | LC_ALL=C sort)
"$build/bin/tcc-data" tokenize --level char --val-fraction 0.1 -o "$out/fortunes" "${files[@]}" >/dev/null
"$build/bin/tcc" compile --target cpu "$root/samples/gpt_char/gpt_char.pbtxt" -o "$out/gpt_char_cpu.so"
data=(--data "$out/fortunes_train.bin" --data-order sequential)
"$build/bin/trun" "$out/gpt_char_cpu.so" "${data[@]}" --steps 0 --seed 0 \
  --save-weights "$out/init.safetensors" >/dev/null

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//');" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
blas_core=$("$py" -c 'import ctypes; b = ctypes.CDLL("libopenblas.so.0"); b.openblas_get_corename.restype = ctypes.c_char_p; print(b.openblas_get_corename().decode())' 2>/dev/null || echo unknown)
echo "threads $threads, $warmup warm-up + $steps timed steps, $rounds rounds;" \
     "OpenBLAS core $blas_core (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}); $("$py" -c 'import torch; print("torch", torch.__version__)')"
results="$out/results.jsonl"
: >"$results"
for round in $(seq "$rounds"); do
  rm -f "$out/trun.jsonl"
  OMP_NUM_THREADS="$threads" "$build/bin/trun" "$out/gpt_char_cpu.so" "${data[@]}" \
    --init-from "$out/init.safetensors" --steps $((warmup + steps)) --log-every 0 \
    --metrics "$out/trun.jsonl" >"$out/trun.log" 2>&1 \
    || { echo "cpu_vs_eager.sh: trun failed:" >&2; tail -n 5 "$out/trun.log" >&2; exit 1; }
  "$py" "$here/step_times.py" trun "$out/trun.jsonl" --warmup "$warmup" --threads "$threads" \
    | tee -a "$results"
  OMP_NUM_THREADS="$threads" "$py" "$here/step_times.py" torch --init "$out/init.safetensors" \
    --data "$out/fortunes_train.bin" --threads "$threads" --warmup "$warmup" --steps "$steps" \
    | tee -a "$results"
done
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" "$here/step_times.py" table "$results"
