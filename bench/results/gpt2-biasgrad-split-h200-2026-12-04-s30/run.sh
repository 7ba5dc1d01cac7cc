#!/bin/bash
# GPT-2 bf16: bias gradients fused into BGRADA products (default) vs --no-fuse-bias-grad, 3 alternating rounds; profile of both
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
mkdir -p res
run() { timeout 200 ./bin/trun steps/$2.so --data tokens.bin --steps 60 --seed 0 --log-every 10 --metrics res/$1.jsonl > res/$1.log 2>&1 || echo "$1 failed"; }
for r in 1 2 3; do run fused_$r gpt2_bf16; run nobg_$r gpt2_bf16_nobg; done
med() { python3 -c 'import json,statistics,sys
ms=[r["step_ms"] for r in map(json.loads,open(sys.argv[1])) if r.get("kind")=="step" and r["step"]>=10]
print(f"{statistics.median(ms):.2f}")' "$1"; }
for r in 1 2 3; do echo "round $r: fused $(med res/fused_$r.jsonl) ms, --no-fuse-bias-grad $(med res/nobg_$r.jsonl) ms"; done
python3 $root/tests/gpu/compare_losses.py "bias grads fused vs not" res/fused_1.jsonl res/nobg_1.jsonl --steps 60 --tol 1e-3 --labels fused,nobg
for s in gpt2_bf16 gpt2_bf16_nobg; do timeout 120 ./bin/trun steps/$s.so --data tokens.bin --steps 12 --seed 0 --profile > res/profile_$s.log 2>&1; done
grep -h "train step:" res/profile_*.log
grep -A22 "by kind" res/profile_gpt2_bf16_nobg.log | head -24
tar czf $OUT/res.tgz res
