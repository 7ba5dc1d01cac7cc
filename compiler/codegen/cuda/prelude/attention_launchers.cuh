
// Attention (flash attention) launchers. Logical shapes: q (B, H, T, D);
// k, v (B, Hkv, S, D); out (B, H, T, D); lse (B, H, T) float, contiguous.
// launch_attention_forward / _backward take q, k, v, out, dout, dq, dk, dv
// contiguous row-major; the _strided launchers place each tensor's rows by
// an AttnLayout (row (b, h, i) of D contiguous elements at b * s.b + h * s.h
// + i * s.r), e.g. q, k, v read from and dq, dk, dv written into a packed
// (B, T, 3*H*D) buffer. H % Hkv == 0: query head h uses kv head h / (H / Hkv) (grouped /
// multi-query attention).
//   s[i, j] = scale * q[i] . k[j]; causal: key j is masked for query i when
//     j > i + (S - T) (bottom-right aligned, like tg.causal_mask); a fully
//     masked row gives out = 0 and lse = -inf;
//   p = softmax_j(s); lse[i] = log(sum_j exp(s[i, j])) (natural log, of
//     the undropped scores);
//   dropout (rate in [0, 1)): element (b, h, i, j) is kept iff
//     tcc_rng_bits(seed_key, step, ((b * H + h) * T + i) * S + j) >> 40 >=
//     ceil(rate * 2^24) (runtime/include/tcc/counter_rng.h; the caller
//     computes seed_key = rng_seed ^ mix64(op_id)); kept p are scaled by
//     1 / (1 - rate); out = dropout(p) @ v. Rate 0: no dropout, no RNG work.
// T is bf16 or f16 (tensor cores, fp32 accumulation and softmax, inputs of
// each product rounded to T: p and dS as in FlashAttention) or float (SIMT,
// fp32 throughout). D must be 64 or 128; the bf16 / f16 path also needs
// 16-byte aligned q, k, v, out, dout, dq, dk, dv (cudaMalloc's are) and,
// strided, every stride a multiple of 8 elements (16-byte rows). Strides
// must be >= 0; written tensors must not overlap each other or an input
// (not checked).
// Unsupported shapes or arguments return cudaErrorInvalidValue and launch
// nothing; otherwise the launchers only enqueue on `stream` (no
// synchronization, no allocation) and return cudaSuccess (launch errors
// are left for the caller's cudaGetLastError, as everywhere here).

// The strides of every tensor an attention launch touches (elements).
using AttnStrides = detail::AttnStrides;
struct AttnLayout {
  AttnStrides q, k, v, o, dout, dq, dk, dv;
};

// Contiguous (B, H, T, D) q, out, dout, dq and (B, Hkv, S, D) k, v, dk, dv.
inline AttnLayout attn_contiguous_layout(int64_t H, int64_t Hkv, int64_t T,
                                         int64_t S, int64_t D) {
  const AttnStrides qs{H * T * D, T * D, D}, ks{Hkv * S * D, S * D, D};
  return AttnLayout{qs, ks, ks, qs, qs, qs, ks, ks};
}

