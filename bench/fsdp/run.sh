#!/usr/bin/env bash
# On a machine with N GPUs (python3 with PyTorch >= 2.4, numpy), after
# bench/fsdp/prepare.py DIR here (plus DIR/bin/trun and DIR/lib.tar.gz):
# the ~1.5B LLaMA-style decoder on N ranks, one job at a time on the same
# GPUs: tcc ZeRO-3 (z3.so), tcc plain data parallel (dp.so), PyTorch FSDP2
# + torch.compile (reduce in f32, torchtitan's default, and in bf16, as tcc
# reduces; REDUCES picks). Prints a table; OUT keeps the logs and metrics.
#
#   bash bench/fsdp/run.sh DIR OUT [N]       (STEPS, default 20 after 5)
set -uo pipefail
dir="$(cd "${1:?usage: run.sh DIR OUT [N]}" && pwd)"
out="${2:?usage: run.sh DIR OUT [N]}"
n="${3:-2}"
steps="${STEPS:-20}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
export NCCL_NVLS_ENABLE=0
[ -d "$dir/lib" ] || tar -C "$dir" -xzf "$dir/lib.tar.gz"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$here/../../tests/gpu/cudnn_path.sh"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee "$out/versions.txt"
nvidia-smi -L | tee -a "$out/versions.txt"
tok="$out/tokens.bin"
vocab=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"]["vocab"])' "$dir/meta.json")
[ -f "$tok" ] || python3 "$here/../gpt2/random_tokens.py" "$tok" 20000000 --vocab "$vocab"
for s in z3 dp; do
  timeout 280 "$dir/bin/trun" "$dir/$s.so" --nproc "$n" --data "$tok" --steps $((steps + 5)) \
    --seed 7 --log-every 5 --metrics "$out/tcc_$s.jsonl" > "$out/tcc_$s.log" 2>&1
  echo "tcc $s: exit $?" >> "$out/exits.txt"
done
for r in ${REDUCES:-f32 bf16}; do
  timeout 280 torchrun --standalone --nproc_per_node "$n" "$here/fsdp_bench.py" "$dir/meta.json" \
    --compile --reduce-dtype "$r" --steps "$steps" > "$out/fsdp_$r.json" 2> "$out/fsdp_$r.log"
  echo "fsdp2+compile reduce $r: exit $?" >> "$out/exits.txt"
done
python3 "$here/table.py" "$dir" "$out" "$n" | tee "$out/table.md"
