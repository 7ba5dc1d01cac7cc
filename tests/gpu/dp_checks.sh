#!/usr/bin/env bash
# Data parallelism on the GPU (issue 15), on one GPU, on the steps
# tests/gpu/prepare_dp.sh built:
#  1. same function: each data-parallel step under trun --nproc 1 (one
#     NCCL rank: the all-reduces queued on the communication stream, the
#     step stream waiting before the optimizer, inside the CUDA graph)
#     against the plain step, 50 steps: gpt2_short fp32 (within 1e-5) and
#     bf16 --deterministic; the largest relative loss difference;
#     ZeRO-1 (--shard-optimizer 1: reduce-scatter, the shard's update,
#     all-gather through NCCL) against the plain step too (fp32, 1e-5), and
#     a ZeRO-1 checkpoint (the shards gathered off the GPU) resumed by the
#     plain step, against the uninterrupted plain run;
#  2. bad input, each a clear error within seconds: NCCL missing
#     (TCC_NCCL_LIBRARY), an unreachable master (rank 1 of 2, MASTER_ADDR
#     a blackhole address, TCC_DIST_TIMEOUT=5), a step compiled for one rank
#     under --nproc, --nproc 2 with one GPU (refused before any rank starts);
#  3. GPT-2 124M bf16 B=16 T=1024: ms/step (median of the steps after 5) of
#     the plain step and of the data-parallel one at one NCCL rank (the cost
#     of the all-reduce path itself), and of ZeRO-1 at one rank, with each
#     run's GPU memory;
#  4. scaling: the data-parallel GPT-2 124M step on 1, 2 and 4 GPUs (as many
#     as the machine has) beside PyTorch DDP + torch.compile
#     (bench/torch_gpt2.py --ddp under torchrun): tokens/s and per-GPU
#     scaling (tokens/s on n GPUs / (n x on 1)); with ZeRO-1 over n GPUs,
#     its tokens/s and GPU memory per rank; every --nproc N run must exit
#     within 20 s of its last step (train_and_exit);
#  5. exits on min(GPUs, 4) ranks with checkpoints every 10 steps, a resume
#     from them, evaluation every 10 steps, a final validation + saved
#     weights, and sampling after training: each within 20 s of its last
#     step (issue 34);
#  6. synchronized batch norm: the CNN sample (fp32, two BatchNorm2d) on 2
#     ranks x 32 images with --sync-batch-norm against 1 rank x 64, 30
#     steps (within 1e-4 relative), and without the flag (per-rank
#     statistics) more than 10x that apart; ms/step of each;
#  7. two "nodes" on one machine (issue 34): two truns started as a
#     launcher on two hosts starts them (torchrun's variables, node r on
#     GPU r, each its own process group), with NCCL's shared-memory and
#     peer-to-peer transports off, so their traffic goes over sockets
#     (NCCL_NET=Socket on the loopback): gpt2_short fp32 for 30 steps
#     against the same step under --nproc 2 (within 1e-5), each node
#     exiting within 20 s of its last step; then node 1 killed (SIGKILL)
#     mid-run: node 0 must end within TCC_DIST_TIMEOUT (20 s) + 15 s with
#     one line that says why;
#  8. under torchrun (2 ranks, `torchrun --standalone --no_python trun`):
#     checkpoints, a resume, evaluation with saved weights, sampling; each
#     run must train and exit 0 (torchrun's own store holds MASTER_PORT:
#     the ranks meet one port above).
#  9. ZeRO-3 (--shard-parameters 2) on 2 GPUs: gpt2_short fp32 with
#     evaluation every 10 steps against the data-parallel step (30 steps,
#     within 1e-5); a ZeRO-3 run with checkpoints, --save-weights and
#     sampling (every rank takes part) that must exit within 20 s of its
#     last step; its checkpoint resumed by the data-parallel step; GPT-2
#     124M bf16 ms/step and GPU memory of ZeRO-3 beside plain data
#     parallelism and ZeRO-1 at 2 ranks.
# Prints a table last.
#
#   bash tests/gpu/dp_checks.sh DIR OUT
# PARTS="1 4" runs only those parts (default: all six); TORCH=0 leaves
# PyTorch DDP out of part 4 (tcc's runs and their exit checks only).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: dp_checks.sh DIR OUT" >&2; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
steps="$dir/steps"
short_data="$dir/data/fortunes_shuffled_bytes_train.bin"
tokens="$dir/data/gpt2_tokens.bin"
[ -f "$tokens" ] || python3 "$here/../../bench/gpt2/random_tokens.py" "$tokens" 4000000
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu: /'
ls /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/lib64/libnccl.so* 2>/dev/null | sed 's/^/nccl: /'