namespace detail {

inline bool attn_strides_ok(const AttnStrides &s, int64_t multiple) {
  return s.b >= 0 && s.h >= 0 && s.r >= 0 && s.b % multiple == 0 &&
         s.h % multiple == 0 && s.r % multiple == 0;
}
// `multiple`: 8 for the 16-bit tensor-core path (16-byte rows), else 1.
inline bool attn_layout_ok(const AttnLayout &l, int64_t multiple) {
  for (const AttnStrides *s : {&l.q, &l.k, &l.v, &l.o, &l.dout, &l.dq, &l.dk,
                               &l.dv})
    if (!attn_strides_ok(*s, multiple))
      return false;
  return true;
}

inline bool attn_shapes_ok(int64_t B, int64_t H, int64_t Hkv, int64_t T,
                           int64_t S, int64_t D, float dropout_rate) {
  return B >= 0 && H >= 0 && Hkv > 0 && T >= 0 && S >= 0 && H % Hkv == 0 &&
         (D == 64 || D == 128) && dropout_rate >= 0.f && dropout_rate < 1.f;
}

inline AttnParams attn_params(int64_t B, int64_t H, int64_t Hkv, int64_t T,
                              int64_t S, const AttnLayout &layout, float scale,
                              bool causal, float dropout_rate,
                              uint64_t seed_key, uint64_t step) {
  AttnParams p;
  p.B = B;
  p.H = H;
  p.Hkv = Hkv;
  p.T = T;
  p.S = S;
  p.q = layout.q;
  p.k = layout.k;
  p.v = layout.v;
  p.o = layout.o;
  p.dout = layout.dout;
  p.dq = layout.dq;
  p.dk = layout.dk;
  p.dv = layout.dv;
  p.scale = scale;
  p.sl2 = scale * kLog2e;
  p.causal = causal;
  p.dropout = dropout_rate > 0.f;
  p.threshold = static_cast<uint32_t>(
      std::ceil(static_cast<double>(dropout_rate) * 16777216.0));
  p.keep_scale = 1.f / (1.f - dropout_rate);
  p.stream_key = attn_mix64(attn_mix64(seed_key) ^ step);
  return p;
}

// Grids are 1-D, one CTA per (tile, head row block): at most 2^31 - 1.
inline bool attn_grid_ok(int64_t blocks) { return blocks <= 2147483647; }

// Tile shapes by head size, the fastest of bench/attention/attention_tune.cu
// on an H200 (bf16, causal, B16 H12 T1024 D64 and B8 H16 T2048 D128;
// bench/results/attention-h200-2026-11-24). MinBlocks is the CTAs an SM
// asked of __launch_bounds__ (it caps the registers a thread: 4 x 128
// threads -> 128, 2 x 128 -> 255).
template <int D> struct AttnTiles {
  // forward: 16 * kFwdMT query rows a warp (each k / v fragment feeds
  // kFwdMT products)
  static constexpr int kFwdBM = D == 128 ? 128 : 64, kFwdBN = 64,
                       kFwdMT = D == 128 ? 2 : 1,
                       kFwdMinBlocks = D == 128 ? 2 : 4;
  // dk / dv (D128: 128 keys, 8 warps, one CTA an SM)
  static constexpr int kKvBM = D == 128 ? 64 : 32, kKvBN = D == 128 ? 128 : 64,
                       kKvMinBlocks = D == 128 ? 1 : 4;
  // dq: 32 query rows a warp (each k / v fragment feeds two products)
  static constexpr int kQBM = 128, kQBN = D == 128 ? 32 : 64, kQMT = 2,
                       kQMinBlocks = 2;
};

template <class T, int D, int BM, int BN, int MT, int MINB>
inline cudaError_t attn_forward_mma(const T *q, const T *k, const T *v, T *out,
                                    float *lse, const AttnParams &p,
                                    cudaStream_t stream) {
  const int64_t blocks = ((p.T + BM - 1) / BM) * p.B * p.H;
  if (blocks <= 0)
    return cudaSuccess;
  if (!attn_grid_ok(blocks))
    return cudaErrorInvalidValue;
  constexpr int smem = attn_fwd_smem_bytes<D, BM, BN>();
  cudaFuncSetAttribute(attn_fwd_mma_kernel<T, D, BM, BN, MT, MINB>,
                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  attn_fwd_mma_kernel<T, D, BM, BN, MT, MINB>
      <<<static_cast<unsigned>(blocks), BM * 2 / MT, smem, stream>>>(
          q, k, v, out, lse, p);
  return cudaSuccess;
}

// dk, dv and dq (delta computed already); DROPOUT == p.dropout.
template <class T, int D, int KV_BM, int KV_BN, int KV_MINB, int Q_BM,
          int Q_BN, int Q_MT, int Q_MINB, bool DROPOUT>
inline cudaError_t attn_backward_mma(const T *q, const T *k, const T *v,
                                     const float *lse, const T *dout,
                                     const float *delta, T *dq, T *dk, T *dv,
                                     const AttnParams &p, cudaStream_t stream) {
  const int64_t kv_blocks = ((p.S + KV_BN - 1) / KV_BN) * p.B * p.Hkv;
  const int64_t q_blocks = ((p.T + Q_BM - 1) / Q_BM) * p.B * p.H;
  if (!attn_grid_ok(kv_blocks) || !attn_grid_ok(q_blocks))
    return cudaErrorInvalidValue;
  if (kv_blocks > 0) {
    constexpr int smem = attn_bwd_kv_smem_bytes<D, KV_BM, KV_BN>();
    auto kernel =
        attn_bwd_dkdv_mma_kernel<T, D, KV_BM, KV_BN, KV_MINB, DROPOUT>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         smem);
    kernel<<<static_cast<unsigned>(kv_blocks), KV_BN * 2, smem, stream>>>(
        q, k, v, dout, lse, delta, dk, dv, p);
  }
  if (q_blocks > 0) {
    constexpr int smem = attn_bwd_q_smem_bytes<D, Q_BM, Q_BN>();
    auto kernel =
        attn_bwd_dq_mma_kernel<T, D, Q_BM, Q_BN, Q_MT, Q_MINB, DROPOUT>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         smem);
    kernel<<<static_cast<unsigned>(q_blocks), Q_BM * 2 / Q_MT, smem, stream>>>(
        q, k, v, dout, lse, delta, dq, p);
  }
  return cudaSuccess;
}

