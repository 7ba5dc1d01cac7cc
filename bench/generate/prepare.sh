#!/usr/bin/env bash
# Builds here what bench/generate/run.sh measures, into DIR (default
# .devrun-gen, git-ignored; it travels to the GPU machine):
#   DIR/bin/trun, DIR/lib.tar.gz  trun and the Debian libraries it links
#   DIR/steps/{char,mid}_{cpu,cuda}.so  two GPTs compiled with --generate
#       (the KV-cache entries), fp32: "char" (vocab 256, context 128, 4
#       layers, width 128, 4 heads: 0.83M parameters, the gpt_char sample's
#       shape over bytes) and "mid" (vocab 256, context 256, 6 layers, width
#       384, 6 heads: 10.8M), both at batch 8 (the generation rows)
#   DIR/data/  byte shards of Debian's fortunes (30 training steps make the
#       weights both trun and PyTorch read)
#   DIR/models.sh  the tcc-models flags of each model
#
#   bash bench/generate/prepare.sh [DIR]      then on the GPU machine:
#   bash bench/generate/run.sh DIR cuda       (here: bash bench/generate/run.sh DIR cpu)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun-gen}"
arch="${ARCH:-sm_90}"
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,steps,data}
cp "$build/bin/trun" "$dir/bin/"
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
# The cpu steps load OpenBLAS and libgomp at run time.
copy_cpu_step_libs "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"
cat > "$dir/models.sh" <<'MODELS'
char_flags="--vocab 256 --context 128 --layers 4 --width 128 --heads 4 --batch 8"
mid_flags="--vocab 256 --context 256 --layers 6 --width 384 --heads 6 --batch 8"
MODELS
source "$dir/models.sh"
for m in char mid; do
  flags="${m}_flags"
  "$build/bin/tcc-models" gpt ${!flags} -o "$dir/steps/$m.pbtxt"
  "$build/bin/tcc" compile --target cpu --no-native --precision fp32 --generate \
    "$dir/steps/$m.pbtxt" -o "$dir/steps/${m}_cpu.so"
  "$build/bin/tcc" compile --target cuda --arch "$arch" --precision fp32 --generate \
    "$dir/steps/$m.pbtxt" -o "$dir/steps/${m}_cuda.so"
done
"$build/bin/tcc-data" tokenize --level byte -o "$dir/data/fortunes" \
  /usr/share/games/fortunes/art /usr/share/games/fortunes/science >/dev/null
ls -la "$dir" "$dir/steps"
