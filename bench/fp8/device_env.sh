# Sourced first by a device call's script (bench/results/*/call*/call.sh),
# from the repository root on the device machine:
#
#   source bench/fp8/device_env.sh DIR OUT
#
# writes the GPU's name, power limit, clock and driver to OUT/gpu.txt (and
# prints them: the call's reply says which card gave its numbers), unpacks
# DIR's packed parts (lib, steps, data, bin: bench/fp8/prepare.sh's or
# tests/gpu/prepare.sh's folder) and puts DIR/lib and PyTorch's cuDNN on
# LD_LIBRARY_PATH. The preamble each call script repeated until session 44.
tcc_env_dir=${1:?usage: source bench/fp8/device_env.sh DIR OUT}
tcc_env_out=${2:?usage: source bench/fp8/device_env.sh DIR OUT}
mkdir -p "$tcc_env_out"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv \
  > "$tcc_env_out/gpu.txt" 2>&1
cat "$tcc_env_out/gpu.txt"
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/unpack_parts.sh"
unpack_parts "$tcc_env_dir" lib steps data bin
export LD_LIBRARY_PATH="$(cd "$tcc_env_dir" && pwd)/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/cudnn_path.sh"
