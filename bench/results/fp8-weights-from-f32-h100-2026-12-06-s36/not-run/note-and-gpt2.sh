#!/usr/bin/env bash
# Session 36, call 5 (H100): the attention note of a --deterministic fp8
# step (workspace beyond the plan), and GPT-2 bf16 against fp8, 2 rounds.
set -u
D=.devrun-fp8 N=.devrun-note
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $D/lib $D/out && tar -C $D -xzf $D/lib.tar.gz && tar -C $D -xzf $D/data.tar.gz && tar -C $D -xJf $D/steps.tar.xz
xz -d $N/det_note.so.xz
export LD_LIBRARY_PATH="$PWD/$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source tests/gpu/cudnn_path.sh
timeout 60 $D/bin/trun $N/det_note.so --data $D/data/text_train.bin --steps 3 --seed 0 > $D/out/det_note.log 2>&1
echo "det_note exit $?"; grep -o "attention: cuDNN.*" $D/out/det_note.log; grep "gpu memory" $D/out/det_note.log
for r in 1 2; do for p in bf16 fp8; do
  timeout 60 $D/bin/trun $D/steps/gpt2_$p.so --data $D/data/text_train.bin --steps 30 --seed 0 --metrics $D/out/r${r}_gpt2_$p.jsonl > $D/out/r${r}_gpt2_$p.log 2>&1
  echo "r$r gpt2 $p exit $?"
done; done
python3 - <<'PY'
import json,statistics
for r in (1,2):
  for p in ("bf16","fp8"):
    s=[json.loads(l) for l in open(f".devrun-fp8/out/r{r}_gpt2_{p}.jsonl") if '"kind":"step"' in l]
    print(r,p,len(s),"median step_ms 6-30:",round(statistics.median([x["step_ms"] for x in s[5:]]),2))
PY
tar czf $OUT/out5.tgz $D/out
