#!/bin/bash
# Session 34 call 2: the layer-norm backward asking L2 for each warp's next row.
# norm_kernels_test (checks + --bench, prefetch on/off), then GPT-2 bf16 step built before (gpt2_bf16)
# against the one built with it (gpt2_bf16_pf), 3 alternating rounds of 60 steps, profiles of both.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
res=$OUT/res2; mkdir -p $res
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
timeout 120 ./bin/norm_kernels_test > $res/norm_kernels_test.log 2>&1; echo "norm_kernels_test rc $?"; grep -c "^ok" $res/norm_kernels_test.log; grep "FAIL" $res/norm_kernels_test.log | head
for i in 1 2; do timeout 120 ./bin/norm_kernels_test --bench 2>&1 | grep "^bench 16384" > $res/bench_$i.txt; done
cat $res/bench_*.txt | sort -k3 | sed 's/^bench 16384x768 //'
echo "== 72 KiB shared budget (8 warps a block with three sums at width 768)"
timeout 120 ./bin/norm_kernels_test_72k > $res/norm_kernels_test_72k.log 2>&1; echo "72k checks rc $?"
for i in 1 2; do timeout 120 ./bin/norm_kernels_test_72k --bench 2>&1 | grep "^bench 16384" > $res/bench72k_$i.txt; done
cat $res/bench72k_*.txt | sort -k3 | sed 's/^bench 16384x768 //' | grep "sum\|defaults"
run() { timeout 200 ./bin/trun steps/$2.so --data tokens.bin --steps 45 --seed 0 --log-every 15 --metrics $res/$1.jsonl > $res/$1.log 2>&1 || echo "$1 failed"; }
for r in 1 2 3; do run base_$r gpt2_bf16; run pf_$r gpt2_bf16_pf; done
med() { python3 -c 'import json,statistics,sys
ms=[r["step_ms"] for r in map(json.loads,open(sys.argv[1])) if r.get("kind")=="step" and r["step"]>=10]
print(f"{statistics.median(ms):.2f}")' "$1"; }
for r in 1 2 3; do echo "round $r: before $(med $res/base_$r.jsonl) ms, next-row prefetch $(med $res/pf_$r.jsonl) ms"; done
python3 $root/tests/gpu/compare_losses.py "before vs prefetch" $res/base_1.jsonl $res/pf_1.jsonl --steps 45 --tol 1e-6 --labels base,pf | tail -2
for s in gpt2_bf16 gpt2_bf16_pf; do timeout 120 ./bin/trun steps/$s.so --data tokens.bin --steps 12 --seed 0 --profile > $res/profile_$s.log 2>&1; done
grep -h "train step:\|  layer_norm_grad " $res/profile_*.log
tar czf $OUT/res2.tgz -C $OUT res2