train() { # TAG STEP DATA STEPS [trun flags...]
  local tag=$1 step=$2 data=$3 n=$4; shift 4
  "$trun" "$step" --data "$data" --steps "$n" --seed 7 --log-every 10 \
    --metrics "$out/$tag.jsonl" "$@" >"$out/$tag.log" 2>&1 || { echo "$tag: trun failed:"; tail -5 "$out/$tag.log"; status=1; }
}
# train, and the seconds from trun's "trained N steps" line to the job's
# exit (issue 34: every --nproc 2 / 4 run trained and then never exited):
# more than 20 s, or no exit within the timeout, is a FAIL.
train_and_exit() { # TAG STEP DATA STEPS [trun flags...]
  local tag=$1 step=$2 data=$3 n=$4; shift 4
  rm -f "$out/$tag.log"
  timeout 400 "$trun" "$step" --data "$data" --steps "$n" --seed 7 --log-every 10 \
    --metrics "$out/$tag.jsonl" "$@" >"$out/$tag.log" 2>&1 &
  local pid=$! trained=""
  while kill -0 "$pid" 2>/dev/null; do
    [ -z "$trained" ] && grep -q "^trained " "$out/$tag.log" 2>/dev/null && trained=$(date +%s.%N)
    sleep 0.2
  done
  wait "$pid"; local rc=$?
  local ended; ended=$(date +%s.%N)
  [ -z "$trained" ] && grep -q "^trained " "$out/$tag.log" && trained=$ended
  if [ "$rc" != 0 ] || [ -z "$trained" ]; then
    note "$tag: exit: FAIL (rc $rc${trained:+ after training})"; tail -5 "$out/$tag.log"; status=1
    return
  fi
  local lag; lag=$(python3 -c "print('%.1f' % ($ended - $trained))")
  if python3 -c "import sys; sys.exit(0 if $ended - $trained <= 20 else 1)"; then
    note "$tag: exit: PASS, ${lag} s after the last step"
  else
    note "$tag: exit: FAIL, ${lag} s after the last step (limit 20 s)"; status=1
  fi
}
compare() { # LABEL A B TOL
  python3 - "$out" "$here" "$@" <<'PY'
import sys
out, here, label, a, b, tol = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6])
sys.path.insert(0, here)
from step_losses import step_losses
x, y = step_losses("%s/%s.jsonl" % (out, a)), step_losses("%s/%s.jsonl" % (out, b))
if not x or len(x) != len(y):
    print("%s: FAIL (missing runs: %d / %d steps)" % (label, len(x), len(y))); sys.exit(1)
rel = max(abs(p - q) / max(1e-30, abs(q)) for p, q in zip(x, y))
ok = rel <= tol
print("%s: %s, %d steps, max rel %.3g (tolerance %g), last %.6f / %.6f" % (label, "PASS" if ok else "FAIL", len(x), rel, tol, x[-1], y[-1]))
sys.exit(0 if ok else 1)
PY
}

