#!/usr/bin/env bash
# Builds here (no GPU needed) what tests/gpu/remat_checks.sh runs on the
# device machine (issue 14), into one folder that travels there (< 64 MiB
# with the working tree):
#
#   bash tests/gpu/prepare_remat.sh [DIR] [all|chunk]
#   (default DIR: .devrun, git-ignored; chunk: only what remat_checks.sh's
#   part chunk runs, listed below)
#
# DIR/bin       trun, kernel_families_test (the ordered scatter-add cases)
# DIR/lib.tar.gz  trun's shared libraries the device machine lacks
# DIR/steps.tar.gz  cuda steps for the device's architecture ($ARCH, sm_90):
#   gpt2_short bf16 --deterministic, unconstrained and under 0.8x its need
#     (the same-function check);
#   GPT-2 124M bf16 unconstrained and under 7.2, 6.5 and 5.9 GiB budgets;
#   GPT-2 124M bf16 --batch auto under 8, 16 and 40 GiB;
#   GPT-2 1.5B (48 layers, width 1600) bf16 under --memory-budget 40GiB
#   xl: only GPT-2 1.5B under 40 GiB (trun it directly: remat_checks.sh's
#     part xl also runs PyTorch);
#   chunk: gpt2_short bf16 --deterministic and fp32, each whole and with
#     --loss-chunks 4; GPT-2 124M bf16 unconstrained, --loss-chunks 4, and
#     under 5.9 GiB with the chunks --memory-budget picks and with
#     --loss-chunks 1
# DIR/plans.txt  each step's planned bytes (tcc compile -v: "the step needs
#               ...: X (N bytes) on the device") and --batch auto's choices
# DIR/data.tar.gz  the shuffled fortunes as bytes (gpt2_short's data)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun}"
part="${2:-all}"
case "$part" in all|chunk|xl) ;; *) echo "prepare_remat.sh: part is all, chunk or xl, got '$part'" >&2; exit 2;; esac
arch="${ARCH:-sm_90}"
for tool in tcc trun tcc-data tcc-models kernel_families_test; do
  [ -x "$build/bin/$tool" ] || { echo "prepare_remat.sh: $build/bin/$tool missing: bash scripts/build.sh" >&2; exit 1; }
done
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,steps,data,models}
cp "$build/bin/trun" "$build/bin/kernel_families_test" "$dir/bin/"
strip "$dir/bin/"*
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"

py=/usr/bin/python3
tcc="$build/bin/tcc"
models="$dir/models"
text=$("$py" "$root/tests/gpu/amp_models.py" args gpt2_short)
mapfile -t flags <<<"$text"
"$build/bin/tcc-models" gpt "${flags[@]}" -o "$models/gpt2_short.pbtxt"
"$build/bin/tcc-models" gpt --vocab 50304 --context 1024 --layers 48 --width 1600 --heads 25 --batch 16 \
  -o "$models/gpt2_xl.pbtxt"
bytes_of() { sed -n 's/^tcc: the step needs .*: \([0-9.]* [KMG]*i*B ([0-9]* bytes)\) on the device.*$/\1/p'; }
planned() { # NAME MODEL [flags...]: a cuda step ($PRECISION, default bf16); its plan into plans.txt
  local name=$1 model=$2 text; shift 2
  text=$("$tcc" compile --target cuda --arch "$arch" --precision "${PRECISION:-bf16}" "$model" \
           -o "$dir/steps/$name" -v "$@" 2>&1) || { echo "$text" >&2; return 1; }
  echo "$name $(bytes_of <<<"$text")$(sed -n 's/^tcc: --batch auto: / --batch auto: /p' <<<"$text")" \
    >>"$dir/plans.txt"
}
short_need=$("$tcc" compile --target cuda --arch "$arch" --precision bf16 --deterministic \
  "$models/gpt2_short.pbtxt" --compile-to source -o /dev/null -v 2>&1 \
  | sed -n 's/^tcc: the step needs .*(\([0-9]*\) bytes) on the device.*$/\1/p')
planned gpt2_short_det.so "$models/gpt2_short.pbtxt" --deterministic
gpt2="$root/samples/gpt2/gpt2_124m.pbtxt"
if [ "$part" = xl ]; then
  planned gpt2xl_bf16_b40.so "$models/gpt2_xl.pbtxt" --memory-budget 40GiB
elif [ "$part" = chunk ]; then
  planned gpt2_short_det_c4.so "$models/gpt2_short.pbtxt" --deterministic --loss-chunks 4
  PRECISION=fp32 planned gpt2_short_fp32.so "$models/gpt2_short.pbtxt"
  PRECISION=fp32 planned gpt2_short_fp32_c4.so "$models/gpt2_short.pbtxt" --loss-chunks 4
  planned gpt2_bf16.so "$gpt2"
  planned gpt2_bf16_c4.so "$gpt2" --loss-chunks 4
  planned gpt2_bf16_b5.9.so "$gpt2" --memory-budget 5.9GiB
  planned gpt2_bf16_b5.9_c1.so "$gpt2" --memory-budget 5.9GiB --loss-chunks 1
else
planned gpt2_short_det_remat.so "$models/gpt2_short.pbtxt" --deterministic \
  --memory-budget $((short_need * 4 / 5))
planned gpt2_bf16.so "$gpt2"
for budget in 7.2 6.5 5.9; do
  planned "gpt2_bf16_b$budget.so" "$gpt2" --memory-budget "${budget}GiB"
done
for budget in 8 16 40; do
  planned "gpt2_bf16_auto$budget.so" "$gpt2" --memory-budget "${budget}GiB" --batch auto
done
planned gpt2xl_bf16_b40.so "$models/gpt2_xl.pbtxt" --memory-budget 40GiB
fi

"$py" "$root/tests/gpu/shuffle_fortunes.py" /usr/share/games/fortunes "$dir/data/fortunes_shuffled.txt"
"$build/bin/tcc-data" tokenize --level byte --val-fraction 0.1 \
  -o "$dir/data/fortunes_shuffled_bytes" "$dir/data/fortunes_shuffled.txt" >/dev/null
rm "$dir/data/fortunes_shuffled.txt"
for part in steps data; do
  tar -C "$dir" -czf "$dir/$part.tar.gz" $part && rm -rf "${dir:?}/$part"
done
cat "$dir/plans.txt"
du -sh "$dir"
