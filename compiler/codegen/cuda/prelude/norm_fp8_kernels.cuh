//===--------------------------------------------------------------------===//
// Normalization cast to FP8 in the same pass (kern.layer_norm read only by
// FP8 products: LLaMA's RMSNorm before the QKV and MLP products, issue 37)
//===--------------------------------------------------------------------===//

// Unfused, the norm reads x (the f32 residual stream: 4 bytes an element)
// and writes its 16-bit output y (2), and the FP8 cast reads y back (2) and
// writes its two layouts (1 + 1): 10 bytes an element. Here one kernel
// reads x and writes the FP8 bytes: 6. The bytes, scale and statistics are
// those of the unfused pair: each row's statistics as
// layer_norm_forward_kernel computes them (the same NormRow chunks, V and
// shuffle order), y rounded to Y once as it stores it, and each y cast
// as the cast kernels do (its float value times the scale, saturated to
// F8; amax, saturated and flushed counts of y).
//
// A block owns bands of `band` rows (a multiple of 4, at most 32); its 8
// warps take the band's rows in turn, one row at a time, and write each
// row's bytes to out (row-major, V bytes a lane) and into a shared copy of
// the band, `band` x (c + 4) bytes (4 bytes of padding a row: the
// transposing reads of 4 rows at one column group fall on different
// banks). Then the block writes the band to out_t (c x rows): a thread
// takes 4 rows x 4 columns, transposes the bytes by byte permutes and
// writes 4 column words; a warp's 32 threads cover whole 32-byte column
// segments. Needs c % 4 == 0 and, for the transposed words, rows % 4 == 0
// and out_t 4-byte aligned (else byte stores).

// Chunks of a row a lane keeps in registers here: 16 (a 2048-wide f32 row
// whole, 64 registers), not the plain norm's 8. Two blocks an SM is what
// the band's shared copy allows anyway, so the registers are free; with 8,
// the row's second half was read one chunk at a time in each pass (a load,
// then its use), and the kernel ran at 62% of the unfused pair's GB/s.
constexpr int kNormFp8CachedChunks = 16;

// The V values of one chunk (V % 2 == 0) rounded to Y, cast to F8 at scale
// s, their bytes (little-endian) in V / 4 words (V >= 4) or the low V bytes
// of word 0; statistics as fp8_cast_one counts them.
template <int V, class Y, class F8, class A>
__device__ __forceinline__ void norm_fp8_cast_chunk(const A (&y)[V], float s, float &amax,
                                                    uint32_t &overflows, uint32_t &underflows,
                                                    uint32_t (&words)[(V + 3) / 4]) {
#pragma unroll
  for (int w = 0; w < (V + 3) / 4; ++w)
    words[w] = 0;
#pragma unroll
  for (int i = 0; i < V; i += 2) {
    // The 16-bit values the unfused norm stores, as the cast reads them.
    const float a = static_cast<float>(Elem<Y>::load(Elem<Y>::store(static_cast<A>(y[i]))));
    const float b =
        static_cast<float>(Elem<Y>::load(Elem<Y>::store(static_cast<A>(y[i + 1]))));
    const float as = a * s, bs = b * s;
    const uint32_t pair = Fp8Format<F8>::from_float2(as, bs);
    amax = fp8_amax(fp8_amax(amax, fabsf(a)), fabsf(b));
    overflows += (fabsf(as) > Fp8Format<F8>::kMax && fabsf(a) <= FLT_MAX) +
                 (fabsf(bs) > Fp8Format<F8>::kMax && fabsf(b) <= FLT_MAX);
    underflows += (a != 0.0f && (pair & 0x7f) == 0) + (b != 0.0f && (pair & 0x7f00) == 0);
    words[i / 4] |= pair << (8 * (i % 4));
  }
}

// A chunk's bytes (norm_fp8_cast_chunk's words) into the band's shared row
// at column j when shared_row is non-null (null: no transposed layout is
// written from bands, and the launcher gave no shared memory for them)
// and, when out is non-null, into out at element `at`.
template <int V, class F8>
__device__ __forceinline__ void norm_fp8_put_chunk(const uint32_t (&q)[(V + 3) / 4],
                                                   uint32_t *shared_row, int64_t j, F8 *out,
                                                   int64_t at) {
  if constexpr (V % 4 == 0) {
    if (shared_row != nullptr) {
#pragma unroll
      for (int w = 0; w < V / 4; ++w)
        shared_row[j / 4 + w] = q[w];
    }
    if (out != nullptr) {
      if constexpr (V == 4)
        *reinterpret_cast<uint32_t *>(&out[at].bits) = q[0];
      else if constexpr (V == 8)
        *reinterpret_cast<uint2 *>(&out[at].bits) = make_uint2(q[0], q[1]);
      else
        for (int w = 0; w < V / 4; ++w) // (V > 8: not taken)
          reinterpret_cast<uint32_t *>(&out[at].bits)[w] = q[w];
    }
  } else { // V == 2: two bytes
    if (shared_row != nullptr) {
      uint8_t *bytes = reinterpret_cast<uint8_t *>(shared_row) + j;
      bytes[0] = q[0] & 0xff;
      bytes[1] = (q[0] >> 8) & 0xff;
    }
    if (out != nullptr) {
      out[at].bits = q[0] & 0xff;
      out[at + 1].bits = (q[0] >> 8) & 0xff;
    }
  }
}

