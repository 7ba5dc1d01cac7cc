//===--------------------------------------------------------------------===//
// FP8 scaled casts: their sources and kernels (tg-amp's fp8 precision,
// issue 37; scales and statistics in fp8_scaling.cuh)
//===--------------------------------------------------------------------===//

// Where a cast reads its rows x cols input, by row-major element index:
// Fp8Plain<T> reads a buffer. A cast may instead take a generated source
// (struct with the same members) that computes each element from the
// inputs of the elementwise op that produced it (CudaStepEmitter: an
// elementwise result read only by FP8 products is never written in 16
// bits): load8(i) returns elements i..i+7 as one 16-byte word (i % 8 == 0,
// only when aligned16()), load(i) element i. A source of K results of the
// same shape (a multi-result source: the backward's SwiGLU, two gradients from one
// read of its inputs) has `using Element = T; static constexpr int
// kOutputs = K;` and load8(i, uint4 out[K]), load(i, T out[K]) instead.
// The vector cast takes 8 elements in two steps, so that a tile's loads
// stay in flight while the one before is computed and cast: Raw
// fetch8(i) (the 16-byte loads) and compute8(raw, i, uint4 out[K]).
// (Src parameters are taken as Fp8Source<Src>, where they are not
// deduced: a pointer argument converts to the default Fp8Plain<T>.)
template <class S> struct Fp8SourceOf {
  using type = S;
};
template <class S> using Fp8Source = typename Fp8SourceOf<S>::type;
template <class T> struct Fp8Plain {
  const T *in;
  __host__ __device__ Fp8Plain(const T *p) : in(p) {} // NOLINT: a pointer converts
  static constexpr int kOutputs = 1;
  using Raw = uint4;
  __device__ __forceinline__ Raw fetch8(int64_t i) const {
    return __ldg(reinterpret_cast<const uint4 *>(in + i));
  }
  __device__ __forceinline__ void compute8(const Raw &raw, int64_t, uint4 *out) const {
    out[0] = raw;
  }
  __device__ __forceinline__ uint4 load8(int64_t i) const { return fetch8(i); }
  __device__ __forceinline__ T load(int64_t i) const { return in[i]; }
  __host__ __device__ bool aligned16() const {
    return reinterpret_cast<uintptr_t>(in) % 16 == 0;
  }
};

// A 16-bit operand T that is a float tensor rounded to T, read as the
// float: the step's f32 master weights, whose bf16 copies only FP8 casts
// read (the weight cast of kern-fuse-horizontal's group is then not
// launched for them; CudaStepEmitter::fp8BatchComputes). Each element is
// the T the weight cast would have stored (float_to_bf16 / float_to_f16,
// nearest even), so the FP8 bytes, scales and statistics are those of
// the cast from the copy. 32 bytes read for 8 elements.
template <class T, class W> struct Fp8Rounded {
  static_assert(std::is_same<W, float>::value && sizeof(T) == 2,
                "Fp8Rounded: a float tensor rounded to a 16-bit T");
  const W *in;
  __host__ __device__ Fp8Rounded(const W *p) : in(p) {} // NOLINT: a pointer converts
  static constexpr int kOutputs = 1;
  struct Raw {
    uint4 w[2];
  };
  __device__ __forceinline__ Raw fetch8(int64_t i) const {
    const uint4 *p = reinterpret_cast<const uint4 *>(in + i);
    return Raw{{__ldg(p), __ldg(p + 1)}};
  }
  __device__ __forceinline__ void compute8(const Raw &raw, int64_t, uint4 *out) const {
    const float *x = reinterpret_cast<const float *>(raw.w);
    if constexpr (std::is_same<T, bf16>::value) {
      out[0] = make_uint4(pack_bf16x2(x[0], x[1]), pack_bf16x2(x[2], x[3]),
                          pack_bf16x2(x[4], x[5]), pack_bf16x2(x[6], x[7]));
    } else {
      T t[8];
#pragma unroll
      for (int k = 0; k < 8; ++k)
        t[k] = Elem<T>::store(x[k]);
      memcpy(out, t, sizeof(t));
    }
  }
  __device__ __forceinline__ uint4 load8(int64_t i) const {
    uint4 out;
    compute8(fetch8(i), i, &out);
    return out;
  }
  __device__ __forceinline__ T load(int64_t i) const { return Elem<T>::store(in[i]); }
  __host__ __device__ bool aligned16() const {
    return reinterpret_cast<uintptr_t>(in) % 16 == 0;
  }
};

