# Sourced: puts the folder of PyTorch's libcudnn.so.9 (its nvidia-cudnn
# wheel) on LD_LIBRARY_PATH when the loader does not find one, so that cuda
# steps can open cuDNN for attention (docs/cuda-backend.md). Without either,
# the steps run tcc's flash kernels and trun says so.
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 '; then
  tcc_cudnn_lib=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null || true)
  if [ -n "$tcc_cudnn_lib" ] && [ -f "$tcc_cudnn_lib/libcudnn.so.9" ]; then
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$tcc_cudnn_lib"
  fi
fi
