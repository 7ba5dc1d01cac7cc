// tcc's Hopper attention forward (attention_sm90.h). nvcc for sm_90a only.
//
// One CTA: 128 query rows of one (b, h), two consumer warpgroups of 64 rows
// each; all 256 threads stream 128-key tiles of K and V through a 2-stage
// cp.async ring of 128-byte swizzled shared tiles (wgmma.cuh). Per tile a
// warpgroup computes
//   S (64 x 128, f32)  = Q_wg (64 x D, smem) K_tile^T      (wgmma ss, D/16 k-steps)
//   online softmax of S in registers (log2 units: one ex2 per score)
//   O (64 x D, f32)   += P (64 x 128, registers) V_tile    (wgmma rs, 8 k-steps)
// so P never goes through shared memory. Causal CTAs start with the last
// query tiles (the longest) and stop at the diagonal; only tiles crossing
// it or the ragged end of S are masked.
#include "compiler/codegen/cuda/sm90/attention_sm90.h"
#include "compiler/codegen/cuda/sm90/wgmma.cuh"

#include <cmath>

namespace tcc_sm90 {
namespace {

constexpr int kRows = 128;   // query rows per CTA
constexpr int kKeys = 128;   // keys per tile
constexpr int kThreads = 256;
constexpr int kStages = 2;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct Params {
  const void *q, *k, *v;
  void *out;
  float *lse;
  int64_t B, H, Hkv, T, S;
  AttnSm90Strides qs, ks, vs, os;
  float sl2; // scale * log2(e)
  bool causal;
};

template <int D> struct Smem {
  static constexpr uint32_t kQ = kRows * D * 2;
  static constexpr uint32_t kKV = kKeys * D * 2; // one K or V tile
  static constexpr uint32_t kBytes = kQ + 2 * kStages * kKV + 1024; // + alignment slack
};

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Rows [row0, row0 + 128) of a (.., D) tensor into a swizzled 128 x D tile;
// rows at or past `rows` are zero-filled.
template <class T, int D>
__device__ __forceinline__ void load_tile(uint32_t dst, const T *src, int64_t stride,
                                          int64_t row0, int64_t rows, int tid) {
  constexpr int kChunks = D / 8; // 16-byte chunks a row
#pragma unroll
  for (int i = 0; i < kRows * kChunks / kThreads; ++i) {
    const int idx = tid + i * kThreads, r = idx / kChunks, c = idx % kChunks;
    const bool valid = row0 + r < rows;
    const T *g = valid ? src + (row0 + r) * stride + c * 8 : src;
    cp_async16(dst + sw128_offset(kRows, r, c), g, valid);
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1) attention_forward_sm90_kernel(const Params p) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = sQ + Smem<D>::kQ, sV = sK + kStages * Smem<D>::kKV;

  const int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
  const int64_t BH = p.B * p.H, tiles_q = (p.T + kRows - 1) / kRows;
  const int64_t qt = tiles_q - 1 - static_cast<int64_t>(blockIdx.x) / BH; // longest first
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % BH, b = bh / p.H, h = bh % p.H;
  const int64_t hk = h / (p.H / p.Hkv);
  const T *q = static_cast<const T *>(p.q) + b * p.qs.b + h * p.qs.h;
  const T *k = static_cast<const T *>(p.k) + b * p.ks.b + hk * p.ks.h;
  const T *v = static_cast<const T *>(p.v) + b * p.vs.b + hk * p.vs.h;
  const int64_t q0 = qt * kRows, shift = p.S - p.T; // key j is visible to row i iff j <= i + shift
  int64_t kend = p.S;
  if (p.causal) {
    const int64_t last = q0 + kRows - 1 + shift + 1;
    kend = last < 0 ? 0 : (last < p.S ? last : p.S);
  }
  const int tiles = static_cast<int>((kend + kKeys - 1) / kKeys);

  load_tile<T, D>(sQ, q, p.qs.r, q0, p.T, tid);
  if (tiles > 0) {
    load_tile<T, D>(sK, k, p.ks.r, 0, p.S, tid);
    load_tile<T, D>(sV, v, p.vs.r, 0, p.S, tid);
  }
  cp_async_commit();

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i)
    o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int64_t row = q0 + wg * 64 + warp * 16 + lane / 4; // and row + 8
  const int64_t wg_first = q0 + wg * 64;
  const uint32_t qbase = sQ + wg * 64 * 128;

  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) {
      const uint32_t st = ((t + 1) % kStages) * Smem<D>::kKV;
      load_tile<T, D>(sK + st, k, p.ks.r, static_cast<int64_t>(t + 1) * kKeys, p.S, tid);
      load_tile<T, D>(sV + st, v, p.vs.r, static_cast<int64_t>(t + 1) * kKeys, p.S, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    fence_proxy_async_shared();
    __syncthreads();
    const uint32_t kt = sK + (t % kStages) * Smem<D>::kKV;
    const uint32_t vt = sV + (t % kStages) * Smem<D>::kKV;

    // S = Q K^T: k-step kk reads columns [16kk, 16kk + 16), 32 bytes into
    // column block kk / 4.
    float s[64];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t a = qbase + (kk / 4) * kRows * 128 + (kk % 4) * 32;
      const uint32_t bk = kt + (kk / 4) * kKeys * 128 + (kk % 4) * 32;
      Wgmma<T>::ss128(s, wgmma_desc(a, 16, 1024), wgmma_desc(bk, 16, 1024), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(s);

    const int64_t kv0 = static_cast<int64_t>(t) * kKeys;
    if (kv0 + kKeys > p.S || (p.causal && kv0 + kKeys - 1 > wg_first + shift)) {
#pragma unroll
      for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t col = kv0 + 8 * i + 2 * (lane % 4) + (e & 1);
          const int64_t r = row + 8 * (e >> 1);
          if (col >= p.S || (p.causal && col > r + shift))
            s[4 * i + e] = -INFINITY;
        }
    }
    // Online softmax, rows row (e < 2) and row + 8; the 4 lanes of a quad
    // share a row.
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < 16; ++i)
        mx = fmaxf(mx, fmaxf(s[4 * i + 2 * hh], s[4 * i + 2 * hh + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[hh], mx * p.sl2);
      const float m_use = m_new == -INFINITY ? 0.f : m_new; // no -inf - -inf
      const float corr = exp2f(m[hh] - m_use);
      m[hh] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pv = exp2f(fmaf(s[4 * i + 2 * hh + e], p.sl2, -m_use));
          s[4 * i + 2 * hh + e] = pv;
          sum += pv;
        }
      l[hh] = l[hh] * corr + sum;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        o[4 * i + 2 * hh] *= corr;
        o[4 * i + 2 * hh + 1] *= corr;
      }
    }