// The source of a cast of T read from W: W itself, or a float rounded.
template <class T, class W>
using Fp8SourceFrom =
    typename std::conditional<std::is_same<T, W>::value, Fp8Plain<T>, Fp8Rounded<T, W>>::type;

// One 32 x 32 tile per step of a grid-stride loop, 32 x 8 threads: each
// element of in (rows x cols, row-major) is read once, scaled, rounded to
// F8, written to out[r][c] and, through a shared tile, to out_t[c][r]
// (either may be null). Statistics per thread, then per warp (shuffles),
// then one atomic per warp into *stats.
template <class T, class F8, class Src = Fp8Plain<T>>
__global__ void __launch_bounds__(256)
    fp8_cast_transpose_kernel(int64_t rows, int64_t cols, const Fp8Source<Src> in,
                              const float *__restrict__ scale, F8 *__restrict__ out,
                              F8 *__restrict__ out_t, Fp8CastStats *stats,
                              const float *partials, int32_t partial_count,
                              Fp8TensorScale *current, Fp8ScalingRecord *record) {
  __shared__ uint8_t tile[32][33]; // +1: no bank conflicts on the transposed read
  const float s = fp8_scale_of<F8>(scale, partials, partial_count, current, record, blockIdx.x);
  const int64_t tile_cols = (cols + 31) / 32;
  const int64_t tiles = ((rows + 31) / 32) * tile_cols;
  float amax = 0.0f;
  uint32_t overflows = 0, underflows = 0;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tile_cols) * 32, c0 = (t % tile_cols) * 32;
    for (int i = threadIdx.y; i < 32; i += 8) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      uint8_t q = 0;
      if (r < rows && c < cols) {
        q = fp8_cast_one<F8>(static_cast<float>(Elem<T>::load(in.load(r * cols + c))), s, amax,
                             overflows, underflows);
        if (out != nullptr)
          out[r * cols + c].bits = q;
      }
      tile[i][threadIdx.x] = q;
    }
    if (out_t != nullptr) { // the same for every thread of the block
      __syncthreads();
      for (int i = threadIdx.y; i < 32; i += 8) {
        const int64_t c = c0 + i, r = r0 + threadIdx.x;
        if (c < cols && r < rows)
          out_t[c * rows + r].bits = tile[threadIdx.x][i];
      }
      __syncthreads();
    }
  }
  fp8_add_stats(amax, overflows, underflows, stats);
  fp8_finish_delayed<F8>(current, record, rows * cols, gridDim.x);
}

