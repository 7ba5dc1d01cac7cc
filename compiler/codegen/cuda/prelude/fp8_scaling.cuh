//===--------------------------------------------------------------------===//
// FP8 scales and statistics (tg-amp's fp8 precision, issue 37): one
// element's cast and its counts, a block's statistics, current scaling's
// rule and delayed scaling's history (the casts of fp8_kernels.cuh and
// norm_fp8_kernels.cuh share them)
//===--------------------------------------------------------------------===//

// NaN-propagating max of two non-negative magnitudes (a NaN stays).
__device__ __forceinline__ float fp8_amax(float a, float b) {
  return (b > a || b != b) ? b : a;
}

// One element of a scaled cast: its byte, and its part of the statistics.
// (Per-thread counts are 32-bit: a thread casts at most a few thousand
// elements per launch; fp8_add_stats widens them.)
template <class F8>
__device__ __forceinline__ uint32_t fp8_cast_one(float x, float s, float &amax,
                                                 uint32_t &overflows, uint32_t &underflows) {
  const float y = x * s;
  const uint32_t q = Fp8Format<F8>::from_float(y);
  amax = fp8_amax(amax, fabsf(x));
  overflows += fabsf(y) > Fp8Format<F8>::kMax && fabsf(x) <= FLT_MAX;
  underflows += x != 0.0f && (q & 0x7f) == 0;
  return q;
}

