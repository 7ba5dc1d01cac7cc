#!/usr/bin/env bash
# The character-level GPT sample, after the build (bash scripts/build.sh):
# tokenize Debian's fortunes text, compile gpt_char.pbtxt, train it on the
# CPU with validation, save the weights, and print generated text.
#
#   bash samples/gpt_char/run.sh [extra trun training flags]
#   STEPS=200 bash samples/gpt_char/run.sh      # a shorter run
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
out="${OUT_DIR:-$build/samples/gpt_char}"
steps="${STEPS:-1000}"
text_dir=/usr/share/games/fortunes

for tool in tcc trun tcc-data; do
  if [ ! -x "$build/bin/$tool" ]; then
    echo "run.sh: $build/bin/$tool is missing: build first (bash scripts/build.sh)" >&2
    exit 1
  fi
done
if [ ! -d "$text_dir" ]; then
  echo "run.sh: $text_dir is missing: install Debian's fortunes (bash scripts/setup.sh)" >&2
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
  echo "run.sh: the text has $vocab characters but gpt_char.pbtxt has vocab $model_vocab;" \
       "rebuild it with the command in its header (--vocab $vocab)" >&2
  exit 1
fi

# 2. Model -> step library (per-pass IR in dump/).
"$build/bin/tcc" compile "$here/gpt_char.pbtxt" -o "$out/gpt_char.so" --dump-dir "$out/dump"
echo "compiled samples/gpt_char/gpt_char.pbtxt -> $out/gpt_char.so (per-pass IR in $out/dump)"

# 3. Train with validation every 100 steps; save the weights.
"$build/bin/trun" "$out/gpt_char.so" --data "$out/fortunes_train.bin" --val "$out/fortunes_val.bin" \
  --steps "$steps" --eval-every 100 --log-every 50 --seed 0 \
  --save-weights "$out/gpt_char.safetensors" "$@"

# 4. Generate text from the trained weights.
"$build/bin/trun" "$out/gpt_char.so" --init-from "$out/gpt_char.safetensors" \
  --sample 400 --prompt "${PROMPT:-The }" --vocab "$out/fortunes_vocab.json" \
  --temperature 0.8 --seed 1
