#!/usr/bin/env bash
# Builds here (no GPU needed) everything the GPU checks and the GPT-2
# benchmark run on the device machine, into one folder that travels there:
#
#   bash tests/gpu/prepare.sh [DIR]      (default DIR: .devrun, git-ignored)
#
# DIR/bin       trun and the CUDA kernel-family test
# DIR/lib.tar.gz  trun's shared libraries that the device machine lacks
# DIR/steps     mlp and gpt_char for cpu (no -march=native) and cuda (fp32,
#               no TF32), gpt_char also for sm_80 and sm_100, GPT-2 124M for
#               cuda (fp32 and TF32)
# DIR/data      a 6400-image Fashion-MNIST subset (.npy) and the fortunes
#               character shards
# Then on the device machine: bash tests/gpu/run.sh DIR (see README.md).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun}"
arch="${ARCH:-sm_90}"
for tool in tcc trun tcc-data; do
  [ -x "$build/bin/$tool" ] || { echo "prepare.sh: $build/bin/$tool missing: bash scripts/build.sh" >&2; exit 1; }
done
[ -x "$build/bin/kernel_families_test" ] || { echo "prepare.sh: $build/bin/kernel_families_test missing (needs nvcc): ninja -C $build tcc_cuda_kernel_test" >&2; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,steps,data}
cp "$build/bin/trun" "$build/bin/kernel_families_test" "$dir/bin/"

# trun's libraries from Debian (absl, protobuf, openblas, gomp, ...): the
# device machine runs another distribution. The C/C++ runtime stays its own.
for exe in "$dir/bin/trun"; do
  ldd "$exe" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
done
# The cpu steps load OpenBLAS and libgomp at run time too.
for lib in $(ldconfig -p | awk '/libopenblas.so.0 |libgomp.so.1 /{print $NF}' | sort -u); do
  cp -L "$lib" "$dir/lib/"
done
openblas_deps=$(ldd "$(ldconfig -p | awk '/libopenblas.so.0 /{print $NF; exit}')" | awk '/=> \//{print $3}' | grep -E 'libgfortran|libquadmath' || true)
for lib in $openblas_deps; do cp -L "$lib" "$dir/lib/"; done
# Packed: the working tree that travels is limited to 64 MiB (OpenBLAS alone
# is 36 MB); run.sh unpacks it.
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"

tcc="$build/bin/tcc"
"$tcc" compile --target cpu --no-native "$root/samples/mlp/mlp.pbtxt" -o "$dir/steps/mlp_cpu.so"
"$tcc" compile --target cuda --arch "$arch" "$root/samples/mlp/mlp.pbtxt" -o "$dir/steps/mlp_cuda.so"
"$tcc" compile --target cpu --no-native "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cpu.so"
"$tcc" compile --target cuda --arch "$arch" "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cuda.so"
# The architecture checks: sm_80 code runs on Hopper through its PTX, sm_100
# code must be refused at start.
"$tcc" compile --target cuda --arch sm_80 "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cuda_sm80.so"
"$tcc" compile --target cuda --arch sm_100 "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cuda_sm100.so"
# Dynamic loss scaling: gpt_char with the default scale (2^16, must train
# like the unscaled step), and the MLP with its loss summed over the batch
# and a 2^127 start, which overflows (tests/e2e/loss_scaling_test.py on the
# CPU does the same).
"$tcc" compile --target cuda --arch "$arch" --loss-scale dynamic "$root/samples/gpt_char/gpt_char.pbtxt" -o "$dir/steps/gpt_char_cuda_ls.so"
sed -e 's/op: "mean"/op: "sum"/' -e 's/learning_rate: 0.1$/learning_rate: 0.0015625/' \
    -e 's/^training {$/training {\n  grad_clip: 1000.0/' "$root/samples/mlp/mlp.pbtxt" > "$dir/steps/mlp_sum.pbtxt"
"$tcc" compile --target cuda --arch "$arch" --loss-scale dynamic --initial-loss-scale 1.7014118346046923e38 \
    --loss-scale-growth-interval 4 "$dir/steps/mlp_sum.pbtxt" -o "$dir/steps/mlp_sum_overflow_cuda.so"
"$tcc" compile --target cuda --arch "$arch" "$root/samples/gpt2/gpt2_124m.pbtxt" -o "$dir/steps/gpt2_cuda.so" -v
"$tcc" compile --target cuda --arch "$arch" --tf32 "$root/samples/gpt2/gpt2_124m.pbtxt" -o "$dir/steps/gpt2_cuda_tf32.so" -v

# Data: 100 steps of the MLP (batch 64) need 6400 images.
/usr/bin/python3 "$root/tests/gpu/idx_subset.py" /usr/share/datasets/fashion-mnist 6400 "$dir/data"
mapfile -t files < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | LC_ALL=C sort)
"$build/bin/tcc-data" tokenize --level char --val-fraction 0.1 -o "$dir/data/fortunes" "${files[@]}" >/dev/null
du -sh "$dir"
