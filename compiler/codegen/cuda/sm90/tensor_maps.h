// Host side of tcc's Hopper kernels' TMA copies: CUtensorMaps of the
// attention tensors (q, k, v, out and their gradients), each a 4-d view
// (D, rows, heads, batch) of a strided (B, heads, rows, D) tensor.
// Included by the sm90 .cu units only.
#ifndef TCC_CUDA_SM90_TENSOR_MAPS_H
#define TCC_CUDA_SM90_TENSOR_MAPS_H

#ifndef TCC_CUDA_SM90_ATTENTION_SM90_H
#include "compiler/codegen/cuda/sm90/attention_sm90.h"
#endif

#include <cuda.h> // CUtensorMap and its enums (the encoder comes through the runtime)
#include <cudaTypedefs.h>

#include <mutex>

namespace tcc_sm90 {

// cuTensorMapEncodeTiled from the driver, through the runtime (no -lcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void *ptr = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                         cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  });
  return fn;
}

// Strides (elements) a map can take: not negative, multiples of 8 (TMA
// wants 16-byte multiples).
inline bool tma_strides_ok(const AttnSm90Strides &s) {
  return s.b >= 0 && s.h >= 0 && s.r >= 0 && s.b % 8 == 0 && s.h % 8 == 0 && s.r % 8 == 0;
}

// The map of one 16-bit tensor: boxes of 64 columns x `box_rows` rows of
// one head, 128-byte swizzle (wgmma.cuh's tile layout). Dimensions (D,
// rows, heads, batch) or (D, heads, rows, batch), the smaller stride
// second; *heads_inner says which (the kernel orders its coordinates by
// it). False when TMA cannot describe it or the driver has no encoder.
inline bool encode_attention_map(CUtensorMap *map, const void *base, bool f16, int64_t D,
                                 int64_t rows, int64_t heads, int64_t batch,
                                 const AttnSm90Strides &s, bool *heads_inner,
                                 uint32_t box_rows) {
  const auto fn = tensor_map_encoder();
  if (fn == nullptr)
    return false;
  *heads_inner = s.h < s.r;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(D),
                              static_cast<cuuint64_t>(*heads_inner ? heads : rows),
                              static_cast<cuuint64_t>(*heads_inner ? rows : heads),
                              static_cast<cuuint64_t>(batch)};
  // A stride of a dimension of extent 1 is never stepped; TMA wants it
  // non-zero all the same.
  auto bytes = [](int64_t stride, int64_t extent) {
    return static_cast<cuuint64_t>(extent == 1 && stride == 0 ? 16 : stride * 2);
  };
  const cuuint64_t strides[3] = {
      *heads_inner ? bytes(s.h, heads) : bytes(s.r, rows),
      *heads_inner ? bytes(s.r, rows) : bytes(s.h, heads), bytes(s.b, batch)};
  const cuuint32_t box[4] = {64, *heads_inner ? 1 : box_rows, *heads_inner ? box_rows : 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  return fn(map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
            const_cast<void *>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

} // namespace tcc_sm90

#endif
