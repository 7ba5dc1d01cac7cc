#!/usr/bin/env bash
# Builds here (no GPU needed) what tests/gpu/dp_checks.sh runs on the device
# machine (issue 15: data parallelism with NCCL), into one folder that
# travels there:
#
#   bash tests/gpu/prepare_dp.sh [DIR]     (default DIR: .devrun, git-ignored)
#
# DIR/bin        trun
# DIR/lib.tar.gz   trun's shared libraries the device machine lacks
# DIR/steps.tar.gz cuda steps for $ARCH (default sm_90), each plain and
#   compiled with --data-parallel (_dp):
#   gpt2_short (tests/gpu/amp_models.py) fp32 and bf16 --deterministic;
#   GPT-2 124M bf16 B=16 T=1024 (samples/gpt2); and ZeRO-1 steps
#   (--shard-optimizer N, _zeroN): gpt2_short fp32 at 1, GPT-2 at 1, 2, 4; ZeRO-3
#   (--shard-parameters 2, _z3_2): gpt2_short fp32 and GPT-2 bf16;
#   the CNN sample (samples/cnn, two BatchNorm2d) fp32: cnn64 (batch 64),
#   cnn32_sync_dp (batch 32, --data-parallel --sync-batch-norm), cnn32_dp
#   (batch 32, --data-parallel: per-rank statistics)
# DIR/data.tar.gz  the shuffled fortunes as bytes (gpt2_short's data) and
#   Fashion-MNIST (the CNN's)
# PREPARE=sync builds only the CNN steps and Fashion-MNIST (dp_checks.sh
# part 6); the default builds everything.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun}"
arch="${ARCH:-sm_90}"
for tool in tcc trun tcc-data tcc-models; do
  [ -x "$build/bin/$tool" ] || { echo "prepare_dp.sh: $build/bin/$tool missing: bash scripts/build.sh" >&2; exit 1; }
done
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,steps,data,models}
cp "$build/bin/trun" "$dir/bin/"
strip "$dir/bin/"*
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"

tcc="$build/bin/tcc"
/usr/bin/python3 "$root/samples/cnn/model.py" -o "$dir/models/cnn.pbtxt" --channels 16,32 --steps 2000 >/dev/null
"$tcc" compile --target cuda --arch "$arch" --precision fp32 --batch 64 "$dir/models/cnn.pbtxt" -o "$dir/steps/cnn64.so"
"$tcc" compile --target cuda --arch "$arch" --precision fp32 --batch 32 --data-parallel --sync-batch-norm \
  "$dir/models/cnn.pbtxt" -o "$dir/steps/cnn32_sync_dp.so"
"$tcc" compile --target cuda --arch "$arch" --precision fp32 --batch 32 --data-parallel \
  "$dir/models/cnn.pbtxt" -o "$dir/steps/cnn32_dp.so"
cp -r /usr/share/datasets/fashion-mnist "$dir/data/fashion-mnist"
if [ "${PREPARE:-all}" != sync ]; then
text=$(/usr/bin/python3 "$root/tests/gpu/amp_models.py" args gpt2_short)
mapfile -t flags <<<"$text"
"$build/bin/tcc-models" gpt "${flags[@]}" -o "$dir/models/gpt2_short.pbtxt"
both() { # NAME MODEL PRECISION [flags...]: NAME.so and NAME_dp.so
  local name=$1 model=$2 precision=$3; shift 3
  "$tcc" compile --target cuda --arch "$arch" --precision "$precision" "$model" -o "$dir/steps/$name.so" "$@"
  "$tcc" compile --target cuda --arch "$arch" --precision "$precision" "$model" -o "$dir/steps/${name}_dp.so" \
    --data-parallel "$@"
}
both gpt2_short_fp32 "$dir/models/gpt2_short.pbtxt" fp32
both gpt2_short_bf16 "$dir/models/gpt2_short.pbtxt" bf16 --deterministic
both gpt2_bf16 "$root/samples/gpt2/gpt2_124m.pbtxt" bf16
# ZeRO-1 (--shard-optimizer N): at one rank for the checks, at 2 and 4 for
# the scaling runs of a machine with that many GPUs.
zero() { # NAME MODEL PRECISION N: NAME_zeroN.so
  "$tcc" compile --target cuda --arch "$arch" --precision "$3" "$2" -o "$dir/steps/${1}_zero$4.so" \
    --shard-optimizer "$4"
}
zero gpt2_short_fp32 "$dir/models/gpt2_short.pbtxt" fp32 1
for n in 1 2 4; do zero gpt2_bf16 "$root/samples/gpt2/gpt2_124m.pbtxt" bf16 $n; done
# ZeRO-3 (--shard-parameters 2, _z3_2): part 9 on 2 GPUs.
z3() { # NAME MODEL PRECISION
  "$tcc" compile --target cuda --arch "$arch" --precision "$3" "$2" -o "$dir/steps/${1}_z3_2.so" \
    --shard-parameters 2
}
z3 gpt2_short_fp32 "$dir/models/gpt2_short.pbtxt" fp32
z3 gpt2_bf16 "$root/samples/gpt2/gpt2_124m.pbtxt" bf16

/usr/bin/python3 "$root/tests/gpu/shuffle_fortunes.py" /usr/share/games/fortunes "$dir/data/fortunes_shuffled.txt"
"$build/bin/tcc-data" tokenize --level byte --val-fraction 0.1 \
  -o "$dir/data/fortunes_shuffled_bytes" "$dir/data/fortunes_shuffled.txt" >/dev/null
rm "$dir/data/fortunes_shuffled.txt"
fi
for part in steps data; do
  tar -C "$dir" -czf "$dir/$part.tar.gz" $part && rm -rf "${dir:?}/$part"
done
du -sh "$dir"
