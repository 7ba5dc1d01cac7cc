#!/bin/bash
# Session 34 call 3 (H200, warm): tcc bf16 (6f5a338 build), llm.c -ge 2 and defaults, torch.compile; table last.
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
steps=30; out=$OUT/bench3; mkdir -p $out
[ -f tokens.bin ] || python3 $root/bench/gpt2/random_tokens.py tokens.bin 4000000 > /dev/null
timeout 60 ./bin/trun steps/gpt2_bf16.so --data tokens.bin --steps $((steps + 5)) --seed 0 --log-every 5 --metrics $out/tcc.jsonl > $out/tcc.log 2>&1 || echo "tcc failed"
timeout 60 bash $root/bench/gpt2/llmc.sh run $PWD/bin/train_gpt2cu $PWD/tokens.bin $steps $out/llmc_ge2.log -ge 2 || echo "llm.c -ge 2 failed"
timeout 60 bash $root/bench/gpt2/llmc.sh run $PWD/bin/train_gpt2cu $PWD/tokens.bin $steps $out/llmc.log || echo "llm.c failed"
PYTHONUNBUFFERED=1 timeout 170 python3 $root/bench/torch_gpt2.py --mode MODE --strict --steps $steps --warmup 5 > $out/torch.jsonl 2> $out/torch.log || { echo torch failed; tail -3 $out/torch.log; }
python3 $root/bench/gpt2/table.py --torch $out/torch.jsonl --tcc "bf16 (default)"=$out/tcc.jsonl \
  --llmc $out/llmc.log --llmc "bf16, cuDNN attention, -ge 2=$out/llmc_ge2.log" --warmup 5 | tee $out/table.md
tar czf $OUT/bench3.tgz -C $OUT bench3
