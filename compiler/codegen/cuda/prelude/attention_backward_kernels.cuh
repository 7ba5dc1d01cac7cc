
//===--------------------------------------------------------------------===//
// Attention backward kernels (pieces shared with the forward:
// attention_kernels.cuh)
//===--------------------------------------------------------------------===//
//
// With P = softmax(scale * q k^T) (recomputed from the forward's lse), the
// dropout mask M (scaled by 1 / (1 - rate)) and Z = M o P (out = Z v):
//   delta_i = sum_d dout[i, d] out[i, d]      (= sum_j Z_ij dZ_ij)
//   dv      = Z^T dout
//   dP      = M o (dout v^T)
//   dS      = P o (dP - delta)
//   dk      = scale dS^T q,   dq = scale dS k
// Three launches: delta (a warp per row), dk / dv (a CTA per key tile of
// one kv head, looping over the query tiles of every query head of its
// group, so a GQA group's sum is formed in registers), and dq (a CTA per
// query tile looping over the key tiles, recomputing P and dP: two more
// products than FlashAttention-2's fp32 atomics into a dq accumulator, yet
// as fast or faster on an H200 at the benchmark shapes — an atomic
// version measured 0.95x / 0.92x of this at D 64 / 128, see
// docs/performance.md). No atomics anywhere: every result is written once
// by one thread in a fixed order, so the backward is deterministic in
// every mode.

// delta[row] = sum_d dout[row, d] * out[row, d] (float), a warp per row
// (b, h, i).
template <class T, int D>
__global__ void __launch_bounds__(128)
    attn_bwd_delta_kernel(const T *__restrict__ out, const T *__restrict__ dout,
                          float *__restrict__ delta, AttnParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);
  if (row >= p.B * p.H * p.T)
    return;
  const int64_t bh = row / p.T, i = row % p.T, b = bh / p.H, h = bh % p.H;
  const T *op = attn_head(out, p.o, b, h) + i * p.o.r;
  const T *gp = attn_head(dout, p.dout, b, h) + i * p.dout.r;
  float acc = 0.f;
#pragma unroll
  for (int e = 0; e < D / 32; ++e)
    acc = fmaf(Elem<T>::load(gp[e * 32 + lane]), Elem<T>::load(op[e * 32 + lane]),
               acc);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0)
    delta[row] = acc;
}

//===--------------------------------------------------------------------===//
// dk / dv, bf16 / f16
//===--------------------------------------------------------------------===//

// BN keys a CTA (BN / 16 warps of 16 key rows), query tiles of BM rows
// (the dk and dv accumulators take D registers a thread).
template <int D, int BM, int BN> constexpr int attn_bwd_kv_smem_bytes() {
  // k, v; double-buffered q, dout; double-buffered lse (log2 units), delta
  return (2 * BN + 4 * BM) * D * 2 + 4 * BM * 4;
}