ngpu=$(nvidia-smi -L | wc -l)
want() { [[ " ${PARTS:-1 2 3 4 5 6 7 8 9} " == *" $1 "* ]]; }
if want 1; then
echo "== 1. same function at one NCCL rank"
train short_fp32 "$steps/gpt2_short_fp32.so" "$short_data" 50
train short_fp32_dp "$steps/gpt2_short_fp32_dp.so" "$short_data" 50 --nproc 1
grep -h "^ranks:" "$out/short_fp32_dp.log"
line=$(compare "gpt2_short fp32: data parallel (1 NCCL rank) vs plain" short_fp32_dp short_fp32 1e-5) || status=1
echo "$line"; note "$line"
train short_bf16 "$steps/gpt2_short_bf16.so" "$short_data" 50
train short_bf16_dp "$steps/gpt2_short_bf16_dp.so" "$short_data" 50 --nproc 1
line=$(compare "gpt2_short bf16 --deterministic: data parallel (1 NCCL rank) vs plain" short_bf16_dp short_bf16 1e-2) || status=1
echo "$line"; note "$line"

train short_fp32_zero1 "$steps/gpt2_short_fp32_zero1.so" "$short_data" 50 --nproc 1
line=$(compare "gpt2_short fp32: ZeRO-1 (1 NCCL rank) vs plain" short_fp32_zero1 short_fp32 1e-5) || status=1
echo "$line"; note "$line"
# A ZeRO-1 checkpoint at step 25 resumed by the plain step: steps 26-50
# against the uninterrupted plain run.
train short_zero_a "$steps/gpt2_short_fp32_zero1.so" "$short_data" 25 --nproc 1 --ckpt-dir "$out/ck_zero"
train short_zero_b "$steps/gpt2_short_fp32.so" "$short_data" 50 --ckpt-dir "$out/ck_zero" --resume
line=$(python3 - "$out" "$here" <<'PY'
import sys
out, here = sys.argv[1:3]
sys.path.insert(0, here)
from step_losses import step_losses
full, resumed = step_losses(out + "/short_fp32.jsonl"), step_losses(out + "/short_zero_b.jsonl")
tail = full[25:]
ok = len(resumed) == len(tail) == 25 and max(abs(a - b) / abs(b) for a, b in zip(resumed, tail)) <= 1e-5
rel = max(abs(a - b) / abs(b) for a, b in zip(resumed, tail)) if resumed and tail else float("nan")
print("gpt2_short fp32: ZeRO-1 checkpoint resumed by the plain step: %s, %d steps, max rel %.3g" % ("PASS" if ok else "FAIL", len(resumed), rel))
sys.exit(0 if ok else 1)
PY
) || status=1
echo "$line"; note "$line"

fi
if want 2; then
echo "== 2. bad input"
expect_error() { # LABEL PATTERN command...: the command fails within 60 s with PATTERN on stderr
  local label=$1 pattern=$2; shift 2
  local start=$SECONDS text
  text=$(timeout 60 "$@" 2>&1 >/dev/null); local rc=$?
  local took=$((SECONDS - start))
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "$pattern" <<<"$text"; then
    note "$label: PASS (exit $rc after ${took} s): $(grep -m1 -- "$pattern" <<<"$text" | cut -c1-220)"
  else
    note "$label: FAIL (exit $rc after ${took} s): $(tail -2 <<<"$text" | tr '\n' ' ' | cut -c1-300)"; status=1
  fi
  echo "${summary[-1]}"
}
dp="$steps/gpt2_short_fp32_dp.so"
expect_error "NCCL missing" "NCCL is missing" env TCC_NCCL_LIBRARY=/nonexistent/libnccl.so.2 \
  "$trun" "$dp" --data "$short_data" --steps 2 --nproc 1
expect_error "unreachable master" "cannot reach the master" env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 \
  MASTER_ADDR=10.255.255.1 MASTER_PORT=29999 TCC_DIST_TIMEOUT=5 "$trun" "$dp" --data "$short_data" --steps 2
expect_error "one-rank step under --nproc" "compiled for one rank" \
  "$trun" "$steps/gpt2_short_fp32.so" --data "$short_data" --steps 2 --nproc 1
