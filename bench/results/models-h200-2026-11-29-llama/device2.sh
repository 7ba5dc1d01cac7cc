#!/usr/bin/env bash
# After the rope FMA fix: kernel tests, LLaMA GPU step vs CPU step (fp32, same init/data), suite + profile.
set -uo pipefail
export CUDA_MODULE_LOADING=LAZY
source tests/gpu/cudnn_path.sh
D=.devrun-llama
timeout 240 $D/tb/kernel_families_test > $OUT/kft.txt 2>&1; echo "kernel_families_test rc=$? $(grep -c '^\[FAIL' $OUT/kft.txt) FAIL; $(tail -1 $OUT/kft.txt)"
echo "rope cases passed: $(grep -i 'rope' $OUT/kft.txt | grep -ic pass)"
[ -d "$D/lib" ] || tar -C $D -xzf $D/lib.tar.gz
export LD_LIBRARY_PATH="$PWD/$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
P=$D/par
for p in fp32 bf16; do
  timeout 120 $D/bin/trun $P/$p.so --data $P/text_train.bin --data-order sequential --steps 50 --init-from $P/init.safetensors --metrics $OUT/par_$p.jsonl --log-every 0 > $OUT/par_$p.log 2>&1
  echo "parity $p rc=$?"
  python3 - $P/metrics.jsonl $OUT/par_$p.jsonl $p <<'PY'
import json,sys
def L(f): return {r["step"]: r["loss"] for r in map(json.loads, open(f)) if r.get("kind")=="step" and "loss" in r}
a,b=L(sys.argv[1]),L(sys.argv[2]); s=sorted(set(a)&set(b))
d=max(abs(a[i]-b[i])/abs(a[i]) for i in s)
print(f"{sys.argv[3]} GPU vs CPU fp32 losses: {len(s)} steps, max rel diff {d:.2e}, last {b[s[-1]]:.6f} vs {a[s[-1]]:.6f}")
PY
done
MODELS=llama MODES=compile INIT=torch STEPS=30 TIMEOUT=300 timeout 400 bash bench/models/run.sh $D $OUT/r > $OUT/r.log 2>&1
echo "models rc=$?"
grep -h "gpu memory\|error" $OUT/r/llama/tcc.log | head -5
timeout 90 $D/bin/trun $D/llama/step.so --data $D/llama/tokens.bin --steps 4 --seed 0 --profile > $OUT/prof.txt 2>&1
grep -A16 "by kind" $OUT/prof.txt | head -18
tar -C $OUT -czf $OUT/all.tar.gz r r.log prof.txt kft.txt par_fp32.jsonl par_bf16.jsonl
cat $OUT/r/table.md
