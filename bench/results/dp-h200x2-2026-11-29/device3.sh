#!/usr/bin/env bash
# 2 GPUs: data-parallel exits and scaling (dp_checks parts 1, 2, 4 without PyTorch), then the LLaMA suite row
# with the bias-free residual epilogue.
set -uo pipefail
export CUDA_MODULE_LOADING=LAZY NCCL_NVLS_ENABLE=0
nvidia-smi -L
PARTS="1 2 4" TORCH=0 timeout 330 bash tests/gpu/dp_checks.sh .devrun-dp $OUT/dp > $OUT/dp.log 2>&1
echo "dp_checks rc=$?"
tail -25 $OUT/dp.log
source tests/gpu/cudnn_path.sh
D=.devrun-llama
MODELS=llama MODES=compile INIT=torch STEPS=30 TIMEOUT=200 timeout 230 bash bench/models/run.sh $D $OUT/r > $OUT/r.log 2>&1
echo "models rc=$?"
tar -C $OUT -czf $OUT/all.tar.gz dp r r.log dp.log
cat $OUT/r/table.md
