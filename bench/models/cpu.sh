#!/usr/bin/env bash
# The bench/models suite on this machine's CPU, with the models' small CPU
# configs: tcc (tcc compile --target cpu, fp32; trun) against PyTorch eager
# (fp32, torch_bench.py --device cpu) on the same model definitions, the
# same initial weights (trun --init-from PyTorch's) and the same kind of
# random data, in three scenarios run one after the other:
#
#   1 thread        OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 for both (trun
#                   has no thread flag: its step's loops are OpenMP), and
#                   torch.set_num_threads(1)
#   N threads       OMP_NUM_THREADS=N (N = nproc) for both and
#                   torch.set_num_threads(N). (The defaults differ: trun's
#                   OpenMP takes every core, Debian's torch 1.13 here starts
#                   at 1 thread, so N is set explicitly for both.)
#   N threads+busy  the same with one CPU-bound process beside (`yes`), as
#                   on a shared machine
#
# Each model: WARMUP (3) steps, then STEPS (20) timed, tcc and PyTorch;
# ROUNDS (2) rounds of every scenario (the table: the median of the rounds'
# medians and their range).
# trun's time is its step_ms (the train call; batches come from a
# background thread), PyTorch's the wall clock around one step.
#
#   bash bench/models/cpu.sh [OUT]        (default /tmp/bench-models-cpu)
#
# OUT/prep/NAME/   prepare.py --config cpu --target cpu (error.txt on failure)
# OUT/results.jsonl, OUT/table.md; MODELS=a,b; TCC_BUILD_DIR (build/);
# REUSE=1 keeps OUT/prep from an earlier run (no recompiling).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
out="${1:-/tmp/bench-models-cpu}"
steps="${STEPS:-20}"
warmup="${WARMUP:-3}"
rounds="${ROUNDS:-2}"
limit="${TIMEOUT:-600}"
py="${PYTHON:-/usr/bin/python3}"
n=$(nproc)
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Compiles are not timed: nice keeps them off other users' cores.
args=(--config cpu --target cpu --bin "$build/bin")
if [ -n "${MODELS:-}" ]; then args+=(--models "$MODELS"); fi
if [ "${REUSE:-0}" = 1 ] && [ -d "$out/prep" ]; then
  echo "REUSE=1: the steps of $out/prep as they are"
else
  nice -n 19 "$py" "$here/prepare.py" "${args[@]}" "$out/prep"
fi
models=()
for m in "$out"/prep/*/meta.json; do models+=("$(basename "$(dirname "$m")")"); done
declare -A data
for m in "${models[@]}"; do
  md="$out/prep/$m"
  [ -f "$md/error.txt" ] && continue
  data[$m]=$("$py" "$here/make_data.py" "$md")
  "$py" "$here/torch_bench.py" --model "$m" --config cpu --export-init "$md/init.safetensors"
done

busy=""
trap '[ -n "$busy" ] && kill "$busy" 2>/dev/null' EXIT
blas_core=$("$py" -c 'import ctypes; b = ctypes.CDLL("libopenblas.so.0"); b.openblas_get_corename.restype = ctypes.c_char_p; print(b.openblas_get_corename().decode())' 2>/dev/null || echo unknown)
{
  echo "machine: $n cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); OpenBLAS core $blas_core;" \
       "$("$py" -c 'import torch; print("torch", torch.__version__)'); $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "$warmup warm-up + $steps timed steps per run, $rounds rounds; median ms/step"
} | tee "$out/header.txt"
results="$out/results.jsonl"
: >"$results"

run_tcc() {  # MODEL SCENARIO THREADS ROUND DIR ENV...
  local m=$1 scenario=$2 threads=$3 round=$4 o=$5 md="$out/prep/$1"
  shift 5
  if [ -f "$md/error.txt" ]; then
    "$py" "$here/table.py" record --model "$m" --dir "$md" --scenario "$scenario" \
      --round "$round" >>"$results"
  else
    rm -f "$o/tcc.jsonl"
    env "$@" timeout "$limit" "$build/bin/trun" "$md/step.so" --data "${data[$m]}" \
      --init-from "$md/init.safetensors" --steps $((steps + warmup)) --seed 0 --log-every 0 \
      --metrics "$o/tcc.jsonl" >"$o/tcc.log" 2>&1
    "$py" "$here/table.py" record --model "$m" --dir "$md" --metrics "$o/tcc.jsonl" \
      --log "$o/tcc.log" --rc $? --warmup "$warmup" --scenario "$scenario" \
      --threads "$threads" --round "$round" >>"$results"
  fi
  "$py" "$here/table.py" brief "$results"
}

run_torch() {  # MODEL SCENARIO THREADS ROUND DIR ENV...
  local m=$1 scenario=$2 threads=$3 round=$4 o=$5 line rc
  shift 5
  line=$(env "$@" timeout "$limit" "$py" "$here/torch_bench.py" --model "$m" --mode eager \
           --device cpu --config cpu --threads "$threads" --steps "$steps" --warmup "$warmup" \
           --scenario "$scenario" --round "$round" 2>"$o/torch_eager.log")
  rc=$?
  if [ -n "$line" ]; then echo "$line" >>"$results"; else
    "$py" "$here/table.py" record --model "$m" --system pytorch-eager --dir "$out/prep/$m" \
      --rc "$rc" --log "$o/torch_eager.log" --scenario "$scenario" --round "$round" >>"$results"
  fi
  "$py" "$here/table.py" brief "$results"
}

# Rounds repeat every scenario (the second runs PyTorch before tcc), so a
# burst of other work on the machine shows as a spread between rounds.
for round in $(seq "$rounds"); do
  for scenario in "1 thread" "$n threads" "$n threads+busy"; do
    threads=$n
    envs=(OMP_NUM_THREADS=$n)
    if [ "$scenario" = "1 thread" ]; then threads=1; envs=(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1); fi
    if [ "$scenario" = "$n threads+busy" ]; then
      yes >/dev/null &
      busy=$!
    fi
    echo "== round $round, $scenario: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/header.txt"
    for m in "${models[@]}"; do
      o="$out/runs/$m/${scenario// /_}/$round"
      mkdir -p "$o"
      if [ $((round % 2)) = 1 ]; then
        run_tcc "$m" "$scenario" "$threads" "$round" "$o" "${envs[@]}"
        run_torch "$m" "$scenario" "$threads" "$round" "$o" "${envs[@]}"
      else
        run_torch "$m" "$scenario" "$threads" "$round" "$o" "${envs[@]}"
        run_tcc "$m" "$scenario" "$threads" "$round" "$o" "${envs[@]}"
      fi
    done
    if [ -n "$busy" ]; then kill "$busy"; wait "$busy" 2>/dev/null; busy=""; fi
  done
done
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/header.txt"
"$py" "$here/table.py" cpu "$results" | tee "$out/table.md"
