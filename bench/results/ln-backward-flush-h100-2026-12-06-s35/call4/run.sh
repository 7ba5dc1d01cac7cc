#!/bin/bash
# Session 35, call 4: norm_kernels_test (fixed variant checked against the reference), then
# GPT-2 bf16 same call: tcc (flush + NormGradFixed, the new default), llm.c defaults and -ge 2,
# torch.compile; bench/gpt2/table.py last.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
res=$OUT/res; mkdir -p $res
save() { tar czf $OUT/res.tgz -C $OUT res; }
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
timeout 200 ./norm_kernels_test_fixed > $res/nkt_fixed.log 2>&1; echo "nkt fixed rc $?"
grep -h -E "FAIL|PASSED|FAILED" $res/nkt_fixed.log; grep -c " fixed: " $res/nkt_fixed.log
save
steps=30; out=$res/bench; mkdir -p $out
timeout 60 ./bin/trun steps/gpt2_bf16_fixed.so --data tokens.bin --steps $((steps + 5)) --seed 0 --log-every 5 --metrics $out/tcc.jsonl > $out/tcc.log 2>&1 || echo "tcc failed"
timeout 60 bash $root/bench/gpt2/llmc.sh run $PWD/bin/train_gpt2cu $PWD/tokens.bin $steps $out/llmc_ge2.log -ge 2 || echo "llm.c -ge 2 failed"
timeout 60 bash $root/bench/gpt2/llmc.sh run $PWD/bin/train_gpt2cu $PWD/tokens.bin $steps $out/llmc.log || echo "llm.c failed"
PYTHONUNBUFFERED=1 timeout 200 python3 $root/bench/torch_gpt2.py --mode compile --strict --steps $steps --warmup 5 > $out/torch.jsonl 2> $out/torch.log || { echo torch failed; tail -3 $out/torch.log; }
save
python3 $root/bench/gpt2/table.py --torch $out/torch.jsonl --tcc "bf16 (default: LN backward flush + NormGradFixed)"=$out/tcc.jsonl \
  --llmc $out/llmc.log --llmc "bf16, cuDNN attention, -ge 2=$out/llmc_ge2.log" --warmup 5 | tee $out/table.md
grep -h "gpu memory" $out/tcc.log
save
