#!/bin/bash
# Slim bench/gpt2/run.sh in one process order: tcc bf16 (sm90 attention timed), tcc bf16 TCC_ATTENTION_SM90=0,
# llm.c (defaults, -ge 2), torch eager + compile; bench/gpt2/table.py last. STEPS timed steps each.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
steps=30
out=$OUT/bench; mkdir -p $out
python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
for v in sm90 cudnn; do
  mode=""; [ $v = cudnn ] && mode=0
  TCC_ATTENTION_SM90=$mode timeout 200 ./bin/trun steps/gpt2_bf16.so --data tokens.bin --steps $((steps + 5)) --seed 0 --log-every 5 \
    --metrics $out/tcc_$v.jsonl > $out/tcc_$v.log 2>&1 || echo "tcc $v failed"
done
timeout 200 bash $root/bench/gpt2/llmc.sh run $PWD/bin/train_gpt2cu $PWD/tokens.bin $steps $out/llmc.log || { echo "llm.c failed"; tail -5 $out/llmc.log; }
timeout 200 bash $root/bench/gpt2/llmc.sh run $PWD/bin/train_gpt2cu $PWD/tokens.bin $steps $out/llmc_ge2.log -ge 2 || { echo "llm.c -ge 2 failed"; tail -5 $out/llmc_ge2.log; }
PYTHONUNBUFFERED=1 timeout 400 python3 $root/bench/torch_gpt2.py --mode both --strict --steps $steps --warmup 5 > $out/torch.jsonl 2> $out/torch.log || { echo torch failed; tail -5 $out/torch.log; }
python3 $root/bench/gpt2/table.py --torch $out/torch.jsonl --tcc "bf16, tcc sm90 attention where faster (default)"=$out/tcc_sm90.jsonl \
  --tcc "bf16, cuDNN attention only (sm90 attention off)"=$out/tcc_cudnn.jsonl \
  --llmc $out/llmc.log --llmc "bf16, cuDNN attention, -ge 2=$out/llmc_ge2.log" --warmup 5 | tee $out/table.md
grep -h "attention forward" $out/tcc_sm90.log | sed 's/.*attention: /attention: /'
grep -h "gpu memory" $out/tcc_*.log
