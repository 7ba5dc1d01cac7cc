# Code generation's sources (the TccCodegen library, compiler/CMakeLists.txt):
# its sources by target (common/, cpu/, cuda/), the CUDA prelude and host
# support concatenated from their pieces, and the files pasted into
# generated sources, embedded into tcc.
set(TCC_CODEGEN_DIR ${CMAKE_CURRENT_SOURCE_DIR}/codegen)

set(TCC_CODEGEN_SOURCES
  codegen/common/AttentionCall.cpp
  codegen/common/CTypes.cpp
  codegen/common/LoopLayout.cpp
  codegen/common/ScalarPrinter.cpp
  codegen/common/StepArguments.cpp
  codegen/common/StepInterface.cpp
  codegen/cpu/CpuCodegen.cpp
  codegen/cpu/CpuAttention.cpp
  codegen/cpu/CpuNorm.cpp
  codegen/cpu/CpuGemm.cpp
  codegen/cpu/CpuReduce.cpp
  codegen/cpu/CpuConv.cpp
  codegen/cuda/CudaCodegen.cpp
  codegen/cuda/BufferFootprint.cpp
  codegen/cuda/CudaStepEmitter.cpp
  codegen/cuda/KernelRegistry.cpp
  codegen/cuda/ElementwiseKernels.cpp
  codegen/cuda/ReducePlan.cpp
  codegen/cuda/ReductionKernels.cpp
  codegen/cuda/GemmKernels.cpp
  codegen/cuda/Fp8Gemm.cpp
  codegen/cuda/Fp8GemmKernels.cpp
  codegen/cuda/Fp8CastProducers.cpp
  codegen/cuda/Fp8RopeCast.cpp
  codegen/cuda/CopyKernels.cpp
  codegen/cuda/PreludeKernels.cpp
  codegen/cuda/AttentionKernels.cpp
  codegen/cuda/RopeKernels.cpp
  codegen/cuda/MultiTensorKernels.cpp
  codegen/cuda/NormKernels.cpp
  codegen/cuda/ConvKernels.cpp
)

# OUT = the PIECES (a list of files) one after another, byte for byte, at
# build time (common/ConcatSources.cmake).
function(tcc_concat_sources out pieces comment)
  string(REPLACE ";" "|" pieces_arg "${pieces}")
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DPIECES=${pieces_arg}
            -P ${TCC_CODEGEN_DIR}/common/ConcatSources.cmake
    DEPENDS ${pieces} ${TCC_CODEGEN_DIR}/common/ConcatSources.cmake
    COMMENT "${comment}"
    VERBATIM)
endfunction()

# The CUDA prelude, one piece per kernel family, in the order of the one
# text pasted into every kernel unit (and included by tests/cuda). Kernels
# of all families come before the launchers (the launchers section opens
# after the detail namespace closes, at the end of embedding_kernels.cuh).
set(TCC_CUDA_PRELUDE_PIECES
  ${TCC_CODEGEN_DIR}/cuda/prelude/common.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/reduce_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/softmax_xent_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/attention_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/attention_backward_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/rope_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/multi_tensor_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/norm_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/norm_backward_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/batch_norm_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/fp8_scaling.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/fp8_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/fp8_rope_source.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/norm_fp8_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/embedding_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/reduce_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/softmax_xent_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/embedding_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/attention_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/rope_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/multi_tensor_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/norm_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/batch_norm_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/fp8_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/norm_fp8_launchers.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/conv_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/pool_kernels.cuh
  ${TCC_CODEGEN_DIR}/cuda/prelude/end.cuh
)
# Included as "compiler/codegen/cuda/cuda_prelude.cuh" below
# TCC_GENERATED_INCLUDE_DIR (tests/cuda does; target tcc_cuda_prelude).
set(TCC_GENERATED_INCLUDE_DIR ${CMAKE_BINARY_DIR}/generated
    CACHE INTERNAL "include folder of generated headers")
set(TCC_CUDA_PRELUDE ${TCC_GENERATED_INCLUDE_DIR}/compiler/codegen/cuda/cuda_prelude.cuh
    CACHE INTERNAL "the CUDA prelude, concatenated from its pieces")
