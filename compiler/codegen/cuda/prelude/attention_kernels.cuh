
//===--------------------------------------------------------------------===//
// Attention (flash attention): shared pieces and the forward kernels
//===--------------------------------------------------------------------===//
//
// softmax(scale * q k^T [+ causal mask]) [dropout] @ v without materializing
// the T x S scores (the launchers' comment in attention_launchers.cuh gives
// the exact semantics). Two implementations of the same math:
// - bf16 / f16: FlashAttention-2 style tensor-core kernels. A CTA owns a
//   tile of rows (16 per warp), the other operand streams through shared
//   memory with cp.async double buffering, products are mma.sync m16n8k16
//   (fp32 accumulation) fed by ldmatrix, the softmax is online (running max
//   and sum, in log2 units so exp is one ex2). Causal tiles above the
//   diagonal are skipped; only tiles crossing it (or the ragged end) are
//   masked. The backward kernels are in attention_backward_kernels.cuh.
// - float: SIMT kernels, a warp per row and D / 32 elements per lane, fp32
//   throughout (expf / logf): fp32 accuracy, not speed.

// Dropout bits (runtime/include/tcc/counter_rng.h): bits(seed_key, step, i)
// = mix64(stream_key + (i + 1) * G) with stream_key = mix64(mix64(seed_key)
// ^ step), computed once on the host (attn_stream_key). Element (b, h, i, j)
// has counter ((b * H + h) * T + i) * S + j and is kept iff bits >> 40 >=
// threshold = ceil(rate * 2^24).
__host__ __device__ __forceinline__ uint64_t attn_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ bool attn_keep(uint64_t stream_key, uint64_t counter,
                                          uint32_t threshold) {
  const uint64_t bits =
      attn_mix64(stream_key + (counter + 1) * 0x9E3779B97F4A7C15ull);
  return static_cast<uint32_t>(bits >> 40) >= threshold;
}

// Where the rows of one tensor are: row (b, h, i) of D contiguous
// elements starts at element b * b_stride + h * h_stride + i * r_stride of
// the buffer (contiguous (B, H, T, D): H*T*D, T*D, D; q read straight out
// of a packed (B, T, 3*H*D) projection: 3*T*H*D, D, 3*H*D).
struct AttnStrides {
  int64_t b, h, r;
};
template <class T>
__host__ __device__ __forceinline__ T *attn_head(T *base, const AttnStrides &s,
                                                 int64_t b, int64_t h) {
  return base + b * s.b + h * s.h;
}

// Everything a kernel needs about one attention call. Rows of q / out / dq
// / dout are (b, h, i), of k / v / dk / dv (b, hkv, j), all D elements
// long, placed by the strides below. sl2 = scale * log2(e): scores in log2
// units. lse and delta are always contiguous (B, H, T).
struct AttnParams {
  int64_t B, H, Hkv, T, S;
  AttnStrides q, k, v, o, dout, dq, dk, dv;
  float scale, sl2;
  bool causal;
  bool dropout;        // rate > 0
  uint32_t threshold;  // keep iff bits >> 40 >= threshold
  float keep_scale;    // 1 / (1 - rate)
  uint64_t stream_key; // attn_stream_key(seed_key, step)
};

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

//===--------------------------------------------------------------------===//
// Tensor-core building blocks (sm_80+: cp.async, ldmatrix, mma.sync)
//===--------------------------------------------------------------------===//

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared, bypassing L1; valid == false writes zeros
// (src-size 0) without reading `src`.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src,
                                           bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::);
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4],
                                                  uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}