// DROPOUT == p.dropout (a template flag: the dropout-free kernel carries
// none of its per-element code or registers).
template <class T, int D, int BM, int BN, int MINB, bool DROPOUT>
__global__ void __launch_bounds__(BN * 2, MINB)
    attn_bwd_dkdv_mma_kernel(const T *__restrict__ q, const T *__restrict__ k,
                             const T *__restrict__ v, const T *__restrict__ dout,
                             const float *__restrict__ lse,
                             const float *__restrict__ delta, T *__restrict__ dk,
                             T *__restrict__ dv, AttnParams p) {
  constexpr int kThreads = BN * 2;
  extern __shared__ uint4 attn_smem[];
  const uint32_t sk = smem_addr(attn_smem);
  const uint32_t sv = sk + BN * D * 2, sq0 = sv + BN * D * 2;
  const uint32_t sdo0 = sq0 + 2 * BM * D * 2;
  float *s_lse = reinterpret_cast<float *>(
      reinterpret_cast<char *>(attn_smem) + (2 * BN + 4 * BM) * D * 2);
  float *s_delta = s_lse + 2 * BM;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  const int64_t bhk_count = p.B * p.Hkv;
  const int64_t kt = static_cast<int64_t>(blockIdx.x) / bhk_count;
  const int64_t bhk = static_cast<int64_t>(blockIdx.x) % bhk_count;
  const int64_t b = bhk / p.Hkv, hk = bhk % p.Hkv, group = p.H / p.Hkv;
  const int64_t n0 = kt * BN;
  // Causal: query i sees key j iff j <= i + S - T, so rows below
  // n0 - (S - T) see none of this tile.
  int64_t first = 0;
  if (p.causal && n0 - (p.S - p.T) > 0)
    first = (n0 - (p.S - p.T)) / BM;
  const int64_t q_tiles = (p.T + BM - 1) / BM;
  const int64_t per_head = q_tiles > first ? q_tiles - first : 0;
  const int64_t iters = group * per_head;

  // Stage query tile m0 of head row bhq into buffer `buf`. Steps walk the
  // (head, tile) pairs in order with counters (no 64-bit divisions in the
  // loop).
  auto stage = [&](int64_t bhq, int64_t m0, int buf) {
    const int64_t hq = bhq - b * p.H;
    load_tile_async<BM, D, kThreads>(sq0 + buf * BM * D * 2,
                                     attn_head(q, p.q, b, hq), m0, p.T, p.q.r);
    load_tile_async<BM, D, kThreads>(sdo0 + buf * BM * D * 2,
                                     attn_head(dout, p.dout, b, hq), m0, p.T,
                                     p.dout.r);
    if (threadIdx.x < BM) {
      const int64_t row = m0 + threadIdx.x;
      const float l = row < p.T ? lse[bhq * p.T + row] : -infinity<float>();
      // +inf makes P = exp2(s - inf) = 0: rows past T, fully masked rows.
      s_lse[buf * BM + threadIdx.x] =
          l == -infinity<float>() ? infinity<float>() : l * kLog2e;
      s_delta[buf * BM + threadIdx.x] = row < p.T ? delta[bhq * p.T + row] : 0.f;
    }
  };

  const T *kp = attn_head(k, p.k, b, hk), *vp = attn_head(v, p.v, b, hk);
  load_tile_async<BN, D, kThreads>(sk, kp, n0, p.S, p.k.r);
  load_tile_async<BN, D, kThreads>(sv, vp, n0, p.S, p.v.r);
  const int64_t bhq0 = b * p.H + hk * group, m_first = first * BM;
  if (iters > 0)
    stage(bhq0, m_first, 0);
  cp_async_commit();
  int64_t bhq = bhq0, m0 = m_first; // this step's head row and tile

  float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dk_acc[n][e] = dv_acc[n][e] = 0.f;
  const int64_t key_a = n0 + warp * 16 + (lane >> 2); // keys key_a, key_a + 8

  for (int64_t it = 0; it < iters; ++it) {
    cp_async_wait_all();
    __syncthreads();
    // The next step's (head, tile).
    int64_t next_bhq = bhq, next_m0 = m0 + BM;
    if (next_m0 >= p.T) {
      next_m0 = m_first;
      ++next_bhq;
    }
    if (it + 1 < iters)
      stage(next_bhq, next_m0, (it + 1) & 1);
    cp_async_commit();
    const int buf = it & 1;
    const uint32_t sq = sq0 + buf * BM * D * 2, sdo = sdo0 + buf * BM * D * 2;
    const float *lse2 = s_lse + buf * BM, *dl = s_delta + buf * BM;

    // Both products first (the exps below overlap the second's latency).
    float pt[BM / 8][4]; // P^T: key rows, query columns
    mma_tile_tile_t<T, D, BM>(pt, sk, warp * 16, sq, lane);
    float dpt[BM / 8][4]; // (dout v^T)^T = v dout^T
    mma_tile_tile_t<T, D, BM>(dpt, sv, warp * 16, sdo, lane);
    const bool masked =
        n0 + BN > p.S || (p.causal && n0 + BN - 1 > m0 + p.S - p.T);
    uint32_t keep_bits = 0;
#pragma unroll
    for (int n = 0; n < BM / 8; ++n) {
      const float2 l2 =
          *reinterpret_cast<const float2 *>(lse2 + n * 8 + (lane & 3) * 2);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int cl = n * 8 + (lane & 3) * 2 + (e & 1);
        const int64_t key = key_a + (e >> 1) * 8, qi = m0 + cl;
        float pe = fast_exp2(pt[n][e] * p.sl2 - ((e & 1) ? l2.y : l2.x));
        if (masked && (key >= p.S || (p.causal && key > qi + p.S - p.T)))
          pe = 0.f;
        pt[n][e] = pe;
        if (DROPOUT &&
            attn_keep(p.stream_key,
                      static_cast<uint64_t>((bhq * p.T + qi) * p.S + key),
                      p.threshold))
          keep_bits |= 1u << (n * 4 + e);
      }
    }
    {
      float zt[BM / 8][4]; // Z^T = M o P^T
#pragma unroll
      for (int n = 0; n < BM / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          zt[n][e] = !DROPOUT ? pt[n][e]
                     : (keep_bits >> (n * 4 + e)) & 1u ? pt[n][e] * p.keep_scale
                                                        : 0.f;
      uint32_t za[BM / 16][4];
      c_to_a<T, BM>(zt, za);
      mma_a_regs_b_trans<T, BM, D>(dv_acc, za, sdo, 0, lane);
    }
#pragma unroll
    for (int n = 0; n < BM / 8; ++n) {
      const float2 d2 =
          *reinterpret_cast<const float2 *>(dl + n * 8 + (lane & 3) * 2);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float dp = dpt[n][e];
        if (DROPOUT)
          dp = (keep_bits >> (n * 4 + e)) & 1u ? dp * p.keep_scale : 0.f;
        dpt[n][e] = pt[n][e] * (dp - ((e & 1) ? d2.y : d2.x));
      }
    }
    uint32_t dsa[BM / 16][4];
    c_to_a<T, BM>(dpt, dsa);
    mma_a_regs_b_trans<T, BM, D>(dk_acc, dsa, sq, 0, lane);
    bhq = next_bhq;
    m0 = next_m0;
  }

  store_rows<T, D>(attn_head(dk, p.dk, b, hk), dk_acc, n0 + warp * 16, p.S,
                   p.dk.r, p.scale, p.scale, lane);
  store_rows<T, D>(attn_head(dv, p.dv, b, hk), dv_acc, n0 + warp * 16, p.S,
                   p.dv.r, 1.f, 1.f, lane);
}

