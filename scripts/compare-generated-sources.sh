#!/usr/bin/env bash
# Shows that code generation is unchanged: the generated CPU and CUDA sources
# of every sample (and of a few tcc-models configurations that reach the ops
# the samples do not: rope, swiglu, rms_norm, dropout, micro-batches, SGD)
# are byte-identical between this tree's tcc and the tcc of an earlier commit.
#
#   bash scripts/compare-generated-sources.sh BASE_COMMIT
#
# BASE_COMMIT's tcc is built in a temporary git worktree (ccache makes a
# second run cheap; TCC_BASE_BUILD_DIR keeps that build between runs). This
# tree's tcc and tcc-models come from $TCC_BUILD_DIR (default ./build), built
# first if missing. Prints one line per (model, variant) and exits 1 on any
# difference, leaving both outputs under the work folder for `diff`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base_ref="${1:?usage: compare-generated-sources.sh BASE_COMMIT}"
base_sha=$(git -C "$root" rev-parse --verify "$base_ref^{commit}")
build="${TCC_BUILD_DIR:-$root/build}"
work="${TCC_COMPARE_DIR:-${TMPDIR:-/tmp}/tcc-compare-${base_sha:0:12}}"
base_tree="$work/base-src"
# Per-tree outputs: several checkouts may compare against one base at once.
mine="$work/$(printf '%s' "$root" | cksum | cut -d' ' -f1)"
base_build="${TCC_BASE_BUILD_DIR:-$work/base-build}"
mkdir -p "$work"

# This tree's tools.
TCC_BUILD_DIR="$build" bash "$root/scripts/build.sh" tcc tcc-models >/dev/null

# The base commit's tcc, from a detached worktree.
exec 9>"$work/.base.lock"
flock 9   # one base worktree and build at a time
if [ ! -d "$base_tree" ]; then
  git -C "$root" worktree add --detach "$base_tree" "$base_sha" >/dev/null
else
  git -C "$base_tree" checkout --quiet --detach "$base_sha"
fi
TCC_BUILD_DIR="$base_build" bash "$base_tree/scripts/build.sh" tcc >/dev/null
new_tcc="$build/bin/tcc"
base_tcc="$base_build/bin/tcc"
flock -u 9

# The models: the samples as committed, and tcc-models outputs (written once
# by this tree's tcc-models, read by both compilers).
models="$mine/models"
rm -rf "$models" && mkdir -p "$models"
for f in "$root"/samples/*/*.pbtxt; do
  [ ! -e "$models/$(basename "$f")" ] || { echo "two samples named $(basename "$f")" >&2; exit 1; }
  cp "$f" "$models/"
done
gen() { local name=$1; shift; "$build/bin/tcc-models" "$@" -o "$models/$name.pbtxt" >/dev/null; }
gen gpt_rope_swiglu_rms gpt --layers 2 --width 64 --heads 4 --context 32 --batch 4 \
  --positions rope --mlp swiglu --norm rms --untied --no-bias
gen gpt_dropout_micro gpt --layers 2 --width 64 --heads 2 --context 16 --batch 4 \
  --dropout 0.1 --micro-batches 2 --grad-clip 0.5
gen mlp_sgd mlp --batch 8 --hidden 32,16 --inputs 20 --classes 5

# The variants: target and flags.
variants=(
  "cpu|--target cpu"
  "cpu-grads|--target cpu --emit-gradients"
  "cuda-sm90|--target cuda --arch sm_90"
  "cuda-sm90-tf32|--target cuda --arch sm_90 --tf32"
  "cuda-sm80|--target cuda --arch sm_80"
)

out="$mine/out"
rm -rf "$out" && mkdir -p "$out"
differ=0 same=0
printf '%-28s %-16s %10s  %s\n' model variant bytes result
for model in "$models"/*.pbtxt; do
  name=$(basename "$model" .pbtxt)
  for v in "${variants[@]}"; do
    label=${v%%|*}
    read -r -a flags <<<"${v#*|}"
    a="$out/$name.$label.base" b="$out/$name.$label.new"
    "$base_tcc" compile "${flags[@]}" --compile-to source "$model" -o "$a"
    "$new_tcc" compile "${flags[@]}" --compile-to source "$model" -o "$b"
    if cmp -s "$a" "$b"; then
      result=identical; same=$((same + 1))
    else
      result="DIFFERENT (diff $a $b)"; differ=$((differ + 1))
    fi
    printf '%-28s %-16s %10s  %s\n' "$name" "$label" "$(wc -c <"$b")" "$result"
  done
done
echo "compare-generated-sources: $same identical, $differ different (base $base_ref = ${base_sha:0:12})"
[ "$differ" -eq 0 ]