// 2^x by the SFU alone (ex2.approx, ~2 ulp; results below 2^-126 flush to
// 0, inputs of -inf give 0): exp2f adds range fix-ups around it that the
// softmax of the 16-bit path does not need (its p <= 1 are rounded to 8 or
// 11 bits next).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The 16-bit element types' PTX spellings: c += a (16x16) * b (16x8), and
// two floats rounded (nearest even) into one register, lo in the low half.
template <class T> struct MmaOps;
template <> struct MmaOps<bf16> {
  __device__ __forceinline__ static void mma(float (&c)[4],
                                             const uint32_t (&a)[4],
                                             uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
};
template <> struct MmaOps<f16> {
  __device__ __forceinline__ static void mma(float (&c)[4],
                                             const uint32_t (&a)[4],
                                             uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    uint32_t d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
};

// A shared-memory tile of ROWS rows x D 16-bit elements, in 16-byte chunks
// swizzled by (chunk ^ row % 8): the 8 row addresses of one ldmatrix
// 8x8 matrix then fall in 8 different bank groups (no bank conflicts).
template <int D> struct SmemTile {
  static constexpr int kChunks = D / 8; // 16-byte chunks per row
  __device__ __forceinline__ static uint32_t offset(int row, int chunk) {
    return static_cast<uint32_t>(row * (D * 2) +
                                 ((chunk ^ (row & 7)) << 4));
  }
};

// Copies rows [row0, row0 + ROWS) of a (rows_total, D) matrix whose rows
// are row_stride elements apart into the tile at shared address `dst` with
// cp.async (rows past rows_total are zeros), all THREADS threads of the
// block taking part.
template <int ROWS, int D, int THREADS, class T>
__device__ __forceinline__ void load_tile_async(uint32_t dst, const T *src,
                                                int64_t row0,
                                                int64_t rows_total,
                                                int64_t row_stride) {
  constexpr int kChunks = D / 8;
  static_assert((ROWS * kChunks) % THREADS == 0, "tile / threads mismatch");
#pragma unroll
  for (int k = 0; k < ROWS * kChunks / THREADS; ++k) {
    const int idx = k * THREADS + static_cast<int>(threadIdx.x);
    const int row = idx / kChunks, chunk = idx % kChunks;
    const int64_t g = row0 + row;
    const bool valid = g < rows_total;
    const T *p = valid ? src + g * row_stride + chunk * 8 : src;
    cp_async16(dst + SmemTile<D>::offset(row, chunk), p, valid);
  }
}

// The key loop's double buffering (forward and backward kernels): waits for
// key/value tile t (in buffer t & 1 of sk0 / sv0, each buffer BN x D 16-bit
// elements), then starts tile t + 1 into the other buffer (none after the
// last); the caller reads buffer t & 1 until the next call's barrier.
template <int BN, int D, int THREADS, class T, class Params>
__device__ __forceinline__ void next_kv_tile_async(uint32_t sk0, uint32_t sv0, const T *kp,
                                                   const T *vp, int t, int tiles,
                                                   const Params &p) {
  cp_async_wait_all();
  __syncthreads();
  if (t + 1 < tiles) {
    const int buf = (t + 1) & 1;
    load_tile_async<BN, D, THREADS>(sk0 + buf * BN * D * 2, kp, int64_t(t + 1) * BN, p.S,
                                    p.k.r);
    load_tile_async<BN, D, THREADS>(sv0 + buf * BN * D * 2, vp, int64_t(t + 1) * BN, p.S,
                                    p.v.r);
  }
  cp_async_commit();
}

// ldmatrix lane addresses inside a tile whose rows are `row_base`.., over
// 16-element columns block kk:
// - a_frag: the A operand (16 rows x 16 cols, row-major in the tile);
// - b_frag: two B operands (n = 16 tile rows, k = 16 cols): regs 0-1 for
//   rows row_base..+7, 2-3 for +8..+15 (B = tile^T, e.g. K in q k^T);
// - b_frag_trans: two B operands (k = 16 tile rows, n = 16 cols): regs
//   0-1 for cols kk*16..+7, 2-3 for +8..+15 (B = tile, e.g. V in p v).
template <int D>
__device__ __forceinline__ uint32_t a_frag_addr(uint32_t tile, int row_base,
                                                int kk, int lane) {
  return tile + SmemTile<D>::offset(row_base + (lane & 15), kk * 2 + (lane >> 4));
}
template <int D>
__device__ __forceinline__ uint32_t b_frag_addr(uint32_t tile, int row_base,
                                                int kk, int lane) {
  return tile + SmemTile<D>::offset(row_base + (lane & 7) + ((lane >> 4) << 3),
                                    kk * 2 + ((lane >> 3) & 1));
}
template <int D>
__device__ __forceinline__ uint32_t b_frag_trans_addr(uint32_t tile,
                                                      int row_base, int kk,
                                                      int lane) {
  return tile + SmemTile<D>::offset(row_base + (lane & 7) + (((lane >> 3) & 1) << 3),
                                    kk * 2 + (lane >> 4));
}

// c[n] (16 x 8 C fragments, n = 0..N/8) as A fragments of the next product
// (16 x 16 k-blocks), rounded to the 16-bit type.
template <class T, int N>
__device__ __forceinline__ void c_to_a(const float (&c)[N / 8][4],
                                       uint32_t (&a)[N / 16][4]) {
#pragma unroll
  for (int kb = 0; kb < N / 16; ++kb) {
    a[kb][0] = MmaOps<T>::pack(c[2 * kb][0], c[2 * kb][1]);
    a[kb][1] = MmaOps<T>::pack(c[2 * kb][2], c[2 * kb][3]);
    a[kb][2] = MmaOps<T>::pack(c[2 * kb + 1][0], c[2 * kb + 1][1]);
    a[kb][3] = MmaOps<T>::pack(c[2 * kb + 1][2], c[2 * kb + 1][3]);
  }
}

// acc (16 x N) += a (16 x K, registers as from c_to_a) * tile rows
// [row_base, row_base + K) (K x N, N = the tile's D): e.g. p v, ds k.
template <class T, int K, int N>
__device__ __forceinline__ void mma_a_regs_b_trans(float (&acc)[N / 8][4],
                                                   const uint32_t (&a)[K / 16][4],
                                                   uint32_t tile, int row_base,
                                                   int lane) {
#pragma unroll
  for (int kb = 0; kb < K / 16; ++kb) {
#pragma unroll
    for (int nb2 = 0; nb2 < N / 16; ++nb2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, b_frag_trans_addr<N>(tile, row_base + kb * 16, nb2, lane));
      MmaOps<T>::mma(acc[2 * nb2], a[kb], b[0], b[1]);
      MmaOps<T>::mma(acc[2 * nb2 + 1], a[kb], b[2], b[3]);
    }
  }
}

// acc (16 x N) = rows [a_row, +16) of tile A (16 x D) * rows [0, N) of tile
// B ^T (D x N): e.g. q k^T, do v^T, k q^T.
template <class T, int D, int N>
__device__ __forceinline__ void mma_tile_tile_t(float (&acc)[N / 8][4],
                                                uint32_t tile_a, int a_row,
                                                uint32_t tile_b, int lane) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    ldmatrix_x4(a, a_frag_addr<D>(tile_a, a_row, kk, lane));
#pragma unroll
    for (int nb2 = 0; nb2 < N / 16; ++nb2) {
      uint32_t b[4];
      ldmatrix_x4(b, b_frag_addr<D>(tile_b, nb2 * 16, kk, lane));
      MmaOps<T>::mma(acc[2 * nb2], a, b[0], b[1]);
      MmaOps<T>::mma(acc[2 * nb2 + 1], a, b[2], b[3]);
    }
  }
}

