#!/usr/bin/env bash
# LLaMA with tg-fuse-rms-norm and rope folded into strides: kernel tests, suite vs torch.compile, profile.
set -uo pipefail
export CUDA_MODULE_LOADING=LAZY
source tests/gpu/cudnn_path.sh
D=.devrun-llama
timeout 240 $D/tb/kernel_families_test > $OUT/kft.txt 2>&1; echo "kernel_families_test rc=$? $(grep -c FAIL $OUT/kft.txt) FAIL; $(tail -1 $OUT/kft.txt)"
grep -i "rope" $OUT/kft.txt | grep -ic pass | sed 's/^/rope cases passed: /'
MODELS=llama MODES=compile INIT=torch STEPS=20 TIMEOUT=300 timeout 400 bash bench/models/run.sh $D $OUT/r > $OUT/r.log 2>&1
echo "models rc=$?"
export LD_LIBRARY_PATH="$PWD/$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
grep -h "gpu memory\|error" $OUT/r/llama/tcc.log | head -5
data=$(ls $D/llama/*.bin 2>/dev/null | head -1); [ -z "$data" ] && data=$(python3 bench/models/make_data.py $D/llama)
echo "data: $data"
timeout 90 $D/bin/trun $D/llama/step.so --data $data --steps 4 --seed 0 --profile > $OUT/prof.txt 2>&1
grep -A22 "by kind" $OUT/prof.txt | head -24
tar -C $OUT -czf $OUT/all.tar.gz r r.log prof.txt kft.txt
cat $OUT/r/table.md
