#!/usr/bin/env bash
# Session 36, call 4. On an H200: issue 37's speed ratio (bf16 against the
# fp8 step before and with the weights from f32; GPT-2 too), 2 rounds.
# On another GPU instead: the loss criterion with --deterministic steps (bf16 and
# fp8 of the 1B decoder, 1000 steps each from the same weights and batches).
set -u
D=.devrun-fp8 L=.devrun-loss
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader
cp $D/lib.tar.gz $D/data.tar.gz $L/
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  rm -rf $D/out
  timeout 280 bash bench/fp8/run.sh $D rounds 2 30 > $D/rounds.txt 2>&1
  echo "rounds exit $?"
  grep -h "attention:" $D/out/round1_llama1b_*.log | sed 's/.*attention:/attention:/' | sort | uniq -c
  cat $D/out/rounds-table.md
  tar czf $OUT/fp8-out.tgz $D/out $D/rounds.txt
  exit 0
fi
TRUN_TIMEOUT=150 timeout 300 bash bench/fp8/run.sh $L loss 1000 > $L/loss.txt 2>&1
echo "loss exit $?"
grep -h "attention:\|trained\|gpu memory" $L/out/loss_llama1b_*.log
tail -40 $L/loss.txt
tar czf $OUT/loss-out.tgz $L/out $L/loss.txt
