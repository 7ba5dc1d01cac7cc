# cmake -DOUT=file.cpp -DABI=step_abi.h -DPRELUDE=cpu_prelude.h
#       -DCUDA_PRELUDE=cuda_prelude.cuh -DCUDA_HOST=cuda_host_support.h
#       -DCUDNN_UNIT=cudnn_attention_unit.cpp -DCUTLASS_UNIT=cutlass_sm90_unit.cu
#       -DSM90_FORWARD_UNIT=sm90_attention_forward_unit.cu
#       -DSM90_BACKWARD_UNIT=sm90_attention_backward_unit.cu
#       -DCUDA_CONTROL_LAYOUT=ControlBlockLayout.h -P EmbedSources.cmake
# PRELUDE, CUDA_PRELUDE and CUDA_HOST are the concatenated pieces (ConcatSources.cmake).
# cuda_host_support.h includes ControlBlockLayout.h, which the generator
# includes too; generated sources need no include paths, so the layout's
# lines between its "tcc-embed-begin" / "tcc-embed-end" markers are put in
# place of that #include line.
file(READ "${ABI}" abi_text)
file(READ "${PRELUDE}" prelude_text)
file(READ "${CUDA_PRELUDE}" cuda_prelude_text)
file(READ "${CUDA_HOST}" cuda_host_text)
file(READ "${CUDNN_UNIT}" cudnn_unit_text)
file(READ "${CUTLASS_UNIT}" cutlass_unit_text)
file(READ "${SM90_FORWARD_UNIT}" sm90_forward_text)
file(READ "${SM90_BACKWARD_UNIT}" sm90_backward_text)
file(READ "${CUDA_CONTROL_LAYOUT}" layout_text)

set(begin_marker "// tcc-embed-begin\n")
set(end_marker "// tcc-embed-end\n")
string(FIND "${layout_text}" "${begin_marker}" begin)
string(FIND "${layout_text}" "${end_marker}" end)
if(begin EQUAL -1 OR end EQUAL -1 OR end LESS begin)
  message(FATAL_ERROR "${CUDA_CONTROL_LAYOUT}: needs a '// tcc-embed-begin' line before a '// tcc-embed-end' line")
endif()
string(LENGTH "${begin_marker}" begin_length)
math(EXPR body_start "${begin} + ${begin_length}")
math(EXPR body_length "${end} - ${body_start}")
string(SUBSTRING "${layout_text}" ${body_start} ${body_length} layout_body)
set(include_line "#include \"compiler/codegen/cuda/ControlBlockLayout.h\"\n")
string(FIND "${cuda_host_text}" "${include_line}" include_at)
if(include_at EQUAL -1)
  message(FATAL_ERROR "${CUDA_HOST}: no line ${include_line}")
endif()
string(REPLACE "${include_line}" "${layout_body}" cuda_host_text "${cuda_host_text}")

file(WRITE "${OUT}.tmp"
"// Generated from ${ABI}, ${PRELUDE}, ${CUDA_PRELUDE}, ${CUDA_HOST}, ${CUDNN_UNIT}, ${CUTLASS_UNIT}, ${SM90_FORWARD_UNIT}, ${SM90_BACKWARD_UNIT} and ${CUDA_CONTROL_LAYOUT}. Do not edit.\n"
"#include \"compiler/codegen/common/EmbeddedSources.h\"\n"
"namespace tcc::embedded {\n"
"const char *const kStepAbiHeader = R\"tcc_embed(${abi_text})tcc_embed\";\n"
"const char *const kCpuPrelude = R\"tcc_embed(${prelude_text})tcc_embed\";\n"
"const char *const kCudaPrelude = R\"tcc_embed(${cuda_prelude_text})tcc_embed\";\n"
"const char *const kCudaHostSupport = R\"tcc_embed(${cuda_host_text})tcc_embed\";\n"
"const char *const kCudnnAttentionUnit = R\"tcc_embed(${cudnn_unit_text})tcc_embed\";\n"
"const char *const kCutlassSm90Unit = R\"tcc_embed(${cutlass_unit_text})tcc_embed\";\n"
"const char *const kSm90AttentionForwardUnit = R\"tcc_embed(${sm90_forward_text})tcc_embed\";\n"
"const char *const kSm90AttentionBackwardUnit = R\"tcc_embed(${sm90_backward_text})tcc_embed\";\n"
"}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