    // O += P V: k-step j is keys [16j, 16j + 16), rows 16j.. of the V tile
    // (2048 bytes each); D = 128 spans two column blocks kKeys * 128 apart.
    // P is packed before the batch: registers written between two products
    // of one batch make ptxas wait for the first.
    uint32_t pa[kKeys / 16][4];
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
      wgmma_pack<T>(s, j, pa[j]);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
      Wgmma<T>::rs(o, pa[j], wgmma_desc(vt + j * 16 * 128, kKeys * 128, 1024));
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(o);
    __syncthreads(); // this stage is reloaded next iteration
  }
  cp_async_wait<0>();

  T *out = static_cast<T *>(p.out) + b * p.os.b + h * p.os.h;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float sum = l[hh];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int64_t r = row + 8 * hh;
    if (r >= p.T)
      continue;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const uint32_t v2 = pack2<T>(o[4 * i + 2 * hh] * inv, o[4 * i + 2 * hh + 1] * inv);
      *reinterpret_cast<uint32_t *>(out + r * p.os.r + 8 * i + 2 * (lane % 4)) = v2;
    }
    if (lane % 4 == 0)
      p.lse[bh * p.T + r] = sum > 0.f ? (m[hh] + log2f(sum)) * kLn2 : -INFINITY;
  }
}

template <class T, int D> int launch(const AttnSm90Forward &a, const char **why) {
  const Params p{a.q,     a.k,    a.v,    a.out,  a.lse,  a.B,
                 a.H,     a.Hkv,  a.T,    a.S,    a.qs,   a.ks,
                 a.vs,    a.os,   a.scale * kLog2e, a.causal};
  const int64_t blocks = ((a.T + kRows - 1) / kRows) * a.B * a.H;
  if (blocks >= (int64_t{1} << 31)) {
    *why = "more than 2^31 - 1 query tiles";
    return 1;
  }
  if (blocks == 0)
    return 0;
  const auto kernel = attention_forward_sm90_kernel<T, D>;
  static bool configured = false; // one smem attribute per instance and process
  if (!configured) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             Smem<D>::kBytes) != cudaSuccess) {
      *why = "cannot reserve the kernel's shared memory (not an sm_90 GPU?)";
      return 1;
    }
    configured = true;
  }
  kernel<<<static_cast<unsigned>(blocks), kThreads, Smem<D>::kBytes, a.stream>>>(p);
  return 0;
}

bool stridesOk(const AttnSm90Strides &s) {
  return s.b >= 0 && s.h >= 0 && s.r >= 0 && s.b % 8 == 0 && s.h % 8 == 0 && s.r % 8 == 0;
}

} // namespace

const char *attention_forward_sm90_unsupported(const AttnSm90Forward &a) {
  if (a.D != 64 && a.D != 128)
    return "head size is not 64 or 128";
  if (a.B < 0 || a.H < 0 || a.T < 0 || a.S < 0 || a.Hkv <= 0 || a.H % a.Hkv != 0)
    return "B, H, T, S must be >= 0 and H a multiple of Hkv > 0";
  if (!(a.scale > 0.f) || !std::isfinite(a.scale))
    return "scale is not positive and finite";
  for (const void *ptr : {a.q, a.k, a.v, static_cast<const void *>(a.out),
                          static_cast<const void *>(a.lse)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      return "a tensor is not 16-byte aligned";
  if (!stridesOk(a.qs) || !stridesOk(a.ks) || !stridesOk(a.vs) || !stridesOk(a.os))
    return "a stride is negative or not a multiple of 8 elements";
  return nullptr;
}

int attention_forward_sm90(const AttnSm90Forward &a, const char **why) {
  if (const char *no = attention_forward_sm90_unsupported(a)) {
    *why = no;
    return 1;
  }
  if (a.f16)
    return a.D == 64 ? launch<__half, 64>(a, why) : launch<__half, 128>(a, why);
  return a.D == 64 ? launch<__nv_bfloat16, 64>(a, why) : launch<__nv_bfloat16, 128>(a, why);
}

} // namespace tcc_sm90
