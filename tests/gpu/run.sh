#!/usr/bin/env bash
# On the device machine (an NVIDIA GPU), after tests/gpu/prepare.sh here:
#   1. the CUDA kernel-family tests (every prelude kernel vs float64, the
#      flash attention kernels too, cuDNN attention, tcc's Hopper attention
#      forward and backward, the norm and FP8 casts, FP8 products, GEMM
#      epilogues),
#   2. the MLP and the character GPT (also with head size 64, so that its
#      attention runs the flash kernels) trained 100 steps on the CPU and on the
#      GPU from the same initial weights and batches: per-step losses must
#      agree within 1e-4 relative,
#   3. a few GPT-2 124M steps on the GPU in fp32 and in bf16 (that they
#      run; the benchmark is bench/gpt2/run.sh), and the bf16 step with
#      tcc's sm90 attention forced against it turned off (losses within
#      1e-4 relative),
#   4. --on-nan skip on the GPU: the MLP's losses unchanged by it, and what
#      its on-GPU copy costs GPT-2 per step and in memory,
#   5. trun --profile on GPT-2, fp32 and bf16: its kernel times add up to
#      the step time,
#   6. architecture checks: an sm_80 build runs through its PTX with the
#      native build's losses; an sm_100 build is refused at start,
#   7. mixed precision (tests/gpu/amp_checks.sh, sourced): bf16 against fp32
#      and against PyTorch autocast, fp16 loss-scale overflow and underflow,
#   8. dynamic loss scaling: gpt_char at 2^16 trains like without; the
#      summed-loss MLP from 2^127 overflows, backs off, recovers and grows
#      by GradScaler's rule.
#   9. the vision ops (tests/gpu/vision_checks.sh): conv / pool kernels vs
#      float64, a small CNN trained on the GPU vs the CPU's losses.
# The steps are compiled with explicit precisions (prepare.sh): 1-6 run
# fp32 steps except where bf16 is named. Prints a summary table last; exit
# 1 if anything failed.
#
#   bash tests/gpu/run.sh DIR [OUT]     (OUT: logs and metrics, default DIR/out)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

"$trun" "$dir/steps/gpt2_cuda.so" --diagnose 2>&1 | tee "$out/diagnose.txt"

# device_test BINARY WHAT: one tests/cuda program, its output in
# $out/BINARY.txt (without _test), a PASS or FAIL line in the summary.
device_test() {
  local bin=$1 what=$2 log="$out/${1%_test}.txt"
  echo "== $what =="
  "$dir/bin/$bin" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then
    note "$what vs float64: PASS"
  else
    note "$what vs float64: FAIL (exit $rc${3:+: $3})"; status=1
  fi
}
device_test kernel_families_test "kernel families"
device_test attention_kernels_test "flash attention kernels"
device_test cudnn_attention_test "cuDNN attention (and mixed with the flash kernels)" \
  "77 = no GPU or no libcudnn.so.9"
"$dir/bin/cudnn_attention_test" --bench 2>&1 | tail -3 | tee -a "$out/cudnn_attention.txt"
device_test attention_sm90_test "tcc's Hopper attention forward" "77 = not an sm_90 GPU"
"$dir/bin/attention_sm90_test" --bench 2>&1 | tail -14 | tee -a "$out/attention_sm90.txt"
device_test attention_sm90_backward_test "tcc's Hopper attention backward" "77 = not an sm_90 GPU"
"$dir/bin/attention_sm90_backward_test" --bench 2>&1 | tail -14 | tee -a "$out/attention_sm90_backward.txt"
device_test norm_kernels_test "fused norm kernels"
device_test norm_fp8_test "norms cast to FP8 in one pass" "77 = no GPU"
device_test norm_grad_fp8_test "norm backwards casting dx to FP8 in the same pass" "77 = no GPU"
device_test fp8_rope_cast_test "FP8 casts computing the backward's rotary embeddings" "77 = no GPU"
device_test fp8_gemm_test "FP8 casts, delayed scaling and cuBLASLt FP8 products" \
  "77 = no GPU or one before sm_89"
device_test batch_norm_kernels_test "batch norm reductions"
device_test gemm_epilogue_test "cuBLASLt GEMM epilogues"
device_test gemm_search_test "cuBLASLt searched algorithms and candidates"
device_test cutlass_gemm_test "CUTLASS Hopper epilogue GEMMs" "77 = not an sm_90 GPU"