tcc_concat_sources(${TCC_CUDA_PRELUDE} "${TCC_CUDA_PRELUDE_PIECES}"
  "Concatenating the CUDA prelude's kernel-family pieces")
add_custom_target(tcc_cuda_prelude DEPENDS ${TCC_CUDA_PRELUDE})

# The CUDA host support pasted into the host unit, one piece per concern
# (CUDA/cuBLAS errors and state, the tcc_device_api, running one call,
# the cuBLASLt algorithm cache file and search, the CUTLASS instances'
# declarations and their timing against cuBLASLt, cuBLASLt products, tcc's
# sm90 attention's declarations and its timing against cuDNN, profiling),
# concatenated the same way.
set(TCC_CUDA_HOST_SUPPORT_PIECES
  ${TCC_CODEGEN_DIR}/cuda/cudnn/cudnn_attention.h
  ${TCC_CODEGEN_DIR}/cuda/sm90/attention_sm90.h
  ${TCC_CODEGEN_DIR}/cuda/cutlass/sm90_epilogue_choice.h
  ${TCC_CODEGEN_DIR}/cuda/cutlass/gemm_sm90_epilogues.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/errors.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/device_api.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/run_call.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/gemm_cache.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/gemm_search.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/gemm_cutlass.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/gemm.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/gemm_fp8.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/attention.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/attention_sm90_choice.h
  ${TCC_CODEGEN_DIR}/cuda/host_support/profiling.h
)
set(TCC_CUDA_HOST_SUPPORT ${TCC_GENERATED_INCLUDE_DIR}/compiler/codegen/cuda/cuda_host_support.h
    CACHE INTERNAL "the CUDA host support, concatenated from its pieces")
tcc_concat_sources(${TCC_CUDA_HOST_SUPPORT} "${TCC_CUDA_HOST_SUPPORT_PIECES}"
  "Concatenating the CUDA host support's pieces")
# tests/cuda/gemm_epilogue_test.cu includes it.
add_custom_target(tcc_cuda_host_support DEPENDS ${TCC_CUDA_HOST_SUPPORT})

# The CPU prelude pasted into every CPU step: the main piece, the
# counter-based RNG (dropout masks), flash attention and the GEMM epilogue,
# concatenated the same way (cpu_attention.h needs the RNG; its own #include of it is
# guarded, so the pasted text needs no include path).
set(TCC_CPU_PRELUDE_PIECES
  ${TCC_CODEGEN_DIR}/cpu/cpu_prelude.h
  ${CMAKE_SOURCE_DIR}/runtime/include/tcc/counter_rng.h
  ${TCC_CODEGEN_DIR}/cpu/cpu_attention.h
  ${TCC_CODEGEN_DIR}/cpu/cpu_gemm_epilogue.h
  ${TCC_CODEGEN_DIR}/cpu/cpu_norm.h
  ${TCC_CODEGEN_DIR}/cpu/cpu_conv.h
)
set(TCC_CPU_PRELUDE ${TCC_GENERATED_INCLUDE_DIR}/compiler/codegen/cpu/cpu_prelude_pasted.h)
tcc_concat_sources(${TCC_CPU_PRELUDE} "${TCC_CPU_PRELUDE_PIECES}"
  "Concatenating the CPU prelude's pieces")

# The cuDNN attention unit (its interface, then its body): a host unit of
# its own in every step that uses cuDNN attention, identical in all of them.
set(TCC_CUDNN_UNIT_PIECES
  ${TCC_CODEGEN_DIR}/cuda/cudnn/cudnn_attention.h
  ${TCC_CODEGEN_DIR}/cuda/cudnn/cudnn_attention.cpp
)
set(TCC_CUDNN_UNIT ${TCC_GENERATED_INCLUDE_DIR}/compiler/codegen/cuda/cudnn_attention_unit.cpp
    CACHE INTERNAL "the cuDNN attention unit, concatenated from its pieces")
tcc_concat_sources(${TCC_CUDNN_UNIT} "${TCC_CUDNN_UNIT_PIECES}"
  "Concatenating the cuDNN attention unit")