// Eight 16-bit elements of one 16-byte load cast to F8 (bytes in order,
// little-endian), with their part of the statistics in fewer
// instructions than fp8_cast_one's per element (the casts were bound by
// them: 1.1-2.2 TB/s on the H200, 2026-12-01). The same results: the
// largest magnitude as the input's bits (bf16 and f16 bits order
// magnitudes, NaN above inf; packed halfword maxima), the elements cast
// in pairs (cvt ...x2, the same rounding; a bf16 pair's floats are its
// word shifted and masked), the flushed ones as the outputs of zero
// magnitude less the zero inputs (a zero stays zero), counted only when
// some output byte has zero magnitude (rare; with the bf16 unpacking, the
// count was 83 of a plain cast's 346 instructions a tile, 2026-12-06),
// and the saturated ones counted one by one only when the eight's
// largest magnitude times the scale is past the format's top (or NaN).
template <class T, class F8>
__device__ __forceinline__ uint2 fp8_cast_eight(uint4 raw, float s, uint32_t &amax_bits,
                                                uint32_t &overflows, uint32_t &underflows) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  uint32_t mag = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    mag = __vmaxu2(mag, w[k] & 0x7fff7fffu);
  const uint32_t largest = max(mag & 0xffffu, mag >> 16);
  amax_bits = max(amax_bits, largest);
  const T *x8 = reinterpret_cast<const T *>(&raw);
  uint32_t q[2] = {0, 0};
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    float lo, hi;
    if constexpr (std::is_same<T, bf16>::value) {
      lo = __uint_as_float(w[p] << 16);
      hi = __uint_as_float(w[p] & 0xffff0000u);
    } else {
      lo = Elem<T>::load(x8[2 * p]);
      hi = Elem<T>::load(x8[2 * p + 1]);
    }
    const uint32_t pair = Fp8Format<F8>::from_float2(lo * s, hi * s);
    q[p / 2] |= pair << (16 * (p % 2));
  }
  // A zero byte among the magnitudes (the exact has-a-zero-byte test:
  // every byte of m is below 0x80).
  const uint32_t m0 = q[0] & 0x7f7f7f7fu, m1 = q[1] & 0x7f7f7f7fu;
  if ((((m0 - 0x01010101u) & ~m0) | ((m1 - 0x01010101u) & ~m1)) & 0x80808080u) {
    uint32_t zeros_in = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k)
      zeros_in += __popc(__vcmpeq2(w[k] & 0x7fff7fffu, 0u));
    const uint32_t zeros_out = __popc(__vcmpeq4(m0, 0u)) + __popc(__vcmpeq4(m1, 0u));
    underflows += zeros_out / 8 - zeros_in / 16;
  }
  T top;
  top.bits = static_cast<uint16_t>(largest);
  if (!(Elem<T>::load(top) * s <= Fp8Format<F8>::kMax)) { // rare: count them
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float x = Elem<T>::load(x8[e]);
      overflows += fabsf(x * s) > Fp8Format<F8>::kMax && fabsf(x) <= FLT_MAX;
    }
  }
  return make_uint2(q[0], q[1]);
}

// The vector form for 16-bit inputs (bf16, f16) when rows and cols are
// multiples of 8 and in / out / out_t are 16-byte aligned: 64 x 64 tiles,
// 256 threads; each thread reads 8 elements per 16-byte load (rows i and
// i + 32 of the tile, columns j..j+7) and writes their 8 bytes to out with
// one 8-byte store and to the shared tile as two words. After the tile
// fills, a thread reads the words of 4 rows at one 4-column group,
// transposes the 4 x 4 bytes by byte permutes and writes 4 words of out_t
// (columns c..c+3, rows r..r+3). The loads of a block's next tile are
// issued before the current one is cast, so each thread keeps two tiles'
// loads in flight (one at a time ran at 1.1-1.5 TB/s on the H200,
// 2026-12-01). Tile coordinates in 32-bit arithmetic (the launcher takes
// this form only below 2^31 tiles): 64-bit division was a library call
// per tile. Same results and statistics as fp8_cast_transpose_kernel.
// The work of block `block` of `blocks` (the grid, or a batch member's
// share: fp8_cast_batch_kernel).
//
// K > 1 (a source computing K results at once from one read of its
// inputs: a multi-result source): result k is cast into targets.out[k] /
// targets.out_t[k] with its own scale and statistics, as K casts of
// sources computing one result each would.
template <class F8, int K> struct Fp8CastTargets {
  F8 *out[K];
  F8 *out_t[K];
  Fp8CastStats *stats[K];
  const float *scale[K]; // a given scale (launch_fp8_cast_transpose), else null
  const float *partials[K];
  int32_t partial_count[K];
  Fp8TensorScale *current[K];
  Fp8ScalingRecord *record[K];
};

