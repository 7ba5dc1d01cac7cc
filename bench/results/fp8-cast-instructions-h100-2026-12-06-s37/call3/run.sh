#!/usr/bin/env bash
# Session 37, call 3: the FP8 cast kernels with fewer instructions a tile
# (fp8_cast_eight's flush count only when a byte is zero, bf16 pairs by
# shift and mask, per-tile corners without a division, ping-pong loads for
# plain casts). 1. fp8_gemm_test (new kernels, new many-tile cases);
# 2. cast_bench old vs new prelude; 3. rounds: bf16, fp8 (main), fp8-cast
# (this change), GPT-2 and the 1B decoder; 4. --profile of both fp8 steps.
set -u
D=.devrun-s37
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader
tar -C $D -xJf $D/bins.tar.xz
mkdir -p $D/out
timeout 150 $D/bin/fp8_gemm_test --seed 37 > $D/out/fp8_gemm_test.log 2>&1
echo "fp8_gemm_test exit $? ($(grep -c '^ok' $D/out/fp8_gemm_test.log) ok, $(grep -c '^FAIL' $D/out/fp8_gemm_test.log) FAIL)"
grep "^FAIL" $D/out/fp8_gemm_test.log | head -5
for v in old new; do timeout 100 $D/bin/cast_bench_$v > $D/out/cast_bench_$v.txt 2>&1; echo "cast_bench_$v exit $?"; done
python3 - <<'PY'
import re
rows={}
for v in ("old","new"):
  for l in open(f".devrun-s37/out/cast_bench_{v}.txt"):
    m=re.match(r"\s*(.*?)\s+([0-9.]+) ms\s+([0-9]+) GB/s",l)
    if m: rows.setdefault(m.group(1),{})[v]=(float(m.group(2)),int(m.group(3)))
for k,d in rows.items():
  if "(cvt)" in k: continue
  o,n=d.get("old"),d.get("new")
  print(f"{k:42s} old {o[0] if o else '-':>8} new {n[0] if n else '-':>8} ms  {('%.3fx' % (o[0]/n[0])) if o and n else ''}")
PY
timeout 280 bash bench/fp8/run.sh $D rounds 2 30 > $D/out/rounds.txt 2>&1
echo "rounds exit $?"
grep -h "exit" $D/out/rounds.txt | head -20
cat $D/out/rounds-table.md
export LD_LIBRARY_PATH="$PWD/$D/lib"; source tests/gpu/cudnn_path.sh
for s in llama1b_fp8 llama1b_fp8-cast; do
  timeout 40 $D/bin/trun $D/steps/$s.so --data $D/data/text_train.bin --steps 6 --seed 0 --profile > $D/out/profile_$s.log 2>&1
  echo "profile $s exit $?"; grep -E "train step:|fp8_quantize|multi_ew|cublasLtMatmul_fp8 " $D/out/profile_$s.log | head -12
done
tar czf $OUT/s37-call3.tgz $D/out
