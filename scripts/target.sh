# Sourced by the sample scripts: sets `target` to cuda when this machine has
# an NVIDIA GPU (nvidia-smi lists one) and nvcc, else cpu. TARGET=cpu|cuda
# overrides. (tcc's own default is cuda whenever nvcc exists, GPU or not.)
if [ -n "${TARGET:-}" ]; then
  target=$TARGET
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' &&
     { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  target=cuda
else
  target=cpu
fi
case "$target" in cpu|cuda) ;; *) echo "TARGET must be cpu or cuda, got '$target'" >&2; exit 2 ;; esac