template <class T, class F8, class Src, int K>
__device__ __forceinline__ void
fp8_cast_transpose_vec8_multi(int64_t rows, int64_t cols, const Src &in,
                              const Fp8CastTargets<F8, K> &to, uint32_t block,
                              uint32_t blocks) {
  static_assert(sizeof(T) == 2, "the vector form reads 16-bit elements");
  static_assert(Src::kOutputs == K, "one target per result of the source");
  // 64 rows of 16 words (64 bytes) and one more: a column group's words of
  // rows 4q .. 4q + 3 fall on other banks for each q (two-way at most).
  __shared__ uint32_t tile[K][64][17];
  float s[K];
  bool any_t = false;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (k > 0)
      __syncthreads(); // fp8_scale_of's shared maxima, read by all, reused
    s[k] = fp8_scale_of<F8>(to.scale[k], to.partials[k], to.partial_count[k], to.current[k],
                            to.record[k], block);
    any_t |= to.out_t[k] != nullptr;
  }
  const uint32_t tile_cols = static_cast<uint32_t>((cols + 63) / 64);
  const uint32_t tiles = static_cast<uint32_t>((rows + 63) / 64) * tile_cols;
  const int i = threadIdx.x / 8, j = (threadIdx.x % 8) * 8; // tile row (and i + 32), column
  const int q = threadIdx.x % 16, g = threadIdx.x / 16;     // out_t: rows 4q.., columns 4g..
  // The thread's element offsets within a tile, and its words of the
  // shared tiles, computed once: per tile only its corner moves, and the
  // corner steps by the grid without a division (with the copy of the
  // next tile's loads, below, these took 44 of a plain cast's 263
  // instructions a tile, 2026-12-06).
  const int64_t load_offset = i * cols + j, half_offset = 32 * cols;
  const int64_t t_offset = (4 * g) * rows + 4 * q;
  constexpr int kTileWords = 64 * 17, kHalfWords = 32 * 17;
  uint32_t *const slot = &tile[0][i][j / 4];          // + k * kTileWords + h * kHalfWords
  const uint32_t *const t_slot = &tile[0][4 * q][g]; // + k * kTileWords + e * 17
  uint32_t amax_bits[K]; // the largest magnitude, as T's bits
  uint32_t overflows[K], underflows[K];