train() { # name step data... -> metrics file
  local name=$1 step=$2; shift 2
  rm -f "$out/$name.jsonl"
  "$trun" "$dir/steps/$step" "$@" --steps 100 --seed 0 --log-every 25 \
    --metrics "$out/$name.jsonl" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 4 "$out/$name.log"
  return $rc
}
mnist="$dir/data/mnist_images.npy,$dir/data/mnist_labels.npy"
for model in mlp gpt_char gpt_char_d64; do
  echo "== $model: cpu vs gpu, 100 steps =="
  if [ $model = mlp ]; then data=(--data "$mnist"); else data=(--data "$dir/data/fortunes_train.bin"); fi
  if train ${model}_cpu ${model}_cpu.so "${data[@]}" && train ${model}_gpu ${model}_cuda.so "${data[@]}"; then
    line=$(python3 "$here/compare_losses.py" "$model" "$out/${model}_cpu.jsonl" "$out/${model}_gpu.jsonl")
    rc=$?
    echo "$line"; note "$line"; [ $rc = 0 ] || status=1
  else
    note "$model: a run failed (see $out/${model}_*.log)"; status=1
  fi
done

echo "== gpt2 124M on the GPU: 5 steps, fp32 and bf16 =="
tokens="$dir/data/gpt2_tokens.bin"
[ -f "$tokens" ] || python3 "$here/../../bench/gpt2/random_tokens.py" "$tokens" 2000000
for precision in fp32 bf16; do
  step="$dir/steps/gpt2_cuda.so"; [ $precision = bf16 ] && step="$dir/steps/gpt2_cuda_bf16.so"
  log="$out/gpt2_smoke_$precision.log"
  if "$trun" "$step" --data "$tokens" --steps 5 --seed 0 --log-every 1 >"$log" 2>&1; then
    note "gpt2 124M $precision: $(grep -m1 'gpu:' "$log" || true) $(tail -n 1 "$log")"
  else
    note "gpt2 124M $precision: FAIL ($(tail -n 1 "$log"))"; status=1
  fi
  cat "$log"
done

echo "== --on-nan skip on the GPU (its copy stays on the GPU) =="
# No step of these runs is non-finite: the copy before each step must not
# change the training (same losses as without), and costs a device copy.
if train mlp_gpu_skip mlp_cuda.so --data "$mnist" --on-nan skip; then
  line=$(python3 "$here/compare_losses.py" "mlp gpu --on-nan skip vs without" \
         "$out/mlp_gpu.jsonl" "$out/mlp_gpu_skip.jsonl" --tol 1e-6 --labels stop,skip)
  rc=$?
  echo "$line"; note "$line"; [ $rc = 0 ] || status=1
else
  note "mlp gpu --on-nan skip: FAIL ($(tail -n 1 "$out/mlp_gpu_skip.log"))"; status=1
fi
median_ms() { # metrics -> median step_ms of steps 3.. (after graph capture)
  python3 -c 'import json,statistics,sys
ms=[r["step_ms"] for r in map(json.loads,open(sys.argv[1])) if r.get("kind")=="step" and r["step"]>=3]
print(f"{statistics.median(ms):.1f}")' "$1"
}
for mode in stop skip; do
  "$trun" "$dir/steps/gpt2_cuda.so" --data "$tokens" --steps 12 --seed 0 --log-every 4 \
    --on-nan $mode --metrics "$out/gpt2_onnan_$mode.jsonl" >"$out/gpt2_onnan_$mode.log" 2>&1 \
    || { note "gpt2 --on-nan $mode: FAIL ($(tail -n 1 "$out/gpt2_onnan_$mode.log"))"; status=1; }
done
if [ -s "$out/gpt2_onnan_skip.jsonl" ] && [ -s "$out/gpt2_onnan_stop.jsonl" ]; then
  note "gpt2 124M fp32 median ms/step: --on-nan stop $(median_ms "$out/gpt2_onnan_stop.jsonl"), skip $(median_ms "$out/gpt2_onnan_skip.jsonl"); $(grep -m1 'gpu memory' "$out/gpt2_onnan_stop.log") vs $(grep -m1 'gpu memory' "$out/gpt2_onnan_skip.log")"
fi

