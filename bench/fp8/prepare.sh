#!/usr/bin/env bash
# Builds here (no GPU needed) what the FP8 benchmark of issue 37 runs on the
# device machine, into one folder that travels there (git-ignored):
#
#   bash bench/fp8/prepare.sh [DIR]        (default DIR: .devrun-fp8)
#
# DIR/bin/trun, DIR/lib.tar.gz   trun and the Debian libraries it links;
#            DIR/bin/fp8_gemm_test when built (ninja tcc_cuda_fp8_test)
# DIR/steps.tar.xz   five steps for sm_90, each --precision bf16 and fp8
#   (fp8: delayed scaling, the default), and the 1B decoder also with
#   --fp8-scaling current (fp8current):
#   llama1b: a LLaMA-style decoder, 20 layers, width 2048, 16 heads of 128,
#            RMSNorm, RoPE, SwiGLU (hidden 5632), no biases, tied 32000-token
#            embedding: 1,093,058,560 parameters; B=4, T=2048; AdamW 3e-4
#            (0.9, 0.95), wd 0.1, clip 1.0, 100 warm-up steps, cosine to 3e-5
#            over 1000
#   gpt2:    GPT-2 124M (samples/gpt2/gpt2_124m.pbtxt, B=16, T=1024)
#   and their --dump-dir tg-amp reports (which products are FP8) in reports/
# DIR/data.tar.gz  data/text_train.bin: byte tokens (tcc-data tokenize --level byte) of English
#            text and Python source found on this machine (the fortunes, then
#            Python's standard library), 10 MB (1000 steps of the
#            1B decoder read 8.2M tokens): ids < 256 in the models'
#            larger vocabularies, the same batches for both precisions.
# Optional, for an A/B of one compile flag in the same device call:
#   VARIANT="NAME:FLAGS"  also compiles each model's bf16 and fp8 steps with
#                         FLAGS as <model>_<precision>-NAME.so (e.g.
#                         VARIANT="nofuse:--no-fuse-epilogue")
#   MODELS="llama1b"      only these models (default: llama1b gpt2)
#   PRECISIONS="bf16 fp8" only these of bf16, fp8, fp8current (default: all)
# Then on the device machine: bash bench/fp8/run.sh DIR (see its header).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun-fp8}"
arch="${ARCH:-sm_90}"
for tool in tcc trun tcc-data tcc-models; do
  [ -x "$build/bin/$tool" ] || { echo "prepare.sh: $build/bin/$tool missing: bash scripts/build.sh" >&2; exit 1; }
done
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,steps,data,models,reports}
cp "$build/bin/trun" "$dir/bin/"
# The FP8 casts' and products' device test (tests/cuda/fp8_gemm_test.cu).
[ -x "$build/bin/fp8_gemm_test" ] && cp "$build/bin/fp8_gemm_test" "$dir/bin/"
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"

"$build/bin/tcc-models" gpt --vocab 32000 --context 2048 --layers 20 --width 2048 --heads 16 \
  --norm rms --mlp swiglu --mlp-hidden 5632 --positions rope --no-bias --batch 4 \
  --lr 3e-4 --beta1 0.9 --beta2 0.95 --weight-decay 0.1 --grad-clip 1.0 \
  --warmup 100 --decay-steps 1000 --min-lr 3e-5 -o "$dir/models/llama1b.pb"
cp "$root/samples/gpt2/gpt2_124m.pbtxt" "$dir/models/gpt2.pbtxt"
variant_name="" variant_flags=()
if [ -n "${VARIANT:-}" ]; then
  variant_name=${VARIANT%%:*}
  read -r -a variant_flags <<<"${VARIANT#*:}"
fi
for model in llama1b:pb gpt2:pbtxt; do
  name=${model%%:*}
  [[ " ${MODELS:-llama1b gpt2} " == *" $name "* ]] || continue
  precisions="bf16 fp8"
  [ "$name" = llama1b ] && precisions="bf16 fp8 fp8current"
  [ -n "$variant_name" ] && precisions+=" bf16-$variant_name fp8-$variant_name"
  for precision in $precisions; do
    base=${precision%%-*}
    [[ " ${PRECISIONS:-bf16 fp8 fp8current} " == *" $base "* ]] || continue
    flags=(--precision "${base%current}")
    [ "$base" = fp8current ] && flags+=(--fp8-scaling current)
    [ "$precision" != "$base" ] && flags+=("${variant_flags[@]}")
    nice "$build/bin/tcc" compile --target cuda --arch "$arch" "${flags[@]}" \
      "$dir/models/$name.${model##*:}" -o "$dir/steps/${name}_$precision.so" \
      --dump-dir "$dir/dump_${name}_$precision" >/dev/null
    cp "$dir/dump_${name}_$precision"/*-tg-amp-report.txt "$dir/reports/${name}_$precision-tg-amp-report.txt"
    cp "$dir/dump_${name}_$precision"/*-kernels.txt "$dir/reports/${name}_$precision-kernels.txt"
    rm -rf "$dir/dump_${name}_$precision"
  done
done
tar -C "$dir" -cJf "$dir/steps.tar.xz" steps && rm -rf "${dir:?}/steps"

# Text: the fortunes, then Python's standard library, cut at 12 MB.
{
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | LC_ALL=C sort | xargs cat
  find /usr/lib/python3.11 -maxdepth 2 -name '*.py' | LC_ALL=C sort | xargs cat
} 2>/dev/null | head -c 10000000 > "$dir/data/text.txt" || true # head closes the pipe early
[ "$(stat -c %s "$dir/data/text.txt")" = 10000000 ] || { echo "prepare.sh: less than 10 MB of text found" >&2; exit 1; }
"$build/bin/tcc-data" tokenize --level byte --val-fraction 0.02 -o "$dir/data/text" "$dir/data/text.txt" >/dev/null
rm "$dir/data/text.txt"
tar -C "$dir" -czf "$dir/data.tar.gz" data && rm -rf "${dir:?}/data"
du -sh "$dir"