//===--------------------------------------------------------------------===//
// dq, bf16 / f16
//===--------------------------------------------------------------------===//

// BM query rows a CTA, 16 * MT a warp (BM / (16 MT) warps), key tiles of
// BN, double-buffered.
template <int D, int BM, int BN> constexpr int attn_bwd_q_smem_bytes() {
  return (2 * BM + 4 * BN) * D * 2; // q, dout; k, v x 2
}

template <class T, int D, int BM, int BN, int MT, int MINB, bool DROPOUT>
__global__ void __launch_bounds__(BM * 2 / MT, MINB)
    attn_bwd_dq_mma_kernel(const T *__restrict__ q, const T *__restrict__ k,
                           const T *__restrict__ v, const T *__restrict__ dout,
                           const float *__restrict__ lse,
                           const float *__restrict__ delta, T *__restrict__ dq,
                           AttnParams p) {
  constexpr int kThreads = BM * 2 / MT;
  extern __shared__ uint4 attn_smem[];
  const uint32_t sq = smem_addr(attn_smem);
  const uint32_t sdo = sq + BM * D * 2, sk0 = sdo + BM * D * 2;
  const uint32_t sv0 = sk0 + 2 * BN * D * 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  const int64_t bh_count = p.B * p.H;
  const int64_t q_tiles = (p.T + BM - 1) / BM;
  const int64_t qt = q_tiles - 1 - static_cast<int64_t>(blockIdx.x) / bh_count;
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % bh_count;
  const int64_t b = bh / p.H, h = bh % p.H, hk = h / (p.H / p.Hkv);
  const int64_t m0 = qt * BM;
  const T *kp = attn_head(k, p.k, b, hk), *vp = attn_head(v, p.v, b, hk);

  const int tiles = attn_key_tiles(p, m0, BM, BN);
  load_tile_async<BM, D, kThreads>(sq, attn_head(q, p.q, b, h), m0, p.T, p.q.r);
  load_tile_async<BM, D, kThreads>(sdo, attn_head(dout, p.dout, b, h), m0, p.T,
                                   p.dout.r);
  if (tiles > 0) {
    load_tile_async<BN, D, kThreads>(sk0, kp, 0, p.S, p.k.r);
    load_tile_async<BN, D, kThreads>(sv0, vp, 0, p.S, p.v.r);
  }
  cp_async_commit();

  // Rows row_a + 16 mt + 8 r.
  const int64_t row_a = m0 + warp * 16 * MT + (lane >> 2);
  float lse2[MT][2], dl[MT][2];
  float dq_acc[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row_a + 16 * mt + 8 * r;
      const float l = row < p.T ? lse[bh * p.T + row] : -infinity<float>();
      lse2[mt][r] = l == -infinity<float>() ? infinity<float>() : l * kLog2e;
      dl[mt][r] = row < p.T ? delta[bh * p.T + row] : 0.f;
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      dq_acc[mt][n][0] = dq_acc[mt][n][1] = dq_acc[mt][n][2] =
          dq_acc[mt][n][3] = 0.f;
  }

  for (int t = 0; t < tiles; ++t) {
    next_kv_tile_async<BN, D, kThreads>(sk0, sv0, kp, vp, t, tiles, p);
    const uint32_t sk = sk0 + (t & 1) * BN * D * 2;
    const uint32_t sv = sv0 + (t & 1) * BN * D * 2;
    const int64_t n0 = int64_t(t) * BN;

    float s[MT][BN / 8][4], dp[MT][BN / 8][4];
    mma_tiles_tile_t<T, D, BN, MT>(s, sq, warp * 16 * MT, sk, lane);
    mma_tiles_tile_t<T, D, BN, MT>(dp, sdo, warp * 16 * MT, sv, lane);
    const bool masked =
        n0 + BN > p.S || (p.causal && n0 + BN - 1 > m0 + p.S - p.T);
    uint32_t dsa[MT][BN / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int n = 0; n < BN / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t col = n0 + n * 8 + (lane & 3) * 2 + (e & 1);
          const int64_t row = row_a + 16 * mt + (e >> 1) * 8;
          float pe = fast_exp2(s[mt][n][e] * p.sl2 - lse2[mt][e >> 1]);
          if (masked && (col >= p.S || (p.causal && col > row + p.S - p.T)))
            pe = 0.f;
          float d = dp[mt][n][e];
          if (DROPOUT)
            d = attn_keep(p.stream_key,
                          static_cast<uint64_t>((bh * p.T + row) * p.S + col),
                          p.threshold)
                    ? d * p.keep_scale
                    : 0.f;
          s[mt][n][e] = pe * (d - dl[mt][e >> 1]);
        }
      c_to_a<T, BN>(s[mt], dsa[mt]);
    }
    mma_regs_tile<T, BN, D, MT>(dq_acc, dsa, sk, lane);
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    store_rows<T, D>(attn_head(dq, p.dq, b, h), dq_acc[mt],
                     m0 + (warp * MT + mt) * 16, p.T, p.dq.r, p.scale, p.scale,
                     lane);
}

