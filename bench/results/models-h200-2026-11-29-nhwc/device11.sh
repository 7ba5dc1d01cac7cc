#!/usr/bin/env bash
# Channels-last: kernel tests, conv plans, the conv-net suite vs torch.compile, NCHW A/B.
set -uo pipefail
export CUDA_MODULE_LOADING=LAZY
source tests/gpu/cudnn_path.sh
D=.devrun-nhwc
for b in conv_kernels_test cudnn_conv_test; do
  timeout 150 $D/tb/$b > $OUT/$b.txt 2>&1; echo "$b rc=$? $(grep -c FAIL $OUT/$b.txt) FAIL; $(grep 'checks passed\|PASS' $OUT/$b.txt | tail -1)"
done
timeout 120 $D/tb/conv_kernels_test --bench > $OUT/bn_bench.txt 2>&1; grep -i "max-pool" $OUT/bn_bench.txt
MODELS=${MODELS:-resnet50,resnet18_cifar,unet,vit_s16} MODES=compile INIT=tcc STEPS=20 TIMEOUT=200 \
  timeout 420 bash bench/models/run.sh $D $OUT/r > $OUT/r.log 2>&1
echo "models rc=$?"
export LD_LIBRARY_PATH="$PWD/$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for m in $OUT/r/*/; do
  echo "$(basename $m): $(grep -h "gpu memory\|convolutions:" $m/tcc.log | tr '\n' ' ' | cut -c1-300)"
  grep -h "error\|Error" $m/tcc.log | head -3
done
# Conv plans and profile of the NHWC ResNet-50
data=$(python3 bench/models/make_data.py $D/resnet50); echo "data: $data"
TCC_DEBUG_CONV_PLANS=1 timeout 60 $D/bin/trun $D/resnet50/step.so --data $data --steps 3 --seed 0 > $OUT/plans.txt 2>&1
grep "conv plan" $OUT/plans.txt | sort | uniq -c | sort -rn | head -12
timeout 90 $D/bin/trun $D/resnet50/step.so --data $data --steps 12 --seed 0 --profile > $OUT/prof.txt 2>&1
grep -A40 -i "profile" $OUT/prof.txt | head -60
# A/B: the NCHW step of the previous commit (same data, same trun)
for v in nchw:$D/resnet50_nchw.so nhwc:$D/resnet50/step.so; do
  timeout 90 $D/bin/trun ${v#*:} --data $data --steps 25 --seed 0 --metrics $OUT/ab_${v%%:*}.jsonl > $OUT/ab_${v%%:*}.log 2>&1
  python3 -c "import json,statistics,sys; r=[json.loads(l) for l in open(sys.argv[1])]; ms=[x['step_ms'] for x in r if x.get('kind')=='step' and x['step']>5]; print(sys.argv[2], 'median ms', round(statistics.median(ms),2), 'n', len(ms))" $OUT/ab_${v%%:*}.jsonl ${v%%:*}
  grep -h "gpu memory" $OUT/ab_${v%%:*}.log
done
tar -C $OUT -czf $OUT/all.tar.gz r r.log plans.txt prof.txt bn_bench.txt conv_kernels_test.txt cudnn_conv_test.txt 
cat $OUT/r/table.md