if [ "$ngpu" -eq 1 ]; then
  expect_error "--nproc 2 on one GPU" "--nproc 2: this machine has 1 GPU" \
    "$trun" "$dp" --data "$short_data" --steps 2 --nproc 2
fi

fi
if want 3; then
echo "== 3. GPT-2 124M bf16: plain and data parallel at one rank"
train gpt2_bf16 "$steps/gpt2_bf16.so" "$tokens" 30
train gpt2_bf16_dp "$steps/gpt2_bf16_dp.so" "$tokens" 30 --nproc 1
train gpt2_bf16_zero1 "$steps/gpt2_bf16_zero1.so" "$tokens" 30 --nproc 1
grep -h "CUDA graph\|gpu memory" "$out/gpt2_bf16_dp.log" "$out/gpt2_bf16_zero1.log" | head -6
python3 - "$out" <<'PY' | tee "$out/gpt2.txt"
import json, statistics, sys
out = sys.argv[1]
def ms(tag):
    v = []
    try:
        for line in open("%s/%s.jsonl" % (out, tag)):
            d = json.loads(line)
            if d.get("kind") == "step" and d["step"] > 5 and "step_ms" in d:
                v.append(d["step_ms"])
    except OSError:
        pass
    return statistics.median(v) if v else float("nan")
def memory(tag):
    try:
        return next(l.split(": ", 1)[1].strip() for l in open("%s/%s.log" % (out, tag))
                    if l.startswith("gpu memory:"))
    except (OSError, StopIteration):
        return "?"
a, b, z = ms("gpt2_bf16"), ms("gpt2_bf16_dp"), ms("gpt2_bf16_zero1")
print("GPT-2 124M bf16 B=16: plain %.2f ms/step, data parallel at 1 NCCL rank %.2f ms/step (%+.1f%%), "
      "ZeRO-1 at 1 rank %.2f ms/step (%+.1f%%); gpu memory: data parallel %s; ZeRO-1 %s"
      % (a, b, 100 * (b / a - 1), z, 100 * (z / a - 1), memory("gpt2_bf16_dp"), memory("gpt2_bf16_zero1")))
PY
note "$(cat "$out/gpt2.txt")"

fi
if want 4; then
echo "== 4. scaling: GPT-2 124M bf16 B=16 per GPU on 1, 2, 4 GPUs, tcc and PyTorch DDP + torch.compile"
python3 -c 'import torch' 2>/dev/null || note "scaling: PyTorch missing, DDP not run"
for n in 1 2 4; do
  [ "$n" -le "$ngpu" ] || { note "scaling $n GPUs: not measured (this machine has $ngpu GPU)"; continue; }
  train_and_exit "scale_tcc_$n" "$steps/gpt2_bf16_dp.so" "$tokens" 30 --nproc "$n"
  train_and_exit "scale_zero_$n" "$steps/gpt2_bf16_zero$n.so" "$tokens" 30 --nproc "$n"
  [ "${TORCH:-1}" = 0 ] && continue
  PYTHONUNBUFFERED=1 timeout 400 python3 -m torch.distributed.run --standalone --nproc_per_node "$n" \
    "$here/../../bench/torch_gpt2.py" --mode compile --ddp --steps 20 --warmup 5 \
    >"$out/scale_torch_$n.jsonl" 2>"$out/scale_torch_$n.log" || { echo "torch DDP ($n GPUs) failed:"; tail -n 5 "$out/scale_torch_$n.log"; }
done
python3 - "$out" <<'PY' | tee "$out/scaling.txt"
import json, statistics, sys
out = sys.argv[1]
def tcc(n, tag="tcc"):
    v = []
    try:
        for line in open("%s/scale_%s_%d.jsonl" % (out, tag, n)):
            d = json.loads(line)
            if d.get("kind") == "step" and d["step"] > 5 and "step_ms" in d:
                v.append(d["step_ms"])
    except OSError:
        return None
    return 16 * 1024 * n / (statistics.median(v) / 1e3) if v else None