//===--------------------------------------------------------------------===//
// Float (SIMT) backward: a warp per query row (dq), a warp per key row
// (dk, dv)
//===--------------------------------------------------------------------===//

template <int D>
__global__ void __launch_bounds__(128)
    attn_bwd_dq_f32_kernel(const float *__restrict__ q, const float *__restrict__ k,
                           const float *__restrict__ v,
                           const float *__restrict__ dout,
                           const float *__restrict__ lse,
                           const float *__restrict__ delta,
                           float *__restrict__ dq, AttnParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);
  if (row >= p.B * p.H * p.T)
    return;
  const int64_t bh = row / p.T, i = row % p.T;
  const int64_t b = bh / p.H, h = bh % p.H, hk = h / (p.H / p.Hkv);
  const float *kp = attn_head(k, p.k, b, hk), *vp = attn_head(v, p.v, b, hk);
  const float *qp = attn_head(q, p.q, b, h) + i * p.q.r;
  const float *gp = attn_head(dout, p.dout, b, h) + i * p.dout.r;
  float qr[D / 32], dor[D / 32], acc[D / 32];
#pragma unroll
  for (int e = 0; e < D / 32; ++e) {
    qr[e] = qp[e * 32 + lane];
    dor[e] = gp[e * 32 + lane];
    acc[e] = 0.f;
  }
  const float l = lse[row], dl = delta[row];
  int64_t end = l == -infinity<float>() ? 0 : p.S; // fully masked: P = 0
  if (p.causal && i + 1 + p.S - p.T < end)
    end = i + 1 + p.S - p.T;
  for (int64_t j = 0; j < end; ++j) {
    const float pe =
        tcc_cuda::exp(warp_dot<D>(qr, kp + j * p.k.r, lane) * p.scale - l);
    float d = warp_dot<D>(dor, vp + j * p.v.r, lane);
    if (p.dropout)
      d = attn_keep(p.stream_key, static_cast<uint64_t>(row * p.S + j),
                    p.threshold)
              ? d * p.keep_scale
              : 0.f;
    const float ds = pe * (d - dl);
#pragma unroll
    for (int e = 0; e < D / 32; ++e)
      acc[e] = fmaf(ds, kp[j * p.k.r + e * 32 + lane], acc[e]);
  }
  float *dqp = attn_head(dq, p.dq, b, h) + i * p.dq.r;
