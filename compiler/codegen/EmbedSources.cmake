# cmake -DOUT=file.cpp -DABI=step_abi.h -DPRELUDE=cpu_prelude.h
#       -DCUDA_PRELUDE=cuda_prelude.cuh -DCUDA_HOST=cuda_host_support.h -P EmbedSources.cmake
file(READ "${ABI}" abi_text)
file(READ "${PRELUDE}" prelude_text)
file(READ "${CUDA_PRELUDE}" cuda_prelude_text)
file(READ "${CUDA_HOST}" cuda_host_text)
file(WRITE "${OUT}.tmp"
"// Generated from ${ABI}, ${PRELUDE}, ${CUDA_PRELUDE} and ${CUDA_HOST}. Do not edit.\n"
"#include \"compiler/codegen/EmbeddedSources.h\"\n"
"namespace tcc::embedded {\n"
"const char *const kStepAbiHeader = R\"tcc_embed(${abi_text})tcc_embed\";\n"
"const char *const kCpuPrelude = R\"tcc_embed(${prelude_text})tcc_embed\";\n"
"const char *const kCudaPrelude = R\"tcc_embed(${cuda_prelude_text})tcc_embed\";\n"
"const char *const kCudaHostSupport = R\"tcc_embed(${cuda_host_text})tcc_embed\";\n"
"}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