# The CUTLASS Hopper epilogue GEMMs' unit: its header (the instances'
# declarations, also a host-support piece) and the instances.
set(TCC_CUTLASS_UNIT_PIECES
  ${TCC_CODEGEN_DIR}/cuda/cutlass/sm90_epilogue_choice.h
  ${TCC_CODEGEN_DIR}/cuda/cutlass/gemm_sm90_epilogues.h
  ${TCC_CODEGEN_DIR}/cuda/cutlass/gemm_sm90_epilogues.cu
)
set(TCC_CUTLASS_UNIT ${TCC_GENERATED_INCLUDE_DIR}/compiler/codegen/cuda/cutlass_sm90_unit.cu
    CACHE INTERNAL "the CUTLASS sm90 unit, concatenated from its pieces")
tcc_concat_sources(${TCC_CUTLASS_UNIT} "${TCC_CUTLASS_UNIT_PIECES}"
  "Concatenating the CUTLASS sm90 unit")

# tcc's own Hopper attention (cuda/sm90/): the forward's unit and the
# backward's, each its headers pasted in front of its .cu (whose includes
# are guarded), compiled once per machine for sm_90a by tcc compile and
# cached like the CUTLASS instances.
set(TCC_SM90_DIR ${TCC_CODEGEN_DIR}/cuda/sm90)
set(TCC_SM90_HEADER_PIECES
  ${TCC_SM90_DIR}/attention_sm90.h
  ${TCC_SM90_DIR}/tensor_maps.h
  ${TCC_SM90_DIR}/async_copy.cuh
  ${TCC_SM90_DIR}/wgmma.cuh
)
set(TCC_SM90_FORWARD_UNIT
    ${TCC_GENERATED_INCLUDE_DIR}/compiler/codegen/cuda/sm90_attention_forward_unit.cu)
tcc_concat_sources(${TCC_SM90_FORWARD_UNIT}
  "${TCC_SM90_HEADER_PIECES};${TCC_SM90_DIR}/attention_sm90.cu"
  "Concatenating the sm90 attention forward unit")
set(TCC_SM90_BACKWARD_UNIT
    ${TCC_GENERATED_INCLUDE_DIR}/compiler/codegen/cuda/sm90_attention_backward_unit.cu)
tcc_concat_sources(${TCC_SM90_BACKWARD_UNIT}
  "${TCC_SM90_HEADER_PIECES};${TCC_SM90_DIR}/attention_backward_sm90.cu"
  "Concatenating the sm90 attention backward unit")

# Files pasted into generated sources, embedded at build time.
set(TCC_EMBEDDED_CPP ${CMAKE_CURRENT_BINARY_DIR}/EmbeddedSources.cpp)
add_custom_command(
  OUTPUT ${TCC_EMBEDDED_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${TCC_EMBEDDED_CPP}
          -DABI=${CMAKE_SOURCE_DIR}/runtime/include/tcc/step_abi.h
          -DPRELUDE=${TCC_CPU_PRELUDE}
          -DCUDA_PRELUDE=${TCC_CUDA_PRELUDE}
          -DCUDA_HOST=${TCC_CUDA_HOST_SUPPORT}
          -DCUDNN_UNIT=${TCC_CUDNN_UNIT}
          -DCUTLASS_UNIT=${TCC_CUTLASS_UNIT}
          -DSM90_FORWARD_UNIT=${TCC_SM90_FORWARD_UNIT}
          -DSM90_BACKWARD_UNIT=${TCC_SM90_BACKWARD_UNIT}
          -DCUDA_CONTROL_LAYOUT=${TCC_CODEGEN_DIR}/cuda/ControlBlockLayout.h
          -P ${TCC_CODEGEN_DIR}/common/EmbedSources.cmake
  DEPENDS ${CMAKE_SOURCE_DIR}/runtime/include/tcc/step_abi.h
          ${TCC_CPU_PRELUDE} ${TCC_CUDA_PRELUDE}
          ${TCC_CUDA_HOST_SUPPORT} ${TCC_CUDNN_UNIT} ${TCC_CUTLASS_UNIT}
          ${TCC_SM90_FORWARD_UNIT} ${TCC_SM90_BACKWARD_UNIT}
          ${TCC_CODEGEN_DIR}/cuda/ControlBlockLayout.h
          ${TCC_CODEGEN_DIR}/common/EmbedSources.cmake
  COMMENT "Embedding the step ABI header and the CPU and CUDA preludes"
  VERBATIM)