def torch(n):
    try:
        for line in open("%s/scale_torch_%d.jsonl" % (out, n)):
            d = json.loads(line)
            if d.get("status") == "ok":
                return d["tokens_per_s"]
    except OSError:
        pass
    return None
base = {"tcc": tcc(1), "torch": torch(1)}
for n in (1, 2, 4):
    t, p = tcc(n), torch(n)
    if t is None and p is None:
        continue
    scale = lambda x, b: "%.1f%%" % (100 * x / (n * b)) if x and b else "-"
    print("scaling %d GPU: tcc %s tokens/s (per-GPU scaling %s), torch.compile+DDP %s tokens/s (%s), tcc/torch %s"
          % (n, "%.0f" % t if t else "-", scale(t, base["tcc"]), "%.0f" % p if p else "-",
             scale(p, base["torch"]), "%.3f" % (t / p) if t and p else "-"))
    z = tcc(n, "zero")
    try:
        mem = lambda tag: next(l.split(": ", 1)[1].strip() for l in open("%s/scale_%s_%d.log" % (out, tag, n))
                               if l.startswith("gpu memory:"))
        print("ZeRO-1 %d GPU: tcc %s tokens/s; gpu memory per rank: ZeRO-1 %s, data parallel %s"
              % (n, "%.0f" % z if z else "-", mem("zero"), mem("tcc")))
    except (OSError, StopIteration):
        print("ZeRO-1 %d GPU: no result" % n)
PY
while read -r line; do note "$line"; done <"$out/scaling.txt"
fi

if want 5; then
echo "== 5. exits with checkpoints, evaluation, resume and sampling on $(( ngpu < 4 ? ngpu : 4 )) ranks (gpt2_short fp32)"
n=$(( ngpu < 4 ? ngpu : 4 ))
val="$dir/data/fortunes_shuffled_bytes_val.bin"
if [ "$n" -ge 2 ]; then
  rm -rf "$out/exit_ck"
  dp="$steps/gpt2_short_fp32_dp.so"
  train_and_exit "exit_ckpt_every_10" "$dp" "$short_data" 30 --nproc "$n" --ckpt-dir "$out/exit_ck" --ckpt-every 10
  train_and_exit "exit_resume_to_40" "$dp" "$short_data" 40 --nproc "$n" --ckpt-dir "$out/exit_ck" --resume
  train_and_exit "exit_eval_every_10" "$dp" "$short_data" 30 --nproc "$n" --val "$val" --eval-every 10
  train_and_exit "exit_val_save_weights" "$dp" "$short_data" 20 --nproc "$n" --val "$val" --save-weights "$out/exit_w.safetensors"
  train_and_exit "exit_sample_after_train" "$dp" "$short_data" 20 --nproc "$n" --sample 32
else
  note "exits on several ranks: not run (this machine has $ngpu GPU)"
fi
fi

if want 6; then
echo "== 6. synchronized batch norm (the CNN sample, fp32)"
images="$dir/data/fashion-mnist"
if [ "$ngpu" -ge 2 ]; then
  train cnn64 "$steps/cnn64.so" "$images" 30
  train cnn32_sync "$steps/cnn32_sync_dp.so" "$images" 30 --nproc 2
  train cnn32_local "$steps/cnn32_dp.so" "$images" 30 --nproc 2
  line=$(compare "CNN fp32: --sync-batch-norm on 2 ranks x 32 vs 1 rank x 64" cnn32_sync cnn64 1e-4) || status=1
  echo "$line"; note "$line"
  if line=$(compare "CNN fp32: per-rank batch norm on 2 ranks x 32 vs 1 rank x 64" cnn32_local cnn64 1e-3); then
    note "CNN fp32: per-rank batch norm: FAIL, as close to the 1-rank run as the synchronized one ($line)"; status=1
  else
    note "CNN fp32: per-rank batch norm vs 1 rank: apart as expected (${line#*: FAIL, })"
  fi
  note "$(python3 - "$out" <<'PY'