// The block writes a band of `band` rows (from r0; rows beyond `rows` not
// written), held in shared memory as `stride` words a row, to out_t (c x
// rows): a thread takes 4 rows x 4 columns, transposes the bytes by byte
// permutes and writes 4 column words (words_t: out_t 4-byte aligned, rows
// % 4 == 0 and r0 % 4 == 0; else byte by byte). Called by every thread
// after a __syncthreads. Partial: `band` need not be a multiple of 4 (the
// norm backward's band is its warps, 7 for GPT-2's three sums at C = 768):
// the last group's missing rows are neither read nor written. (Without
// it, such a band lost its last rows and, starting at r0 = 7k, wrote
// misaligned words: a GPU fault, found 2026-12-07.)
template <class F8, bool Partial = false>
__device__ __forceinline__ void norm_fp8_band_transposed(const uint32_t *band_words,
                                                         int64_t stride, int band, int64_t r0,
                                                         int64_t rows, int64_t c,
                                                         F8 *__restrict__ out_t, bool words_t) {
  const int groups = Partial ? (band + 3) / 4 : band / 4; // of 4 rows
  const int64_t blocks4 = groups * (c / 4);
  for (int64_t t = threadIdx.x; t < blocks4; t += blockDim.x) {
    const int qr = static_cast<int>(t % groups);
    const int64_t g = t / groups; // column group: columns 4g .. 4g + 3
    const int64_t r = r0 + 4 * qr;
    if (r >= rows)
      continue;
    const int valid = Partial ? min(4, band - 4 * qr) : 4; // the group's rows in the band
    const uint32_t *w = band_words + 4 * qr * stride + g;
    const uint32_t w0 = w[0], w1 = valid > 1 ? w[stride] : 0u,
                   w2 = valid > 2 ? w[2 * stride] : 0u, w3 = valid > 3 ? w[3 * stride] : 0u;
    // Byte e of row k -> byte k of column e.
    const uint32_t lo01 = __byte_perm(w0, w1, 0x5140), hi01 = __byte_perm(w0, w1, 0x7362);
    const uint32_t lo23 = __byte_perm(w2, w3, 0x5140), hi23 = __byte_perm(w2, w3, 0x7362);
    const uint32_t column[4] = {
        __byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632),
        __byte_perm(hi01, hi23, 0x5410), __byte_perm(hi01, hi23, 0x7632)};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      F8 *to = out_t + (4 * g + e) * rows + r;
      if (words_t && valid == 4) {
        *reinterpret_cast<uint32_t *>(&to->bits) = column[e];
      } else {
        for (int k = 0; k < valid && r + k < rows; ++k)
          to[k].bits = (column[e] >> (8 * k)) & 0xff;
      }
    }
  }
}