template <class T, int D>
inline cudaError_t attn_forward_tuned(const T *q, const T *k, const T *v,
                                      T *out, float *lse, const AttnParams &p,
                                      cudaStream_t stream) {
  using C = AttnTiles<D>;
  return attn_forward_mma<T, D, C::kFwdBM, C::kFwdBN, C::kFwdMT,
                          C::kFwdMinBlocks>(
      q, k, v, out, lse, p, stream);
}
template <class T, int D>
inline cudaError_t attn_backward_tuned(const T *q, const T *k, const T *v,
                                       const float *lse, const T *dout,
                                       const float *delta, T *dq, T *dk, T *dv,
                                       const AttnParams &p,
                                       cudaStream_t stream) {
  using C = AttnTiles<D>;
  return p.dropout
             ? attn_backward_mma<T, D, C::kKvBM, C::kKvBN, C::kKvMinBlocks,
                                 C::kQBM, C::kQBN, C::kQMT, C::kQMinBlocks,
                                 true>(q, k, v, lse, dout, delta, dq, dk, dv,
                                       p, stream)
             : attn_backward_mma<T, D, C::kKvBM, C::kKvBN, C::kKvMinBlocks,
                                 C::kQBM, C::kQBN, C::kQMT, C::kQMinBlocks,
                                 false>(q, k, v, lse, dout, delta, dq, dk, dv,
                                        p, stream);
}

// Warp-per-row kernels: 4 rows a 128-thread block.
inline int64_t attn_row_blocks(int64_t rows) { return (rows + 3) / 4; }

} // namespace detail

// Floats of workspace launch_attention_backward needs: B * H * T_, one
// float per query row (delta = rowsum(dout * out)), in both modes (the
// backward uses no atomics, so it is deterministic either way).
__host__ __device__ constexpr int64_t
attention_backward_workspace_floats(int64_t B, int64_t H, int64_t Hkv,
                                    int64_t T_, int64_t S, int64_t D,
                                    bool deterministic) {
  return (void)Hkv, (void)S, (void)D, (void)deterministic, B * H * T_;
}

template <typename T>
cudaError_t launch_attention_forward_strided(
    const T *q, const T *k, const T *v, T *out, float *lse, int64_t B,
    int64_t H, int64_t Hkv, int64_t T_, int64_t S, int64_t D,
    const AttnLayout &layout, float scale, bool causal, float dropout_rate,
    uint64_t seed_key, uint64_t step, cudaStream_t stream) {
  static_assert(std::is_same<T, bf16>::value || std::is_same<T, f16>::value ||
                    std::is_same<T, float>::value,
                "attention: bf16, f16 or float");
  using namespace detail;
  if (!attn_shapes_ok(B, H, Hkv, T_, S, D, dropout_rate) ||
      !attn_layout_ok(layout, std::is_same<T, float>::value ? 1 : 8))
    return cudaErrorInvalidValue;
  const AttnParams p = attn_params(B, H, Hkv, T_, S, layout, scale, causal,
                                   dropout_rate, seed_key, step);
  if constexpr (std::is_same<T, float>::value) {
    const int64_t blocks = attn_row_blocks(B * H * T_);
    if (blocks <= 0)
      return cudaSuccess;
    if (!attn_grid_ok(blocks))
      return cudaErrorInvalidValue;
    if (D == 64)
      attn_fwd_f32_kernel<64><<<static_cast<unsigned>(blocks), 128, 0, stream>>>(
          q, k, v, out, lse, p);
    else
      attn_fwd_f32_kernel<128><<<static_cast<unsigned>(blocks), 128, 0, stream>>>(
          q, k, v, out, lse, p);
    return cudaSuccess;
  } else {
    if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(out))
      return cudaErrorInvalidValue;
    return D == 64 ? attn_forward_tuned<T, 64>(q, k, v, out, lse, p, stream)
                   : attn_forward_tuned<T, 128>(q, k, v, out, lse, p, stream);
  }
}