// Stores a warp's 16 x D fragment acc * mul as rows row0 (+ lane / 4, + 8)
// of a (rows_total, D) matrix whose rows are row_stride elements apart, 4
// bytes a store.
template <class T, int D>
__device__ __forceinline__ void store_rows(T *dst, const float (&acc)[D / 8][4],
                                           int64_t row0, int64_t rows_total,
                                           int64_t row_stride, float mul0,
                                           float mul1, int lane) {
  const int64_t r0 = row0 + (lane >> 2), r1 = r0 + 8;
  const int col = (lane & 3) * 2;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    if (r0 < rows_total)
      *reinterpret_cast<uint32_t *>(dst + r0 * row_stride + n * 8 + col) =
          MmaOps<T>::pack(acc[n][0] * mul0, acc[n][1] * mul0);
    if (r1 < rows_total)
      *reinterpret_cast<uint32_t *>(dst + r1 * row_stride + n * 8 + col) =
          MmaOps<T>::pack(acc[n][2] * mul1, acc[n][3] * mul1);
  }
}

// The number of key tiles of width BN that query rows [m0, m0 + BM) see:
// all of S, or up to the last row's diagonal key m0 + BM - 1 + S - T.
__device__ __forceinline__ int attn_key_tiles(const AttnParams &p, int64_t m0,
                                              int BM, int BN) {
  int64_t end = p.S;
  if (p.causal) {
    const int64_t diag = m0 + BM + p.S - p.T;
    end = diag < end ? diag : end;
  }
  return end <= 0 ? 0 : static_cast<int>((end + BN - 1) / BN);
}