template <int V, class T, class Y, class F8>
__global__ void __launch_bounds__(kNormWarps * 32, 2)
    layer_norm_fp8_cast_kernel(const T *__restrict__ x, const T *__restrict__ weight,
                               const T *__restrict__ bias, int64_t rows, int64_t c,
                               acc_t<T> eps, bool rms, int band, F8 *__restrict__ out,
                               F8 *__restrict__ out_t, Fp8CastStats *stats,
                               const float *partials, int32_t partial_count,
                               Fp8TensorScale *current, Fp8ScalingRecord *record) {
  static_assert(V % 2 == 0, "pairs of values per cast instruction");
  extern __shared__ uint32_t norm_fp8_band[]; // band rows of (c + 4) / 4 words
  const float s = fp8_scale_of<F8>(nullptr, partials, partial_count, current, record, blockIdx.x);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t stride = c / 4 + 1; // words a shared row
  const bool words_t = rows % 4 == 0 && reinterpret_cast<uintptr_t>(out_t) % 4 == 0;
  float amax = 0.0f;
  uint32_t overflows = 0, underflows = 0;
  const int64_t bands = (rows + band - 1) / band;
  for (int64_t b = blockIdx.x; b < bands; b += gridDim.x) {
    const int64_t r0 = b * band;
    for (int i = warp; i < band && r0 + i < rows; i += kNormWarps) {
      const int64_t r = r0 + i;
      // The warp's next row on its way to L2 while this one is computed
      // (its loads then wait on L2, not DRAM; no registers held).
      const int64_t next = i + kNormWarps < band ? r + kNormWarps
                                                 : (b + gridDim.x) * band + warp;
      if (next < rows)
        norm_prefetch_l2(x + next * c, c * static_cast<int64_t>(sizeof(T)), lane);
      uint32_t *shared_row = out_t != nullptr ? norm_fp8_band + i * stride : nullptr;
      norm_row_outputs<V, T, kNormFp8CachedChunks>(x + r * c, weight, bias, c, lane, eps, rms,
                         [&](const acc_t<T>(&y)[V], int64_t j) {
                           uint32_t q[(V + 3) / 4];
                           norm_fp8_cast_chunk<V, Y, F8>(y, s, amax, overflows, underflows, q);
                           norm_fp8_put_chunk<V>(q, shared_row, j, out, r * c + j);
                         });
    }
    if (out_t != nullptr) { // the same for every thread of the block
      __syncthreads();
      norm_fp8_band_transposed(norm_fp8_band, stride, band, r0, rows, c, out_t, words_t);
      __syncthreads(); // the band's shared copy is reused
    }
  }
  fp8_add_stats(amax, overflows, underflows, stats);
  fp8_finish_delayed<F8>(current, record, rows * c, gridDim.x);
}

// partial[blockIdx.x] = the largest of the block's threads' amax (shuffles,
// then the `warps` warps in order). Every thread of the block calls it.
__device__ __forceinline__ void norm_fp8_block_amax(float amax, float *partial, int warps) {
  __shared__ float warp_amax[32];
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fp8_amax(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if ((threadIdx.x & 31) == 0)
    warp_amax[threadIdx.x >> 5] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w)
      amax = fp8_amax(amax, warp_amax[w]);
    partial[blockIdx.x] = amax;
  }
}

// The amax pass before layer_norm_fp8_cast_kernel under current scaling
// (and a delayed-scaling site's first cast): partial[blockIdx.x] = max |y|
// over the block's rows (one warp a row, y rounded to Y as stored), as
// fp8_amax_blocks does for a stored y: block 0 zeroes *stats and *ticket,
// and with a delayed-scaling record whose scale is set it does nothing
// else.
template <int V, class T, class Y>
__global__ void __launch_bounds__(kNormWarps * 32)
    layer_norm_fp8_amax_kernel(const T *__restrict__ x, const T *__restrict__ weight,
                               const T *__restrict__ bias, int64_t rows, int64_t c,
                               acc_t<T> eps, bool rms, float *partial, Fp8CastStats *stats,
                               const Fp8ScalingRecord *delayed, uint32_t *ticket) {
  using A = acc_t<T>;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    stats->amax_bits = 0;
    stats->overflows = 0;
    stats->underflows = 0;
    if (ticket != nullptr)
      *ticket = 0;
  }
  if (delayed != nullptr && delayed->scale > 0.0f)
    return;
  const int lane = threadIdx.x & 31;
  float amax = 0.0f;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(kNormWarps) + (threadIdx.x >> 5); r < rows;
       r += static_cast<int64_t>(gridDim.x) * kNormWarps)
    norm_row_outputs<V, T, kNormFp8CachedChunks>(x + r * c, weight, bias, c, lane, eps, rms,
                       [&](const A(&y)[V], int64_t) {
#pragma unroll
                         for (int i = 0; i < V; ++i)
                           amax = fp8_amax(amax, fabsf(static_cast<float>(Elem<Y>::load(
                                                     Elem<Y>::store(static_cast<A>(y[i]))))));
                       });
  norm_fp8_block_amax(amax, partial, kNormWarps);
}

//===--------------------------------------------------------------------===//
// The norm backward's FP8 cast of dx in the same pass (kern.layer_norm_grad
// whose 16-bit dx copy only FP8 products read: the residual stream's
// gradient, E5M2, before the output and down products' backward)
//===--------------------------------------------------------------------===//