#pragma unroll
  for (int e = 0; e < D / 32; ++e)
    dqp[e * 32 + lane] = acc[e] * p.scale;
}

template <int D>
__global__ void __launch_bounds__(128)
    attn_bwd_dkdv_f32_kernel(const float *__restrict__ q,
                             const float *__restrict__ k,
                             const float *__restrict__ v,
                             const float *__restrict__ dout,
                             const float *__restrict__ lse,
                             const float *__restrict__ delta,
                             float *__restrict__ dk, float *__restrict__ dv,
                             AttnParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t key_row =
      static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);
  if (key_row >= p.B * p.Hkv * p.S)
    return;
  const int64_t bhk = key_row / p.S, j = key_row % p.S;
  const int64_t b = bhk / p.Hkv, hk = bhk % p.Hkv, group = p.H / p.Hkv;
  float kr[D / 32], vr[D / 32], dk_acc[D / 32], dv_acc[D / 32];
  const float *kp = attn_head(k, p.k, b, hk) + j * p.k.r;
  const float *vp = attn_head(v, p.v, b, hk) + j * p.v.r;
#pragma unroll
  for (int e = 0; e < D / 32; ++e) {
    kr[e] = kp[e * 32 + lane];
    vr[e] = vp[e * 32 + lane];
    dk_acc[e] = dv_acc[e] = 0.f;
  }
  // Causal: only queries i >= j - (S - T) see key j.
  int64_t first = 0;
  if (p.causal && j - (p.S - p.T) > 0)
    first = j - (p.S - p.T);
  for (int64_t g = 0; g < group; ++g) {
    const int64_t hq = hk * group + g, bhq = b * p.H + hq;
    for (int64_t i = first; i < p.T; ++i) {
      const int64_t row = bhq * p.T + i;
      const float l = lse[row];
      if (l == -infinity<float>())
        continue; // fully masked row: P = 0
      const float *qp = attn_head(q, p.q, b, hq) + i * p.q.r;
      const float *dop = attn_head(dout, p.dout, b, hq) + i * p.dout.r;
      const float pe = tcc_cuda::exp(warp_dot<D>(kr, qp, lane) * p.scale - l);
      float d = warp_dot<D>(vr, dop, lane);
      float z = pe;
      if (p.dropout) {
        const bool keep = attn_keep(
            p.stream_key, static_cast<uint64_t>(row * p.S + j), p.threshold);
        d = keep ? d * p.keep_scale : 0.f;
        z = keep ? pe * p.keep_scale : 0.f;
      }
      const float ds = pe * (d - delta[row]);
#pragma unroll
      for (int e = 0; e < D / 32; ++e) {
        dv_acc[e] = fmaf(z, dop[e * 32 + lane], dv_acc[e]);
        dk_acc[e] = fmaf(ds, qp[e * 32 + lane], dk_acc[e]);
      }
    }
  }
  float *dkp = attn_head(dk, p.dk, b, hk) + j * p.dk.r;
  float *dvp = attn_head(dv, p.dv, b, hk) + j * p.dv.r;
#pragma unroll
  for (int e = 0; e < D / 32; ++e) {
    dkp[e * 32 + lane] = dk_acc[e] * p.scale;
    dvp[e * 32 + lane] = dv_acc[e];
  }
}