//===--------------------------------------------------------------------===//
// Forward, bf16 / f16
//===--------------------------------------------------------------------===//

// acc[mt] (16 x N) = rows [a_row + 16 mt, +16) of tile A (D wide) * rows
// [0, N) of tile B ^T, mt < MT: each B fragment loaded feeds MT products.
template <class T, int D, int N, int MT>
__device__ __forceinline__ void mma_tiles_tile_t(float (&acc)[MT][N / 8][4],
                                                 uint32_t tile_a, int a_row,
                                                 uint32_t tile_b, int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < N / 8; ++n)
      acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      ldmatrix_x4(a[mt], a_frag_addr<D>(tile_a, a_row + 16 * mt, kk, lane));
#pragma unroll
    for (int nb2 = 0; nb2 < N / 16; ++nb2) {
      uint32_t b[4];
      ldmatrix_x4(b, b_frag_addr<D>(tile_b, nb2 * 16, kk, lane));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        MmaOps<T>::mma(acc[mt][2 * nb2], a[mt], b[0], b[1]);
        MmaOps<T>::mma(acc[mt][2 * nb2 + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// acc[mt] (16 x N) += a[mt] (16 x K, registers) * tile rows [0, K) (K x N,
// N = the tile's D), mt < MT.
template <class T, int K, int N, int MT>
__device__ __forceinline__ void mma_regs_tile(float (&acc)[MT][N / 8][4],
                                              const uint32_t (&a)[MT][K / 16][4],
                                              uint32_t tile, int lane) {
#pragma unroll
  for (int kb = 0; kb < K / 16; ++kb)
#pragma unroll
    for (int nb2 = 0; nb2 < N / 16; ++nb2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, b_frag_trans_addr<N>(tile, kb * 16, nb2, lane));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        MmaOps<T>::mma(acc[mt][2 * nb2], a[mt][kb], b[0], b[1]);
        MmaOps<T>::mma(acc[mt][2 * nb2 + 1], a[mt][kb], b[2], b[3]);
      }
    }
}

// Tiles: BM query rows a CTA, 16 * MT rows a warp (BM / (16 MT) warps),
// keys in tiles of BN; MINB CTAs an SM for __launch_bounds__ (caps the
// registers).
template <int D, int BM, int BN> constexpr int attn_fwd_smem_bytes() {
  return (BM + 4 * BN) * D * 2; // q + double-buffered k and v
}

// Grid: one CTA per (query tile, b, h), the heaviest causal tiles (the
// last) first so the tail of the launch is short ones.
template <class T, int D, int BM, int BN, int MT, int MINB>
__global__ void __launch_bounds__(BM * 2 / MT, MINB)
    attn_fwd_mma_kernel(const T *__restrict__ q, const T *__restrict__ k,
                        const T *__restrict__ v, T *__restrict__ out,
                        float *__restrict__ lse, AttnParams p) {
  constexpr int kThreads = BM * 2 / MT;
  extern __shared__ uint4 attn_smem[];
  const uint32_t sq = smem_addr(attn_smem);
  const uint32_t sk0 = sq + BM * D * 2, sv0 = sk0 + 2 * BN * D * 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  const int64_t bh_count = p.B * p.H;
  const int64_t q_tiles = (p.T + BM - 1) / BM;
  const int64_t qt = q_tiles - 1 - static_cast<int64_t>(blockIdx.x) / bh_count;
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % bh_count;
  const int64_t b = bh / p.H, h = bh % p.H;
  const int64_t hk = h / (p.H / p.Hkv);
  const int64_t m0 = qt * BM;
  const T *qp = attn_head(q, p.q, b, h);
  const T *kp = attn_head(k, p.k, b, hk);
  const T *vp = attn_head(v, p.v, b, hk);

  const int tiles = attn_key_tiles(p, m0, BM, BN);
  load_tile_async<BM, D, kThreads>(sq, qp, m0, p.T, p.q.r);
  if (tiles > 0) {
    load_tile_async<BN, D, kThreads>(sk0, kp, 0, p.S, p.k.r);
    load_tile_async<BN, D, kThreads>(sv0, vp, 0, p.S, p.v.r);
  }
  cp_async_commit();

  float o[MT][D / 8][4];
  float row_max[MT][2], row_sum[MT][2]; // log2 units; this lane's columns
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    row_max[mt][0] = row_max[mt][1] = -infinity<float>();
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }
  // Rows row_a + 16 mt + 8 r.
  const int64_t row_a = m0 + warp * 16 * MT + (lane >> 2);

  for (int t = 0; t < tiles; ++t) {
    next_kv_tile_async<BN, D, kThreads>(sk0, sv0, kp, vp, t, tiles, p);
    const uint32_t sk = sk0 + (t & 1) * BN * D * 2;
    const uint32_t sv = sv0 + (t & 1) * BN * D * 2;

    float s[MT][BN / 8][4];
    mma_tiles_tile_t<T, D, BN, MT>(s, sq, warp * 16 * MT, sk, lane);

    const int64_t n0 = int64_t(t) * BN;
    const bool masked =
        n0 + BN > p.S || (p.causal && n0 + BN - 1 > m0 + p.S - p.T);
    uint32_t pa[MT][BN / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int n = 0; n < BN / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mt][n][e] *= p.sl2;
          if (masked) {
            const int64_t col = n0 + n * 8 + (lane & 3) * 2 + (e & 1);
            const int64_t row = row_a + 16 * mt + (e >> 1) * 8;
            if (col >= p.S || (p.causal && col > row + p.S - p.T))
              s[mt][n][e] = -infinity<float>();
          }
        }
      // Online softmax: new max, rescale the running sum and output.
      float shift[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = row_max[mt][r];
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
          mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        shift[r] = mx == -infinity<float>() ? 0.f : mx; // all masked so far
        const float alpha = fast_exp2(row_max[mt][r] - shift[r]);
        row_max[mt][r] = mx;
        row_sum[mt][r] *= alpha;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          o[mt][n][2 * r] *= alpha;
          o[mt][n][2 * r + 1] *= alpha;
        }
      }
