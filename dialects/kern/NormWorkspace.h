// The partial-sum scratch of kern.layer_norm_grad (its `workspace`
// operand): (P, S, C) floats, P = normGradParts(rows), S = normGradSlots
// (weight_grad's row, bias_grad's, and input_grad_sum's when there is one).
// One function, used by
// tg-lower-to-kern (which allocates it) and by both code generators (whose
// kernels split the rows into exactly P parts), so the sums of weight_grad
// and bias_grad are added in one fixed order whatever the machine.
#ifndef TCC_DIALECTS_KERN_NORMWORKSPACE_H
#define TCC_DIALECTS_KERN_NORMWORKSPACE_H

#include <algorithm>
#include <cstdint>

namespace tcc::kern {

// Rows per part at least (fewer parts for small inputs), parts at most
// (about four resident 256-thread blocks per SM of an H100 / H200).
inline constexpr int64_t kNormGradRowsPerPart = 32;
inline constexpr int64_t kNormGradMaxParts = 512;

inline int64_t normGradParts(int64_t rows) {
  return std::max<int64_t>(
      1, std::min(kNormGradMaxParts, (rows + kNormGradRowsPerPart - 1) / kNormGradRowsPerPart));
}

// Rows of the layer-norm gradient's workspace per part: dweight and dbias
// always (zeros when not wanted), the input gradient's column sum third.
inline int64_t normGradSlots(bool inputGradSum) { return inputGradSum ? 3 : 2; }

// Batch norm's reductions (kern.batch_norm_stats / _grad_sums) for S > 1:
// P parts per channel of `perChannel` values (N * S), so that C * P blocks
// fill the GPU (about 1024: eight per SM of an H200) while each part keeps
// at least kBatchNormValuesPerPart values. P = 1 (no workspace, one pass) for wide
// layers. The workspace is (P, 2, C).
inline constexpr int64_t kBatchNormTargetBlocks = 1024;
inline constexpr int64_t kBatchNormValuesPerPart = 4096;

inline int64_t batchNormParts(int64_t channels, int64_t perChannel) {
  if (channels <= 0 || perChannel <= 0)
    return 1;
  int64_t want = (kBatchNormTargetBlocks + channels - 1) / channels;
  int64_t most = std::max<int64_t>(1, perChannel / kBatchNormValuesPerPart);
  return std::max<int64_t>(1, std::min(want, most));
}

// S = 1 (channels-last activations seen as a row-major (N, C): the CUDA
// column kernels, batch_norm_*_column_kernel): a block folds a tile of
// kBatchNormColumnChannels channels (the prelude's kBnColumnChannels) over
// one of P row ranges, so tiles * P blocks should fill the GPU (about 528:
// four resident 256-thread blocks per SM of an H200, one wave) while each
// part keeps at least kBatchNormColumnRowsPerPart rows (eight per thread)
// and P stays at most kBatchNormColumnMaxParts (the finish adds the parts
// of a channel on 32 lanes). E.g. (200704, 64): 528 parts of 381 rows;
// (3136, 2048): 32 tiles x 12 parts; (131072, 128): 2 tiles x 264 parts.
inline constexpr int64_t kBatchNormColumnChannels = 64;
inline constexpr int64_t kBatchNormColumnTargetBlocks = 528;
inline constexpr int64_t kBatchNormColumnRowsPerPart = 256;
inline constexpr int64_t kBatchNormColumnMaxParts = 1024;

inline int64_t batchNormColumnParts(int64_t channels, int64_t rows) {
  if (channels <= 0 || rows <= 0)
    return 1;
  int64_t tiles = (channels + kBatchNormColumnChannels - 1) / kBatchNormColumnChannels;
  int64_t want = (kBatchNormColumnTargetBlocks + tiles - 1) / tiles;
  int64_t most = std::max<int64_t>(1, rows / kBatchNormColumnRowsPerPart);
  return std::max<int64_t>(1, std::min({want, most, kBatchNormColumnMaxParts}));
}

// x (N, C, S...) of `elements` values as batch norm's reductions read it:
// N, C, S (the product of the other axes) and the parts per channel
// (batchNormColumnParts when S = 1, else batchNormParts).
struct BatchNormDims {
  int64_t n, c, s, parts;
  int64_t perChannel() const { return n * s; }
};

inline BatchNormDims batchNormDims(int64_t n, int64_t c, int64_t elements) {
  int64_t s = n * c == 0 ? 0 : elements / (n * c);
  return {n, c, s, s == 1 ? batchNormColumnParts(c, n) : batchNormParts(c, n * s)};
}

} // namespace tcc::kern

#endif
