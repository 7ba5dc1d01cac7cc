#!/usr/bin/env bash
# tcc's flash attention against PyTorch SDPA (flash, cuDNN, efficient
# backends) on this machine's GPU, bf16, causal: B16 H12 T1024 D64 and
# B8 H16 T2048 D128. Prints one table: forward / backward TFLOP/s of each
# row and tcc's ratio to it.
#
#   bench/attention/run.sh [OUTDIR]
#
# Builds attention_bench.cu with nvcc (sm_90a + sm_80) from the prelude
# pieces listed in compiler/codegen/CodegenSources.cmake, unless
# TCC_ATTN_BENCH names a binary built already (e.g. one carried to the
# device machine). Raw outputs go to OUTDIR (default: a temporary folder).
#
# FLOPs convention (both programs): forward = 4 * B * H * T * S * D,
# halved for causal; backward = 2.5 x forward. Times: CUDA events, median
# of 30 after 5 warmup calls.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
bin=${TCC_ATTN_BENCH:-}
if [ -z "$bin" ]; then
  root=$(cd "$here/../.." && pwd)
  source "$here/../cuda_prelude.sh"
  write_cuda_prelude "$root" "$out/gen"
  nvcc -std=c++17 -O3 --expt-relaxed-constexpr \
    -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 \
    -I"$root" -I"$out/gen" "$here/attention_bench.cu" -o "$out/attention_bench"
  bin=$out/attention_bench
fi
"$bin" | tee "$out/tcc.txt"
PYTHONUNBUFFERED=1 python3 "$here/torch_sdpa.py" | tee "$out/sdpa.txt"
python3 - "$out/tcc.txt" "$out/sdpa.txt" <<'PY' | tee "$out/table.txt"
import sys
rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        f = line.split()
        if f and f[0] == "RESULT":
            name, shape = f[1], " ".join(f[2:7])
            rows.setdefault(shape, {})[name] = (float(f[9]), float(f[10]))
for shape, r in rows.items():
    B, H, T, D, c = shape.split()
    print(f"\nB{B} H{H} T{T} D{D} {'causal' if c == '1' else 'full'}, bf16 (TFLOP/s)")
    print(f"{'':16}{'fwd':>8}{'bwd':>8}{'tcc/fwd':>10}{'tcc/bwd':>10}")
    tf, tb = r.get("tcc", (float("nan"), float("nan")))
    for name in ("tcc", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient"):
        if name not in r:
            print(f"{name:16}{'n/a':>8}")
            continue
        fw, bw = r[name]
        print(f"{name:16}{fw:8.1f}{bw:8.1f}{tf / fw:10.2f}{tb / bw:10.2f}")
PY
