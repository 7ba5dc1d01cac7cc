#!/usr/bin/env bash
# Session 37, call 4: the cast kernels at 3 blocks an SM (launch bounds),
# after call 3. fp8_gemm_test; 1B decoder rounds: bf16, fp8 (main before
# this session), fp8-cast (this session's casts); cast_bench old vs new.
set -u
D=.devrun-s38
nvidia-smi --query-gpu=name --format=csv,noheader
tar -C $D -xJf $D/bins.tar.xz
mkdir -p $D/out
timeout 120 $D/bin/fp8_gemm_test --seed 38 > $D/out/fp8_gemm_test.log 2>&1
echo "fp8_gemm_test exit $? ($(grep -c '^ok' $D/out/fp8_gemm_test.log) ok, $(grep -c '^FAIL' $D/out/fp8_gemm_test.log) FAIL)"
grep "^FAIL" $D/out/fp8_gemm_test.log | head -5
timeout 330 bash bench/fp8/run.sh $D rounds 2 30 > $D/out/rounds.txt 2>&1
echo "rounds exit $?"
cat $D/out/rounds-table.md
tar czf $OUT/s37-call4-rounds.tgz $D/out
for v in old new; do timeout 60 $D/bin/cast_bench_$v > $D/out/cast_bench_$v.txt 2>&1; echo "cast_bench_$v exit $?"; done
for v in old new; do grep -E "^(plain cast \(both|fwd cast \(pack|bwd cast \(pack)" $D/out/cast_bench_$v.txt | sed "s/^/$v /"; done
tar czf $OUT/s37-call4-bench.tgz $D/out/cast_bench_*.txt