// The block's statistics into *stats: summed by shuffles within each warp,
// then across the block's warps through shared memory, then one set of
// atomics per block. Every thread of the block calls it once, at the end.
// (One set per warp, as first written, put ~100K atomics on three
// addresses per cast of a 16M-element activation: ~40 us of 80 on the
// H200, 2026-11-30.)
__device__ __forceinline__ void fp8_add_stats(float amax, unsigned long long overflows,
                                              unsigned long long underflows,
                                              Fp8CastStats *stats) {
  for (int offset = 16; offset > 0; offset /= 2) {
    amax = fp8_amax(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    overflows += __shfl_xor_sync(0xffffffffu, overflows, offset);
    underflows += __shfl_xor_sync(0xffffffffu, underflows, offset);
  }
  __shared__ float block_amax[32];
  __shared__ unsigned long long block_overflows[32], block_underflows[32];
  const unsigned thread = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned lane = thread % 32, warp = thread / 32;
  const unsigned warps = (blockDim.x * blockDim.y + 31) / 32;
  if (lane == 0) {
    block_amax[warp] = amax;
    block_overflows[warp] = overflows;
    block_underflows[warp] = underflows;
  }
  __syncthreads();
  if (warp != 0)
    return;
  amax = lane < warps ? block_amax[lane] : 0.0f;
  overflows = lane < warps ? block_overflows[lane] : 0;
  underflows = lane < warps ? block_underflows[lane] : 0;
  for (int offset = 16; offset > 0; offset /= 2) {
    amax = fp8_amax(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    overflows += __shfl_xor_sync(0xffffffffu, overflows, offset);
    underflows += __shfl_xor_sync(0xffffffffu, underflows, offset);
  }
  if (lane == 0) {
    atomicMax(&stats->amax_bits, __float_as_uint(amax));
    if (overflows)
      atomicAdd(&stats->overflows, overflows);
    if (underflows)
      atomicAdd(&stats->underflows, underflows);
  }
}

// Current scaling's rule: the scale that maps amax onto the format's
// largest finite value; 1 for a tensor of zeros or one holding inf or NaN
// (zeros stay zeros, NaN stays NaN and the step's NaN handling sees it); a
// scale past FLT_MAX for a tiny amax is held at FLT_MAX.
template <class F8> __device__ __forceinline__ float fp8_current_scale(float amax) {
  return amax > 0.0f && amax <= FLT_MAX ? fminf(Fp8Format<F8>::kMax / amax, FLT_MAX) : 1.0f;
}

// Delayed scaling, after a cast's statistics: the grid's last block to
// finish (a ticket in current->unused[0], zeroed by the amax kernel) puts
// the cast's amax into the site's history (a non-finite amax is left out,
// so one NaN step does not hold the scale for a whole history), records
// the cast's counts, and sets the next scale: Fp8Format<F8>::kMax over
// the history's maximum (unchanged while that maximum is 0). Every thread
// calls it; thread 0, which did the block's atomics, acts.
// `blocks`: the cast's blocks (the grid, or a batch member's share).
template <class F8>
__device__ __forceinline__ void fp8_finish_delayed(Fp8TensorScale *current,
                                                   Fp8ScalingRecord *record,
                                                   int64_t elements, uint32_t blocks) {
  if (record == nullptr || threadIdx.x != 0 || threadIdx.y != 0)
    return;
  __threadfence();
  if (atomicAdd(&current->unused[0], 1u) != blocks - 1)
    return;
  __threadfence();
  const volatile Fp8CastStats *stats = &current->stats;
  const float amax = __uint_as_float(stats->amax_bits);
  int next = static_cast<int>(record->next);
  if (next < 0 || next >= kFp8AmaxHistory)
    next = 0;
  if (amax <= FLT_MAX) { // finite (NaN compares false)
    record->amax_history[next] = amax;
    record->next = static_cast<float>((next + 1) % kFp8AmaxHistory);
  }
  float largest = 0.0f;
  for (int i = 0; i < kFp8AmaxHistory; ++i)
    largest = fmaxf(largest, record->amax_history[i]);
  if (largest > 0.0f)
    record->scale = fminf(Fp8Format<F8>::kMax / largest, FLT_MAX);
  record->amax = amax;
  record->elements = static_cast<float>(elements);
  record->saturated = static_cast<float>(stats->overflows);
  record->flushed = static_cast<float>(stats->underflows);
  record->casts += 1.0f;
  current->unused[0] = 0;
}

// An empty tensor's record (no cast runs): scale 1, zero statistics.
static __global__ void fp8_empty_scale_kernel(Fp8TensorScale *q) { // static: one per kernel unit
  q->scale = 1.0f;
  q->scale_inv = 1.0f;
  q->stats.amax_bits = 0;
  q->stats.overflows = 0;
  q->stats.underflows = 0;
}

// The scale a cast multiplies by: *scale (a given or delayed scale), or,
// under current scaling (partials non-null), max / amax of this tensor from
// the amax kernel's per-block maxima, reduced by each block (a few loads
// per thread; L2-resident) — block 0 also records it and its inverse in
// *current for the product. Every thread of the block calls it first.
// With a delayed-scaling record whose scale is set, that scale (block 0
// records it for the product); with a record not yet set, current scaling
// from the partials. `block`: the block's index in the cast (the grid's,
// or within a batch member's share).
template <class F8>
__device__ __forceinline__ float fp8_scale_of(const float *scale, const float *partials,
                                              int32_t partial_count, Fp8TensorScale *current,
                                              const Fp8ScalingRecord *record, uint32_t block) {
  if (record != nullptr) {
    const float delayed = record->scale;
    if (delayed > 0.0f) {
      if (block == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
        current->scale = delayed;
        current->scale_inv = 1.0f / delayed;
      }
      return delayed;
    }
  }
  if (partials == nullptr)
    return *scale;
  __shared__ float warp_amax[32];
  const unsigned thread = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned threads = blockDim.x * blockDim.y;
  float amax = 0.0f;
  for (int32_t i = static_cast<int32_t>(thread); i < partial_count; i += threads)
    amax = fp8_amax(amax, partials[i]);
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fp8_amax(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (thread % 32 == 0)
    warp_amax[thread / 32] = amax;
  __syncthreads();
  amax = 0.0f;
  for (unsigned w = 0; w < (threads + 31) / 32; ++w)
    amax = fp8_amax(amax, warp_amax[w]);
  const float s = fp8_current_scale<F8>(amax);
  if (block == 0 && thread == 0) {
    current->scale = s;
    current->scale_inv = 1.0f / s;
  }
  return s;
}