#pragma unroll
  for (int k = 0; k < K; ++k)
    amax_bits[k] = overflows[k] = underflows[k] = 0;
  struct Fetched { // a tile's two loads and its corner
    typename Src::Raw raw[2];
    int64_t r0, c0;
  };
  // The next tile to fetch: its index and coordinates (in tiles).
  uint32_t fetch_t = block, fetch_row = block / tile_cols, fetch_col = block % tile_cols;
  const uint32_t step_rows = blocks / tile_cols, step_cols = blocks % tile_cols;
  auto fetch = [&](Fetched &f) { // none outside the tensor
    if (fetch_t < tiles) {
      f.r0 = static_cast<int64_t>(fetch_row) * 64;
      f.c0 = static_cast<int64_t>(fetch_col) * 64;
      const int64_t base = f.r0 * cols + f.c0 + load_offset;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (f.r0 + i + 32 * h < rows && f.c0 + j < cols) // all 8 or none: cols % 8 == 0
          f.raw[h] = in.fetch8(base + h * half_offset);
    }
    fetch_t += blocks;
    fetch_row += step_rows;
    fetch_col += step_cols;
    if (fetch_col >= tile_cols) {
      fetch_col -= tile_cols;
      ++fetch_row;
    }
  };
  auto cast_tile = [&](const Fetched &f) {
    const int64_t r0 = f.r0, c0 = f.c0;
    const int64_t base = r0 * cols + c0 + load_offset;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool inside = r0 + i + 32 * h < rows && c0 + j < cols;
      const int64_t e0 = base + h * half_offset; // element (r0 + i + 32h, c0 + j)
      uint4 words[K];
      if (inside)
        in.compute8(f.raw[h], e0, words);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        uint2 q8 = make_uint2(0, 0); // 8 bytes, little-endian
        if (inside) {
          q8 = fp8_cast_eight<T, F8>(words[k], s[k], amax_bits[k], overflows[k],
                                     underflows[k]);
          if (to.out[k] != nullptr)
            *reinterpret_cast<uint2 *>(&to.out[k][e0].bits) = q8;
        }
        if (to.out_t[k] != nullptr) {
          slot[k * kTileWords + h * kHalfWords] = q8.x;
          slot[k * kTileWords + h * kHalfWords + 1] = q8.y;
        }
      }
    }
    if (any_t) { // the same for every thread of the block
      __syncthreads();
      // rows % 8 == 0 and cols % 8 == 0: rows r0 + 4q .. + 3 and columns
      // c0 + 4g .. + 3 are all inside or none.
      if (r0 + 4 * q < rows && c0 + 4 * g < cols) {
        const int64_t t_base = c0 * rows + r0 + t_offset; // (column c0 + 4g, row r0 + 4q)
#pragma unroll
        for (int k = 0; k < K; ++k) {
          if (to.out_t[k] == nullptr)
            continue;
          const uint32_t *w = t_slot + k * kTileWords;
          const uint32_t w0 = w[0], w1 = w[17], w2 = w[2 * 17], w3 = w[3 * 17];
          // Byte k of row e -> byte e of column k.
          const uint32_t lo01 = __byte_perm(w0, w1, 0x5140), hi01 = __byte_perm(w0, w1, 0x7362);
          const uint32_t lo23 = __byte_perm(w2, w3, 0x5140), hi23 = __byte_perm(w2, w3, 0x7362);
          const uint32_t column[4] = {__byte_perm(lo01, lo23, 0x5410),
                                      __byte_perm(lo01, lo23, 0x7632),
                                      __byte_perm(hi01, hi23, 0x5410),
                                      __byte_perm(hi01, hi23, 0x7632)};
          F8 *to_t = to.out_t[k] + t_base;
#pragma unroll
          for (int e = 0; e < 4; ++e, to_t += rows)
            *reinterpret_cast<uint32_t *>(&to_t->bits) = column[e];
        }
      }
      __syncthreads();
    }
  };
  // Each tile cast while the next one's loads are in flight. Loads of up
  // to 32 bytes a tile (a plain cast's, a 16-bit operand's): two buffers
  // in turn, two tiles a turn, so that no copy of the loads goes from one
  // turn to the next. Larger ones (sources reading several inputs) copy:
  // their second buffer spilled (SwiGLU's backward, 2026-12-06).
  if constexpr (sizeof(typename Src::Raw) <= 16) {
    Fetched tile_a, tile_b;
    fetch(tile_a);
    for (uint32_t t = block; t < tiles; t += 2 * blocks) {
      fetch(tile_b);
      cast_tile(tile_a);
      if (t + blocks >= tiles)
        break;
      fetch(tile_a);
      cast_tile(tile_b);
    }
  } else {
    Fetched next;
    fetch(next);
    for (uint32_t t = block; t < tiles; t += blocks) {
      const Fetched current = next;
      fetch(next);
      cast_tile(current);
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (k > 0)
      __syncthreads(); // fp8_add_stats' shared sums, reused
    T top;
    top.bits = static_cast<uint16_t>(amax_bits[k]);
    fp8_add_stats(Elem<T>::load(top), overflows[k], underflows[k], to.stats[k]);
    fp8_finish_delayed<F8>(to.current[k], to.record[k], rows * cols, blocks);
  }
}

template <class T, class F8, class Src = Fp8Plain<T>>
__device__ __forceinline__ void
fp8_cast_transpose_vec8_tiles(int64_t rows, int64_t cols, const Fp8Source<Src> in,
                              const float *__restrict__ scale, F8 *__restrict__ out,
                              F8 *__restrict__ out_t, Fp8CastStats *stats,
                              const float *partials, int32_t partial_count,
                              Fp8TensorScale *current, Fp8ScalingRecord *record,
                              uint32_t block, uint32_t blocks) {
  const Fp8CastTargets<F8, 1> to{{out},      {out_t},         {stats},   {scale},
                                 {partials}, {partial_count}, {current}, {record}};
  fp8_cast_transpose_vec8_multi<T, F8, Src, 1>(rows, cols, in, to, block, blocks);
}

// At least 3 blocks an SM: SwiGLU's backward source took 93 registers
// (2 blocks); held to 80 (32 bytes spilled) its cast went from 1417 to
// 1491 GB/s on the H200 (2026-12-02).
template <class T, class F8, class Src, int K>
__global__ void __launch_bounds__(256, 3)
    fp8_cast_transpose_vec8_multi_kernel(int64_t rows, int64_t cols, const Src in,
                                         const Fp8CastTargets<F8, K> to) {
  fp8_cast_transpose_vec8_multi<T, F8, Src, K>(rows, cols, in, to, blockIdx.x, gridDim.x);
}