// Unfused, the backward writes dx_cast (2 bytes an element) and the E5M2
// cast reads it back (2) and writes its two layouts (1 + 1). Here
// layer_norm_backward_kernel (norm_kernels.cuh), with one of these as its
// Fp8 part, casts each chunk of dx's values as it stores dx: 4 bytes an
// element less, and one launch less. The rows, dx, the sums and the
// workspace are the plain backward's (same warps, same order); each value
// is rounded to T, then to Y, then cast as the cast kernels cast a stored
// Y (its float times the scale, saturated; amax, saturated and flushed
// counts of the Y values), so the bytes, scale and statistics are the
// unfused pair's.

// The cast. Rows go band by band (a band: the block's warps' rows, one
// each, consecutive); each row's bytes go to out (row-major) and, when
// out_t is wanted here, into the band's shared copy, `warps` x (c + 4)
// bytes after the sums, which band() writes to out_t (c x rows) as the
// forward's cast does. (The launcher hands out_t to launch_fp8_transpose
// instead where it can, and then gives no band.)
template <class F8> struct NormGradFp8Cast {
  static constexpr bool kBands = true, kWritesDx = true, kCasts = true;
  F8 *out, *out_t; // either may be null
  const float *partials; // the amax pass's (current scaling, or a first delayed cast)
  int32_t partial_count;
  Fp8TensorScale *current;
  Fp8ScalingRecord *record; // delayed scaling, or null
  // The block's state.
  float s, amax;
  uint32_t overflows, underflows;
  uint32_t *band_words;

  __device__ __forceinline__ bool begin(unsigned char *band_memory, int64_t) {
    s = fp8_scale_of<F8>(nullptr, partials, partial_count, current, record, blockIdx.x);
    amax = 0.0f;
    overflows = underflows = 0;
    band_words = reinterpret_cast<uint32_t *>(band_memory);
    return true;
  }
  template <int V, class Y, class A>
  __device__ __forceinline__ void chunk(const A (&d)[V], int64_t r, int64_t j, int64_t c,
                                        int warp) {
    static_assert(V % 4 == 0, "whole words of FP8 bytes per chunk");
    uint32_t q[V / 4];
    norm_fp8_cast_chunk<V, Y, F8>(d, s, amax, overflows, underflows, q);
    norm_fp8_put_chunk<V>(q, out_t != nullptr ? band_words + warp * (c / 4 + 1) : nullptr, j,
                          out, r * c + j);
  }
  __device__ __forceinline__ void band(int64_t r0, int64_t rows, int64_t c, int warps) {
    if (out_t == nullptr)
      return;
    __syncthreads();
    // A band of `warps` rows from r0 = a multiple of warps: words only
    // when both are multiples of 4.
    norm_fp8_band_transposed<F8, true>(band_words, c / 4 + 1, warps, r0, rows, c, out_t,
                                       rows % 4 == 0 && warps % 4 == 0 &&
                                           reinterpret_cast<uintptr_t>(out_t) % 4 == 0);
    __syncthreads(); // the band's shared copy is reused
  }
  __device__ __forceinline__ void finish(int64_t elements) {
    fp8_add_stats(amax, overflows, underflows, &current->stats);
    fp8_finish_delayed<F8>(current, record, elements, gridDim.x);
  }
};

// The amax pass before it (current scaling, and a delayed-scaling site's
// first cast): dx's values computed, nothing written, partial[blockIdx.x]
// = max |dx as Y| over the block's rows. Block 0 zeroes *stats and
// *ticket; with a delayed-scaling record whose scale is set, that is all.
struct NormGradFp8Amax {
  static constexpr bool kBands = false, kWritesDx = false, kCasts = true;
  float *partial;
  Fp8CastStats *stats;
  const Fp8ScalingRecord *delayed; // or null
  uint32_t *ticket;                // or null
  float amax;

  __device__ __forceinline__ bool begin(unsigned char *, int64_t) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      stats->amax_bits = 0;
      stats->overflows = 0;
      stats->underflows = 0;
      if (ticket != nullptr)
        *ticket = 0;
    }
    amax = 0.0f;
    return delayed == nullptr || !(delayed->scale > 0.0f);
  }
  template <int V, class Y, class A>
  __device__ __forceinline__ void chunk(const A (&d)[V], int64_t, int64_t, int64_t, int) {
#pragma unroll
    for (int i = 0; i < V; ++i)
      amax = fp8_amax(amax, fabsf(static_cast<float>(Elem<Y>::load(Elem<Y>::store(
                                static_cast<acc_t<Y>>(d[i]))))));
  }
  __device__ __forceinline__ void band(int64_t, int64_t, int64_t, int) {}
  __device__ __forceinline__ void finish(int64_t) {
    norm_fp8_block_amax(amax, partial, blockDim.x / 32);
  }
};