import json, statistics, sys
def ms(tag):
    v = [d["step_ms"] for d in map(json.loads, open("%s/%s.jsonl" % (sys.argv[1], tag)))
         if d.get("kind") == "step" and d["step"] > 5 and "step_ms" in d]
    return statistics.median(v) if v else float("nan")
print("CNN ms/step (median after step 5): 1 rank x 64 %.2f; 2 ranks x 32 synchronized %.2f, "
      "per-rank %.2f" % (ms("cnn64"), ms("cnn32_sync"), ms("cnn32_local")))
PY
)"
else
  note "synchronized batch norm: not run (this machine has $ngpu GPU)"
fi
fi

if want 7; then
echo "== 7. two nodes over sockets (gpt2_short fp32)"
if [ "$ngpu" -ge 2 ]; then
  dp="$steps/gpt2_short_fp32_dp.so"
  port=$((29500 + RANDOM % 1000))
  # node R of 2: its own process (no trun parent), GPU R, NCCL over sockets.
  node() { # R STEPS TAG [flags...]
    local r=$1 n=$2 tag=$3; shift 3
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$r \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port CUDA_VISIBLE_DEVICES=$r \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NET=Socket \
      NCCL_SOCKET_IFNAME=lo NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO TCC_DIST_TIMEOUT=20 \
      timeout 300 "$trun" "$dp" --data "$short_data" --steps "$n" --seed 7 --log-every 10 \
      --metrics "$out/${tag}_node$r.jsonl" "$@" >"$out/${tag}_node$r.log" 2>&1
  }
  train two_node_ref "$dp" "$short_data" 30 --nproc 2
  node 0 30 two_node & p0=$!
  node 1 30 two_node & p1=$!
  wait $p0; rc0=$?; wait $p1; rc1=$?
  if grep -q "NET/Socket" "$out/two_node_node0.log"; then transport="NCCL NET/Socket"; else transport="socket transport not confirmed in NCCL_DEBUG"; status=1; fi
  if [ $rc0 = 0 ] && [ $rc1 = 0 ]; then
    line=$(compare "two nodes over sockets: losses vs --nproc 2" two_node_node0 two_node_ref 1e-5) || status=1
    note "$line ($transport)"
  else
    note "two nodes over sockets: FAIL (exit $rc0 / $rc1)"; tail -3 "$out/two_node_node0.log" "$out/two_node_node1.log"; status=1
  fi
  # node 1 killed (its trun, by its metrics path) 30 s after the start, well
  # into training (trun's output to a file is buffered: no step to wait
  # for): node 0 must end by itself.
  port=$((port + 1))
  node 0 100000 kill & p0=$!
  node 1 100000 kill & p1=$!
  sleep 30
  pkill -9 -f "kill_node1.jsonl"; killed=$(date +%s.%N)
  while kill -0 $p0 2>/dev/null; do sleep 0.2; done
  wait $p0; rc0=$?; ended=$(date +%s.%N)
  wait $p1 2>/dev/null
  lag=$(python3 -c "print('%.1f' % ($ended - $killed))")
  why=$(grep "trun: error" "$out/kill_node0.log" | tail -1)
  if [ "$rc0" != 0 ] && python3 -c "import sys; sys.exit(0 if $ended - $killed <= 35 else 1)"; then
    note "two nodes, node 1 killed: node 0 ended ${lag} s later, exit $rc0: $why"
  else
    note "two nodes, node 1 killed: FAIL: node 0 exit $rc0 after ${lag} s (limit 35 s): $why"; status=1
  fi
else
  note "two nodes over sockets: not run (this machine has $ngpu GPU)"
fi
fi

