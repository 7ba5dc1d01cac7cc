#!/usr/bin/env bash
# The character-level GPT sample, after the build (bash scripts/build.sh):
# tokenize Debian's fortunes text, compile gpt_char.pbtxt, train it on the
# CPU with validation, save the weights, and print generated text.
#
#   bash samples/gpt_char/run.sh [extra trun training flags]
#   STEPS=200 bash samples/gpt_char/run.sh      # a shorter run
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
steps="${STEPS:-1000}"

# 1-2. Token shards and the compiled step (prepare.sh).
source "$here/prepare.sh" # sets root, build, out

# 3. Train with validation every 100 steps; save the weights.
"$build/bin/trun" "$out/gpt_char.so" --data "$out/fortunes_train.bin" --val "$out/fortunes_val.bin" \
  --steps "$steps" --eval-every 100 --log-every 50 --seed 0 \
  --save-weights "$out/gpt_char.safetensors" "$@"

# 4. Generate text from the trained weights.
"$build/bin/trun" "$out/gpt_char.so" --init-from "$out/gpt_char.safetensors" \
  --sample 400 --prompt "${PROMPT:-The }" --vocab "$out/fortunes_vocab.json" \
  --temperature 0.8 --seed 1