# The bf16 step unprofiled (12 steps: its median step time and memory).
"$trun" "$dir/steps/gpt2_cuda_bf16.so" --data "$tokens" --steps 12 --seed 0 --log-every 4 \
  --metrics "$out/gpt2_bf16.jsonl" >"$out/gpt2_bf16.log" 2>&1 \
  || { note "gpt2 bf16 12 steps: FAIL ($(tail -n 1 "$out/gpt2_bf16.log"))"; status=1; }
if [ -s "$out/gpt2_bf16.jsonl" ]; then
  note "gpt2 124M bf16 median ms/step: $(median_ms "$out/gpt2_bf16.jsonl"); $(grep -m1 'gpu memory' "$out/gpt2_bf16.log")"
fi

echo "== tcc's sm90 attention in the GPT-2 bf16 step =="
# The same 20 steps with tcc's Hopper attention forward and backward forced
# at every site (TCC_ATTENTION_SM90=force) and turned off (cuDNN's): the
# losses agree within 1e-4 relative (measured 2e-6, H200 2026-12-04), and
# the note says which ran. On a GPU other than sm_90 both runs are cuDNN's.
for mode in force 0; do
  TCC_ATTENTION_SM90=$mode "$trun" "$dir/steps/gpt2_cuda_bf16.so" --data "$tokens" --steps 20 \
    --seed 0 --log-every 5 --metrics "$out/gpt2_bf16_sm90_$mode.jsonl" >"$out/gpt2_bf16_sm90_$mode.log" 2>&1 \
    || { note "gpt2 bf16 TCC_ATTENTION_SM90=$mode: FAIL ($(tail -n 1 "$out/gpt2_bf16_sm90_$mode.log"))"; status=1; }
done
if [ -s "$out/gpt2_bf16_sm90_force.jsonl" ] && [ -s "$out/gpt2_bf16_sm90_0.jsonl" ]; then
  line=$(python3 "$here/compare_losses.py" "gpt2 bf16 tcc sm90 attention vs cuDNN" \
         "$out/gpt2_bf16_sm90_0.jsonl" "$out/gpt2_bf16_sm90_force.jsonl" --steps 20 --tol 1e-4 --labels cudnn,sm90)
  rc=$?
  echo "$line"; note "$line"; [ $rc = 0 ] || status=1
  if grep -q "backward B16 H12 T1024 S1024 D64 causal: tcc sm90" "$out/gpt2_bf16_sm90_force.log"; then
    note "gpt2 bf16: the forced run's note names tcc sm90 for the backward"
  else
    note "gpt2 bf16: the forced run's note does not name tcc sm90 (not an sm_90 GPU?): $(grep -m1 'attention:' "$out/gpt2_bf16_sm90_force.log")"
  fi
fi

echo "== dynamic loss scaling on the GPU =="
# gpt_char compiled with --loss-scale dynamic (2^16, no overflow): the same
# losses as without, to 1e-5 (bit for bit on the CPU; on the GPU the
# embedding gradient's atomics add in any order, ~1e-6 between two runs); the summed-loss MLP from 2^127: overflows, the scale
# halves, recovers and grows exactly by GradScaler's rule, the loss falls.
if train gpt_char_gpu_ls gpt_char_cuda_ls.so --data "$dir/data/fortunes_train.bin"; then
  line=$(python3 "$here/compare_losses.py" "gpt_char gpu loss scale 2^16 vs none" \
         "$out/gpt_char_gpu.jsonl" "$out/gpt_char_gpu_ls.jsonl" --tol 1e-5 --labels none,dynamic)
  rc=$?
  echo "$line"; note "$line"; [ $rc = 0 ] || status=1
else
  note "gpt_char gpu --loss-scale dynamic: FAIL ($(tail -n 1 "$out/gpt_char_gpu_ls.log"))"; status=1
fi
"$trun" "$dir/steps/mlp_sum_overflow_cuda.so" --data "$mnist" --steps 40 --seed 1 --log-every 1 \
  --metrics "$out/mlp_sum_overflow.jsonl" >"$out/mlp_sum_overflow.log" 2>&1
rc=$?
tail -n 3 "$out/mlp_sum_overflow.log"
if [ $rc = 0 ]; then
  line=$(python3 "$here/../e2e/loss_scaling_rule.py" "$out/mlp_sum_overflow.jsonl" 1.7014118346046923e38 4)
  rc=$?
  echo "$line"; note "mlp (sum loss) gpu from 2^127: $line"; [ $rc = 0 ] || status=1
