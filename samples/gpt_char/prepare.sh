#!/usr/bin/env bash
# Sourced by run.sh and kill_resume.sh (with `here` set to this folder):
# sets root, build (TCC_BUILD_DIR) and out (OUT_DIR), tokenizes Debian's
# fortunes into $out/fortunes_{train,val}.bin and compiles gpt_char.pbtxt
# into $out/gpt_char.so.
root=$(cd "$here/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
out="${OUT_DIR:-$build/samples/gpt_char}"
text_dir=/usr/share/games/fortunes
for tool in tcc trun tcc-data; do
  if [ ! -x "$build/bin/$tool" ]; then
    echo "$(basename "$0"): $build/bin/$tool is missing: build first (bash scripts/build.sh)" >&2
    exit 1
  fi
done
if [ ! -d "$text_dir" ]; then
  echo "$(basename "$0"): $text_dir is missing: install Debian's fortunes (bash scripts/setup.sh)" >&2
  exit 1
fi
mkdir -p "$out"

# 1. Text -> token shards. The fortune files themselves: not the .dat
#    indexes, not the .u8 symlinks (the same files again).
mapfile -t files < <(find "$text_dir" -maxdepth 1 -type f ! -name '*.dat' | LC_ALL=C sort)
"$build/bin/tcc-data" tokenize --level char --val-fraction 0.1 -o "$out/fortunes" "${files[@]}"
vocab=$(grep -o '"vocab_size": *[0-9]*' "$out/fortunes_vocab.json" | grep -o '[0-9]*$')
model_vocab=$(grep -m1 -A4 'name: "wte"' "$here/gpt_char.pbtxt" | grep -m1 -o 'dims: [0-9]*' | cut -d' ' -f2)
if [ "$vocab" != "$model_vocab" ]; then
  echo "$(basename "$0"): the text has $vocab characters but gpt_char.pbtxt has vocab $model_vocab;" \
       "rebuild it with the command in its header (--vocab $vocab)" >&2
  exit 1
fi

# 2. Model -> step library (per-pass IR in dump/).
source "$root/scripts/target.sh" # sets target: cuda with a GPU, else cpu
"$build/bin/tcc" compile --target "$target" --generate "$here/gpt_char.pbtxt" -o "$out/gpt_char.so" --dump-dir "$out/dump"
echo "compiled samples/gpt_char/gpt_char.pbtxt for $target -> $out/gpt_char.so (per-pass IR in $out/dump)"