// Result k of a multi-result source, as a source of
// one: for the amax pass and the scalar form, which take one at a time.
template <class Src, int k> struct Fp8Pick {
  Src src;
  using T = typename Src::Element;
  static constexpr int kOutputs = 1;
  using Raw = typename Src::Raw;
  __device__ __forceinline__ Raw fetch8(int64_t i) const { return src.fetch8(i); }
  __device__ __forceinline__ void compute8(const Raw &raw, int64_t i, uint4 *out) const {
    uint4 all[Src::kOutputs];
    src.compute8(raw, i, all);
    out[0] = all[k];
  }
  __device__ __forceinline__ uint4 load8(int64_t i) const {
    uint4 all[Src::kOutputs];
    src.load8(i, all);
    return all[k];
  }
  __device__ __forceinline__ T load(int64_t i) const {
    T all[Src::kOutputs];
    src.load(i, all);
    return all[k];
  }
  __host__ __device__ bool aligned16() const { return src.aligned16(); }
};

// At least 3 blocks an SM, as the multi-result kernel: with the registers
// that leaves (71 for a plain cast), a plain bf16 -> E4M3 cast of 8192 x
// 5632 took 0.0773 ms on the H100 against 0.0788 at 4 blocks and 0.0868
// at 5; SwiGLU's forward source 0.1111 against 0.1126 and 0.1235
// (cast_bench, 2026-12-06).
template <class T, class F8, class Src = Fp8Plain<T>>
__global__ void __launch_bounds__(256, 3)
    fp8_cast_transpose_vec8_kernel(int64_t rows, int64_t cols, const Fp8Source<Src> in,
                                   const float *__restrict__ scale, F8 *__restrict__ out,
                                   F8 *__restrict__ out_t, Fp8CastStats *stats,
                                   const float *partials, int32_t partial_count,
                                   Fp8TensorScale *current, Fp8ScalingRecord *record) {
  fp8_cast_transpose_vec8_tiles<T, F8, Src>(rows, cols, in, scale, out, out_t, stats,
                                            partials, partial_count, current, record,
                                            blockIdx.x, gridDim.x);
}

// partial[blockIdx.x] = max |in[i]| over the block's share of n elements
// (NaN shows): a grid-stride read, 16-byte loads when `vec` (16-bit T,
// n % 8 == 0, in 16-byte aligned), the block's maximum stored without
// atomics; block 0 also zeroes *stats (and *ticket, delayed scaling's
// count of finished cast blocks) for the cast that follows. With a
// delayed-scaling record whose scale is set, nothing else: the cast uses
// that scale.
template <class T, class Src = Fp8Plain<T>>
__device__ __forceinline__ void fp8_amax_blocks(int64_t n, const Fp8Source<Src> in, bool vec,
                                                float *partial, Fp8CastStats *stats,
                                                const Fp8ScalingRecord *delayed,
                                                uint32_t *ticket, uint32_t block,
                                                uint32_t blocks) {
  if (block == 0 && threadIdx.x == 0) {
    stats->amax_bits = 0;
    stats->overflows = 0;
    stats->underflows = 0;
    if (ticket != nullptr)
      *ticket = 0;
  }
  if (delayed != nullptr && delayed->scale > 0.0f)
    return; // the cast scales by the site's delayed scale
  float amax = 0.0f;
  const int64_t stride = static_cast<int64_t>(blocks) * blockDim.x;
  const int64_t first = static_cast<int64_t>(block) * blockDim.x + threadIdx.x;
  bool done = false;
  if constexpr (sizeof(T) == 2) {
    if (vec) {
      for (int64_t v = first; v < n / 8; v += stride) {
        const uint4 raw = in.load8(v * 8);
        const T *x8 = reinterpret_cast<const T *>(&raw);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          amax = fp8_amax(amax, fabsf(static_cast<float>(Elem<T>::load(x8[e]))));
      }
      done = true;
    }
  }
  if (!done)
    for (int64_t i = first; i < n; i += stride)
      amax = fp8_amax(amax, fabsf(static_cast<float>(Elem<T>::load(in.load(i)))));
  __shared__ float warp_amax[8];
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fp8_amax(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (threadIdx.x % 32 == 0)
    warp_amax[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < 8; ++w)
      amax = fp8_amax(amax, warp_amax[w]);
    partial[block] = amax;
  }
}