#pragma unroll
      for (int n = 0; n < BN / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float pe = fast_exp2(s[mt][n][e] - shift[e >> 1]);
          row_sum[mt][e >> 1] += pe;
          s[mt][n][e] = pe;
        }
      if (p.dropout) {
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t col = n0 + n * 8 + (lane & 3) * 2 + (e & 1);
            const int64_t row = row_a + 16 * mt + (e >> 1) * 8;
            const uint64_t counter =
                static_cast<uint64_t>((bh * p.T + row) * p.S + col);
            s[mt][n][e] = attn_keep(p.stream_key, counter, p.threshold)
                              ? s[mt][n][e] * p.keep_scale
                              : 0.f;
          }
      }
      c_to_a<T, BN>(s[mt], pa[mt]);
    }
    mma_regs_tile<T, BN, D, MT>(o, pa, sv, lane);
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float inv[2], lse_row[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_sum[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv[r] = l > 0.f ? 1.f / l : 0.f;
      lse_row[r] =
          l > 0.f ? (row_max[mt][r] + log2f(l)) * kLn2 : -infinity<float>();
    }
    store_rows<T, D>(attn_head(out, p.o, b, h), o[mt],
                     m0 + (warp * MT + mt) * 16, p.T, p.o.r, inv[0], inv[1],
                     lane);
    const int64_t row = row_a + 16 * mt;
    if ((lane & 3) == 0) {
      if (row < p.T)
        lse[bh * p.T + row] = lse_row[0];
      if (row + 8 < p.T)
        lse[bh * p.T + row + 8] = lse_row[1];
    }
  }
}