if want 8; then
echo "== 8. under torchrun (gpt2_short fp32, 2 ranks)"
if [ "$ngpu" -ge 2 ] && python3 -c 'import torch' 2>/dev/null; then
  dp="$steps/gpt2_short_fp32_dp.so"
  val="$dir/data/fortunes_shuffled_bytes_val.bin"
  rm -rf "$out/torchrun_ck"
  under_torchrun() { # TAG STEPS [flags...]
    local tag=$1 n=$2; shift 2
    timeout 300 python3 -m torch.distributed.run --standalone --nproc_per_node 2 --no_python \
      "$trun" "$dp" --data "$short_data" --steps "$n" --seed 7 --log-every 10 "$@" >"$out/$tag.log" 2>&1
    local rc=$?
    if [ $rc = 0 ] && grep -q "^trained " "$out/$tag.log"; then note "$tag: PASS (trained, exit 0)"
    else note "$tag: FAIL (exit $rc)"; grep "trun: error" "$out/$tag.log" | head -2; status=1; fi
  }
  under_torchrun torchrun_ckpt_every_10 30 --ckpt-dir "$out/torchrun_ck" --ckpt-every 10
  under_torchrun torchrun_resume_to_40 40 --ckpt-dir "$out/torchrun_ck" --resume
  under_torchrun torchrun_eval_save 30 --val "$val" --eval-every 10 --save-weights "$out/torchrun_w.safetensors"
  under_torchrun torchrun_sample 20 --sample 32
else
  note "under torchrun: not run (needs 2 GPUs and PyTorch; this machine has $ngpu GPU)"
fi
fi

if want 9; then
echo "== 9. ZeRO-3 (--shard-parameters 2) on 2 GPUs"
if [ "$ngpu" -ge 2 ]; then
  val="$dir/data/fortunes_shuffled_bytes_val.bin"
  train z3_short "$steps/gpt2_short_fp32_z3_2.so" "$short_data" 30 --nproc 2 --val "$val" --eval-every 10
  train z3_short_dp "$steps/gpt2_short_fp32_dp.so" "$short_data" 30 --nproc 2 --val "$val" --eval-every 10
  line=$(compare "gpt2_short fp32: ZeRO-3 (2 ranks) vs data parallel (2 ranks)" z3_short z3_short_dp 1e-5) || status=1
  echo "$line"; note "$line"
  rm -rf "$out/ck_z3"
  train_and_exit z3_short_ckpt_save_sample "$steps/gpt2_short_fp32_z3_2.so" "$short_data" 20 --nproc 2 \
    --ckpt-dir "$out/ck_z3" --ckpt-every 10 --save-weights "$out/z3_w.safetensors" --sample 32
  train z3_short_resumed_dp "$steps/gpt2_short_fp32_dp.so" "$short_data" 30 --nproc 2 --ckpt-dir "$out/ck_z3" --resume
  if grep -q "resumed from" "$out/z3_short_resumed_dp.log"; then note "ZeRO-3 checkpoint resumed by the data-parallel step: PASS"
  else note "ZeRO-3 checkpoint resumed by the data-parallel step: FAIL"; status=1; fi
  for s in dp zero2 z3_2; do train "z3_gpt2_$s" "$steps/gpt2_bf16_$s.so" "$tokens" 30 --nproc 2; done
  python3 - "$out" <<'PY' | while read -r l; do echo "$l"; note "$l"; done
import json, re, statistics, sys
o = sys.argv[1]
for s in ("dp", "zero2", "z3_2"):
    try:
        ms = statistics.median(d["step_ms"] for d in map(json.loads, open("%s/z3_gpt2_%s.jsonl" % (o, s)))
                               if d.get("kind") == "step" and d["step"] > 5)
        mem = re.search(r"gpu memory: .*", open("%s/z3_gpt2_%s.log" % (o, s)).read())
        print("GPT-2 124M bf16, 2 ranks, %s: %.2f ms/step, %s" % (s, ms, mem.group(0) if mem else "no memory line"))
    except (OSError, ValueError) as e:
        print("GPT-2 124M bf16, 2 ranks, %s: FAIL (%s)" % (s, e))
PY
else
  note "ZeRO-3: not run (needs 2 GPUs; this machine has $ngpu)"
fi
fi

echo
echo "| check | result |"
echo "|---|---|"
for line in "${summary[@]}"; do echo "| ${line%%: *} | ${line#*: } |"; done
exit $status