template <class T, class Src = Fp8Plain<T>>
__global__ void __launch_bounds__(256)
    fp8_amax_kernel(int64_t n, const Fp8Source<Src> in, bool vec, float *partial,
                    Fp8CastStats *stats, const Fp8ScalingRecord *delayed,
                    uint32_t *ticket) {
  fp8_amax_blocks<T, Src>(n, in, vec, partial, stats, delayed, ticket, blockIdx.x, gridDim.x);
}

// Delayed-scaling casts of several operands in two launches
// (launch_fp8_quantize_delayed_batch): member m owns blocks
// [first[m], first[m + 1]) of each launch, and its blocks do what the
// grid of its own fp8_amax_kernel / fp8_cast_transpose_vec8_kernel would
// (the same scale, bytes, statistics and record update). Vector-form
// members only (16-bit, rows and cols multiples of 8, 16-byte aligned).
// W: what `in` points to, T itself or floats rounded to T (Fp8Rounded).
template <class T, class F8, int Cap, class W = T> struct Fp8CastBatch {
  const W *in[Cap];
  F8 *out[Cap];
  F8 *out_t[Cap];
  Fp8TensorScale *q[Cap];
  Fp8ScalingRecord *record[Cap];
  int32_t rows[Cap], cols[Cap];
  uint32_t amax_first[Cap + 1], cast_first[Cap + 1];
  int32_t count;
};

template <class T, class F8, int Cap, class W>
__global__ void __launch_bounds__(256)
    fp8_amax_batch_kernel(const Fp8CastBatch<T, F8, Cap, W> b) {
  const int m = multi_member(b.amax_first, b.count, blockIdx.x);
  Fp8TensorScale *q = b.q[m];
  fp8_amax_blocks<T, Fp8SourceFrom<T, W>>(static_cast<int64_t>(b.rows[m]) * b.cols[m],
                     Fp8SourceFrom<T, W>(b.in[m]), true,
                     reinterpret_cast<float *>(reinterpret_cast<char *>(q) +
                                               sizeof(Fp8TensorScale)),
                     &q->stats, b.record[m], &q->unused[0], blockIdx.x - b.amax_first[m],
                     b.amax_first[m + 1] - b.amax_first[m]);
}

template <class T, class F8, int Cap, class W>
__global__ void __launch_bounds__(256, 3) // as fp8_cast_transpose_vec8_kernel
    fp8_cast_batch_kernel(const Fp8CastBatch<T, F8, Cap, W> b) {
  const int m = multi_member(b.cast_first, b.count, blockIdx.x);
  Fp8TensorScale *q = b.q[m];
  fp8_cast_transpose_vec8_tiles<T, F8, Fp8SourceFrom<T, W>>(
      b.rows[m], b.cols[m], Fp8SourceFrom<T, W>(b.in[m]), nullptr, b.out[m], b.out_t[m], &q->stats,
      reinterpret_cast<const float *>(reinterpret_cast<const char *>(q) +
                                      sizeof(Fp8TensorScale)),
      static_cast<int32_t>(b.amax_first[m + 1] - b.amax_first[m]), q, b.record[m],
      blockIdx.x - b.cast_first[m], b.cast_first[m + 1] - b.cast_first[m]);
}