//===--------------------------------------------------------------------===//
// Float (SIMT): a warp per row, lanes split D
//===--------------------------------------------------------------------===//

template <int D> __device__ __forceinline__ float warp_dot(const float (&a)[D / 32],
                                                           const float *b, int lane) {
  float acc = 0.f;
#pragma unroll
  for (int e = 0; e < D / 32; ++e)
    acc = fmaf(a[e], b[e * 32 + lane], acc);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, off); // same sum on every lane
  return acc;
}

// One warp per query row (b, h, i); keys j < S, or j <= i + S - T causal.
template <int D>
__global__ void __launch_bounds__(128)
    attn_fwd_f32_kernel(const float *__restrict__ q, const float *__restrict__ k,
                        const float *__restrict__ v, float *__restrict__ out,
                        float *__restrict__ lse, AttnParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);
  if (row >= p.B * p.H * p.T)
    return;
  const int64_t bh = row / p.T, i = row % p.T;
  const int64_t b = bh / p.H, h = bh % p.H, hk = h / (p.H / p.Hkv);
  const float *kp = attn_head(k, p.k, b, hk), *vp = attn_head(v, p.v, b, hk);
  const float *qp = attn_head(q, p.q, b, h) + i * p.q.r;
  float qr[D / 32], o[D / 32];
#pragma unroll
  for (int e = 0; e < D / 32; ++e) {
    qr[e] = qp[e * 32 + lane];
    o[e] = 0.f;
  }
  int64_t end = p.S;
  if (p.causal && i + 1 + p.S - p.T < end)
    end = i + 1 + p.S - p.T;
  float m = -infinity<float>(), l = 0.f;
  for (int64_t j = 0; j < end; ++j) {
    const float s = warp_dot<D>(qr, kp + j * p.k.r, lane) * p.scale;
    const float m_new = fmaxf(m, s);
    const float alpha = tcc_cuda::exp(m - m_new), pe = tcc_cuda::exp(s - m_new);
    l = l * alpha + pe;
    m = m_new;
    float pd = pe;
    if (p.dropout)
      pd = attn_keep(p.stream_key, static_cast<uint64_t>(row * p.S + j),
                     p.threshold)
               ? pe * p.keep_scale
               : 0.f;
#pragma unroll
    for (int e = 0; e < D / 32; ++e)
      o[e] = fmaf(pd, vp[j * p.v.r + e * 32 + lane], o[e] * alpha);
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  float *op = attn_head(out, p.o, b, h) + i * p.o.r;
#pragma unroll
  for (int e = 0; e < D / 32; ++e)
    op[e * 32 + lane] = o[e] * inv;
  if (lane == 0)
    lse[row] = l > 0.f ? m + tcc_cuda::log(l) : -infinity<float>();
}
