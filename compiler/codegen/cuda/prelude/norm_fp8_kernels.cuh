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
      uint32_t *shared_row = norm_fp8_band + i * stride;
      norm_row_outputs<V, T, kNormFp8CachedChunks>(x + r * c, weight, bias, c, lane, eps, rms,
                         [&](const acc_t<T>(&y)[V], int64_t j) {
                           uint32_t q[(V + 3) / 4];
                           norm_fp8_cast_chunk<V, Y, F8>(y, s, amax, overflows, underflows, q);
                           if constexpr (V % 4 == 0) {
#pragma unroll
                             for (int w = 0; w < V / 4; ++w)
                               shared_row[j / 4 + w] = q[w];
                             if (out != nullptr) {
                               if constexpr (V == 4)
                                 *reinterpret_cast<uint32_t *>(&out[r * c + j].bits) = q[0];
                               else if constexpr (V == 8)
                                 *reinterpret_cast<uint2 *>(&out[r * c + j].bits) =
                                     make_uint2(q[0], q[1]);
                               else
                                 for (int w = 0; w < V / 4; ++w) // (V > 8: not taken)
                                   reinterpret_cast<uint32_t *>(&out[r * c + j].bits)[w] = q[w];
                             }
                           } else { // V == 2: two bytes
                             uint8_t *bytes = reinterpret_cast<uint8_t *>(shared_row) + j;
                             bytes[0] = q[0] & 0xff;
                             bytes[1] = (q[0] >> 8) & 0xff;
                             if (out != nullptr) {
                               out[r * c + j].bits = q[0] & 0xff;
                               out[r * c + j + 1].bits = (q[0] >> 8) & 0xff;
                             }
                           }
                         });
    }
    if (out_t != nullptr) { // the same for every thread of the block
      __syncthreads();
      const int groups = band / 4; // of 4 rows
      const int64_t blocks4 = groups * (c / 4);
      for (int64_t t = threadIdx.x; t < blocks4; t += blockDim.x) {
        const int qr = static_cast<int>(t % groups);
        const int64_t g = t / groups; // column group: columns 4g .. 4g + 3
        const int64_t r = r0 + 4 * qr;
        if (r >= rows)
          continue;
        const uint32_t *w = norm_fp8_band + 4 * qr * stride + g;
        const uint32_t w0 = w[0], w1 = w[stride], w2 = w[2 * stride], w3 = w[3 * stride];
        // Byte e of row k -> byte k of column e.
        const uint32_t lo01 = __byte_perm(w0, w1, 0x5140), hi01 = __byte_perm(w0, w1, 0x7362);
        const uint32_t lo23 = __byte_perm(w2, w3, 0x5140), hi23 = __byte_perm(w2, w3, 0x7362);
        const uint32_t column[4] = {
            __byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632),
            __byte_perm(hi01, hi23, 0x5410), __byte_perm(hi01, hi23, 0x7632)};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          F8 *to = out_t + (4 * g + e) * rows + r;
          if (words_t) {
            *reinterpret_cast<uint32_t *>(&to->bits) = column[e];
          } else {
            for (int k = 0; k < 4 && r + k < rows; ++k)
              to[k].bits = (column[e] >> (8 * k)) & 0xff;
          }
        }
      }
    }
    __syncthreads(); // the band's shared copy is reused
  }
  fp8_add_stats(amax, overflows, underflows, stats);
  fp8_finish_delayed<F8>(current, record, rows * c, gridDim.x);
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
  __shared__ float warp_amax[kNormWarps];
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fp8_amax(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (lane == 0)
    warp_amax[threadIdx.x >> 5] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kNormWarps; ++w)
      amax = fp8_amax(amax, warp_amax[w]);
    partial[blockIdx.x] = amax;
  }
}