// out_t (cols x rows) = the transpose of in (rows x cols), FP8 bytes as
// they are (no scale, no statistics): the second layout of a cast whose
// kernel writes only the first (the norm backward's cast, whose bands of
// `warps` rows would write 8-byte pieces of each column of out_t).
// 64 x 64 byte tiles, grid-stride, 256 threads: thread t loads 16 bytes
// of tile row t / 4 (one 16-byte load), the tile goes through shared
// words (rows of 17 words: a warp's reads at one column spread over the
// banks, two-way at most), and
// thread t writes 16 bytes of out_t row t / 4, input rows 16 (t % 4) ..
// 16 (t % 4) + 15 (one 16-byte store; a warp writes 8 rows of 64
// contiguous bytes). Needs rows and cols multiples of 16 and 16-byte
// aligned pointers (the launcher checks). (Templates, as the other
// kernels here: one definition however many kernel units include it.)
template <class F8>
__global__ void __launch_bounds__(256)
    fp8_transpose_vec16_kernel(int64_t rows, int64_t cols, const uint8_t *__restrict__ in,
                               uint8_t *__restrict__ out_t) {
  __shared__ uint32_t tile[64 * 17];
  const int t = threadIdx.x, tr = t >> 2, tc = (t & 3) * 16;
  const int64_t tile_cols = (cols + 63) / 64, tiles = ((rows + 63) / 64) * tile_cols;
  for (int64_t k = blockIdx.x; k < tiles; k += gridDim.x) {
    const int64_t r0 = (k / tile_cols) * 64, c0 = (k % tile_cols) * 64;
    if (r0 + tr < rows && c0 + tc < cols) {
      const uint4 v = *reinterpret_cast<const uint4 *>(in + (r0 + tr) * cols + c0 + tc);
      uint32_t *w = tile + tr * 17 + tc / 4;
      w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    }
    __syncthreads();
    // out_t row c0 + tr (input column), input rows r0 + tc .. + 15.
    if (c0 + tr < cols && r0 + tc < rows) {
      const int word = tr >> 2, shift = 8 * (tr & 3);
      uint32_t b[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t packed = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e)
          packed |= ((tile[(tc + 4 * q + e) * 17 + word] >> shift) & 0xffu) << (8 * e);
        b[q] = packed;
      }
      *reinterpret_cast<uint4 *>(out_t + (c0 + tr) * rows + r0 + tc) = make_uint4(b[0], b[1], b[2], b[3]);
    }
    __syncthreads(); // the tile is reused
  }
}

// The same, one byte a thread (any shape, any alignment): 32 x 32 tiles,
// 32 x 8 threads.
template <class F8>
__global__ void __launch_bounds__(256)
    fp8_transpose_kernel(int64_t rows, int64_t cols, const uint8_t *__restrict__ in,
                         uint8_t *__restrict__ out_t) {
  __shared__ uint8_t tile[32][33];
  const int64_t tile_cols = (cols + 31) / 32, tiles = ((rows + 31) / 32) * tile_cols;
  for (int64_t k = blockIdx.x; k < tiles; k += gridDim.x) {
    const int64_t r0 = (k / tile_cols) * 32, c0 = (k % tile_cols) * 32;
    for (int i = threadIdx.y; i < 32; i += 8)
      if (r0 + i < rows && c0 + threadIdx.x < cols)
        tile[i][threadIdx.x] = in[(r0 + i) * cols + c0 + threadIdx.x];
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8)
      if (c0 + i < cols && r0 + threadIdx.x < rows)
        out_t[(c0 + i) * rows + r0 + threadIdx.x] = tile[threadIdx.x][i];
    __syncthreads();
  }
}

// Delayed scaling, one thread: this step's amax goes into the history
// (a ring of `length` entries, slot step % length); the next scale is
// Fp8Format<F8>::kMax / (max over the history * 2^margin), so the largest
// value seen lately lands 2^margin below the format's largest. A history
// without a finite, non-zero amax keeps the scale (an all-zero tensor, or
// a NaN step whose update the loss scaler skips anyway).
template <class F8>
__global__ void fp8_update_scale_kernel(const Fp8CastStats *stats, float *history,
                                        int32_t length, int64_t step, int32_t margin,
                                        float *scale, float *scale_inv) {
  history[step % length] = __uint_as_float(stats->amax_bits);
  float amax = 0.0f;
  for (int32_t i = 0; i < length; ++i)
    amax = fp8_amax(amax, history[i]);
  if (amax > 0.0f && amax <= FLT_MAX) {
    const float next = Fp8Format<F8>::kMax / ldexpf(amax, margin);
    if (next <= FLT_MAX && next > 0.0f) {
      *scale = next;
      *scale_inv = 1.0f / next;
    }
  }
}
