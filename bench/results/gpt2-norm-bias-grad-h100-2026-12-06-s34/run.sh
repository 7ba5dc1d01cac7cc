#!/bin/bash
# Session 34: GPT-2 bf16 default (c_proj bias grads in kern.layer_norm_grad) vs --no-norm-bias-grad,
# 3 alternating rounds of 60 steps; --profile of both; norm_kernels_test; then tcc (both), llm.c (defaults, -ge 2),
# torch eager + compile in one call, bench/gpt2/table.py last.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
res=$OUT/res; mkdir -p $res
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
echo "== norm_kernels_test"; timeout 120 ./bin/norm_kernels_test > $res/norm_kernels_test.log 2>&1; echo "norm_kernels_test rc $?"; tail -4 $res/norm_kernels_test.log
run() { timeout 200 ./bin/trun steps/$2.so --data tokens.bin --steps 60 --seed 0 --log-every 10 --metrics $res/$1.jsonl > $res/$1.log 2>&1 || echo "$1 failed"; }
for r in 1 2 3; do run fold_$r gpt2_bf16; run nobg_$r gpt2_bf16_nobg; done
med() { python3 -c 'import json,statistics,sys
ms=[r["step_ms"] for r in map(json.loads,open(sys.argv[1])) if r.get("kind")=="step" and r["step"]>=10]
print(f"{statistics.median(ms):.2f}")' "$1"; }
for r in 1 2 3; do echo "round $r: fold (default) $(med $res/fold_$r.jsonl) ms, --no-norm-bias-grad $(med $res/nobg_$r.jsonl) ms"; done
python3 $root/tests/gpu/compare_losses.py "fold vs not" $res/fold_1.jsonl $res/nobg_1.jsonl --steps 60 --tol 1e-2 --labels fold,nobg | tail -3
for s in gpt2_bf16 gpt2_bf16_nobg; do timeout 120 ./bin/trun steps/$s.so --data tokens.bin --steps 12 --seed 0 --profile > $res/profile_$s.log 2>&1; done
grep -h "train step:" $res/profile_*.log
steps=30; out=$res/bench
mkdir -p $out
for v in fold nobg; do
  s=gpt2_bf16; [ $v = nobg ] && s=gpt2_bf16_nobg
  timeout 200 ./bin/trun steps/$s.so --data tokens.bin --steps $((steps + 5)) --seed 0 --log-every 5 \
    --metrics $out/tcc_$v.jsonl > $out/tcc_$v.log 2>&1 || echo "tcc $v failed"
done
timeout 200 bash $root/bench/gpt2/llmc.sh run $PWD/bin/train_gpt2cu $PWD/tokens.bin $steps $out/llmc.log || { echo "llm.c failed"; tail -5 $out/llmc.log; }
timeout 200 bash $root/bench/gpt2/llmc.sh run $PWD/bin/train_gpt2cu $PWD/tokens.bin $steps $out/llmc_ge2.log -ge 2 || { echo "llm.c -ge 2 failed"; tail -5 $out/llmc_ge2.log; }
PYTHONUNBUFFERED=1 timeout 400 python3 $root/bench/torch_gpt2.py --mode both --strict --steps $steps --warmup 5 > $out/torch.jsonl 2> $out/torch.log || { echo torch failed; tail -5 $out/torch.log; }
tar czf $OUT/res.tgz -C $OUT res
python3 $root/bench/gpt2/table.py --torch $out/torch.jsonl --tcc "bf16, c_proj bias grads in the LN backward (default)"=$out/tcc_fold.jsonl \
  --tcc "bf16, --no-norm-bias-grad"=$out/tcc_nobg.jsonl \
  --llmc $out/llmc.log --llmc "bf16, cuDNN attention, -ge 2=$out/llmc_ge2.log" --warmup 5 | tee $out/table.md
grep -h "gpu memory" $out/tcc_*.log
tar czf $OUT/res.tgz -C $OUT res