template <typename T>
cudaError_t launch_attention_forward(const T *q, const T *k, const T *v, T *out,
                                     float *lse, int64_t B, int64_t H,
                                     int64_t Hkv, int64_t T_, int64_t S,
                                     int64_t D, float scale, bool causal,
                                     float dropout_rate, uint64_t seed_key,
                                     uint64_t step, cudaStream_t stream) {
  return launch_attention_forward_strided(
      q, k, v, out, lse, B, H, Hkv, T_, S, D,
      attn_contiguous_layout(H, Hkv, T_, S, D), scale, causal, dropout_rate,
      seed_key, step, stream);
}

template <typename T>
cudaError_t launch_attention_backward_strided(
    const T *q, const T *k, const T *v, const T *out, const float *lse,
    const T *dout, T *dq, T *dk, T *dv, float *workspace, int64_t B, int64_t H,
    int64_t Hkv, int64_t T_, int64_t S, int64_t D, const AttnLayout &layout,
    float scale, bool causal, float dropout_rate, uint64_t seed_key,
    uint64_t step, bool deterministic, cudaStream_t stream) {
  static_assert(std::is_same<T, bf16>::value || std::is_same<T, f16>::value ||
                    std::is_same<T, float>::value,
                "attention: bf16, f16 or float");
  using namespace detail;
  if (!attn_shapes_ok(B, H, Hkv, T_, S, D, dropout_rate) ||
      !attn_layout_ok(layout, std::is_same<T, float>::value ? 1 : 8))
    return cudaErrorInvalidValue;
  const AttnParams p = attn_params(B, H, Hkv, T_, S, layout, scale, causal,
                                   dropout_rate, seed_key, step);
  const int64_t q_rows = B * H * T_, kv_rows = B * Hkv * S;
  float *delta = workspace;
  (void)deterministic; // every mode is deterministic (no atomics)
  if (!attn_grid_ok(attn_row_blocks(q_rows)) ||
      !attn_grid_ok(attn_row_blocks(kv_rows)))
    return cudaErrorInvalidValue;
  if constexpr (!std::is_same<T, float>::value) {
    if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(out) ||
        !aligned16(dout) || !aligned16(dq) || !aligned16(dk) || !aligned16(dv))
      return cudaErrorInvalidValue;
  }
  const unsigned q_blocks = static_cast<unsigned>(attn_row_blocks(q_rows));
  const unsigned kv_blocks = static_cast<unsigned>(attn_row_blocks(kv_rows));
  if (q_blocks > 0) {
    if (D == 64)
      attn_bwd_delta_kernel<T, 64><<<q_blocks, 128, 0, stream>>>(out, dout,
                                                                delta, p);
    else
      attn_bwd_delta_kernel<T, 128><<<q_blocks, 128, 0, stream>>>(out, dout,
                                                                 delta, p);
  }
  if constexpr (std::is_same<T, float>::value) {
    if (D == 64) {
      if (kv_blocks > 0)
        attn_bwd_dkdv_f32_kernel<64><<<kv_blocks, 128, 0, stream>>>(
            q, k, v, dout, lse, delta, dk, dv, p);
      if (q_blocks > 0)
        attn_bwd_dq_f32_kernel<64><<<q_blocks, 128, 0, stream>>>(
            q, k, v, dout, lse, delta, dq, p);
    } else {
      if (kv_blocks > 0)
        attn_bwd_dkdv_f32_kernel<128><<<kv_blocks, 128, 0, stream>>>(
            q, k, v, dout, lse, delta, dk, dv, p);
      if (q_blocks > 0)
        attn_bwd_dq_f32_kernel<128><<<q_blocks, 128, 0, stream>>>(
            q, k, v, dout, lse, delta, dq, p);
    }
    return cudaSuccess;
  } else {
    return D == 64 ? attn_backward_tuned<T, 64>(q, k, v, lse, dout, delta, dq,
                                                 dk, dv, p, stream)
                   : attn_backward_tuned<T, 128>(q, k, v, lse, dout, delta, dq,
                                                 dk, dv, p, stream);
  }
}

template <typename T>
cudaError_t launch_attention_backward(
    const T *q, const T *k, const T *v, const T *out, const float *lse,
    const T *dout, T *dq, T *dk, T *dv, float *workspace, int64_t B, int64_t H,
    int64_t Hkv, int64_t T_, int64_t S, int64_t D, float scale, bool causal,
    float dropout_rate, uint64_t seed_key, uint64_t step, bool deterministic,
    cudaStream_t stream) {
  return launch_attention_backward_strided(
      q, k, v, out, lse, dout, dq, dk, dv, workspace, B, H, Hkv, T_, S, D,
      attn_contiguous_layout(H, Hkv, T_, S, D), scale, causal, dropout_rate,
      seed_key, step, deterministic, stream);
}