else
  note "mlp (sum loss) gpu from 2^127: FAIL (exit $rc: $(tail -n 1 "$out/mlp_sum_overflow.log"))"; status=1
fi

echo "== --profile: where a GPT-2 step's time goes, fp32 and bf16 =="
# The kernel times of a profiled step must add up to about the step time of
# the unprofiled run (launch gaps make the sum a little larger).
for precision in fp32 bf16; do
  step="$dir/steps/gpt2_cuda.so"; plain_metrics="$out/gpt2_onnan_stop.jsonl"
  [ $precision = bf16 ] && { step="$dir/steps/gpt2_cuda_bf16.so"; plain_metrics="$out/gpt2_bf16.jsonl"; }
  profile="$out/gpt2_profile.txt"; [ $precision = bf16 ] && profile="$out/gpt2_profile_bf16.txt"
  "$trun" "$step" --data "$tokens" --steps 4 --seed 0 --log-every 1 --profile >"$profile" 2>&1
  rc=$?
  cat "$profile"
  profiled=$(sed -n 's/^  train step: \([0-9.]*\) ms in.*/\1/p' "$profile")
  if [ $rc = 0 ] && [ -n "$profiled" ] && [ -s "$plain_metrics" ]; then
    plain=$(median_ms "$plain_metrics")
    if python3 -c "import sys; p,g=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if 0.8*g <= p <= 1.3*g else 1)" "$profiled" "$plain"; then
      note "gpt2 $precision --profile: kernels sum to $profiled ms/step vs $plain ms/step unprofiled (graph): PASS"
    else
      note "gpt2 $precision --profile: kernels sum to $profiled ms/step vs $plain ms/step unprofiled: FAIL (outside 0.8-1.3x)"; status=1
    fi
  else
    note "gpt2 $precision --profile: FAIL (exit $rc; see $profile)"; status=1
  fi
done

echo "== architecture checks =="
# sm_80 code on this GPU runs through the embedded PTX: same losses as the
# native build (20 steps); sm_100 code must be refused at start, clearly,
# and by --diagnose.
if train gpt_char_sm80 gpt_char_cuda_sm80.so --data "$dir/data/fortunes_train.bin"; then
  line=$(python3 "$here/compare_losses.py" "gpt_char sm_80 (PTX) vs native" \
         "$out/gpt_char_gpu.jsonl" "$out/gpt_char_sm80.jsonl" --labels native,sm_80)
  rc=$?
  echo "$line"; note "$line"; [ $rc = 0 ] || status=1
else
  note "gpt_char sm_80 build: FAIL ($(tail -n 1 "$out/gpt_char_sm80.log"))"; status=1
fi
"$trun" "$dir/steps/gpt_char_cuda_sm100.so" --data "$dir/data/fortunes_train.bin" --steps 2 \
  >"$out/sm100.log" 2>&1
rc=$?
"$trun" "$dir/steps/gpt_char_cuda_sm100.so" --diagnose >"$out/sm100_diagnose.log" 2>&1
drc=$?
cat "$out/sm100.log" "$out/sm100_diagnose.log"
if [ $rc = 1 ] && grep -q "built for sm_100, which does not run on GPU 0" "$out/sm100.log" \
   && [ $drc = 1 ] && grep -q "does NOT run" "$out/sm100_diagnose.log"; then
  note "sm_100 step refused at start and by --diagnose: PASS ($(tail -n 1 "$out/sm100.log"))"
else
  note "sm_100 step: FAIL (exit $rc, diagnose exit $drc; see $out/sm100*.log)"; status=1
fi

# Mixed precision: bf16 vs fp32 vs PyTorch, fp16 loss scaling.
source "$here/amp_checks.sh"

echo "== vision ops: conv / pool kernels, a small CNN cpu vs cuda (vision_checks.sh) =="
if bash "$here/vision_checks.sh" "$dir/vision" "$out/vision"; then
  note "vision checks: PASS ($(grep -c . "$out/vision/conv_bench.txt" 2>/dev/null) bench lines in $out/vision)"
else
  note "vision checks: FAIL (see $out/vision and the vision summary above)"; status=1
fi

echo
echo "== summary =="
for s in "${summary[@]}"; do echo "  $s"; done
exit $status
