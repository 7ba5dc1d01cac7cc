// tcc's Hopper attention forward (attention_sm90.h). nvcc for sm_90a only.
//
// One CTA: 128 query rows of one (b, h). Warp 8 is the producer: its first
// lane loads Q and then each 128-key tile of K and V with TMA into a ring of
// 128-byte swizzled shared tiles (wgmma.cuh), one mbarrier pair a stage
// (full: the bytes landed; empty: every consumer warp is done with it).
// Warps 0-7 are two consumer warpgroups of 64 query rows; per key tile t a
// warpgroup computes
//   S_t (64 x 128, f32)  = Q_wg (64 x D, smem) K_t^T       (wgmma ss, D/16 k-steps)
//   O   (64 x D, f32)   += P_{t-1} (registers) V_{t-1}     (wgmma rs, 8 k-steps)
//   online softmax of S_t in registers (log2 units: one ex2 a score) -> P_t
// so P never goes through shared memory, and the softmax of S_t runs under
// the product with V_{t-1} (FlashAttention-3's intra-warpgroup pipelining).
// The two warpgroups take turns issuing their products (named barriers 1
// and 2), so one's softmax runs under the other's products (FA3's
// ping-pong). Causal CTAs start with the last query tiles (the longest)
// and stop at the diagonal; only tiles crossing it or the ragged end of S
// are masked. Rows past T or S come in as zeros (TMA's out-of-bounds fill).
#include "compiler/codegen/cuda/sm90/attention_sm90.h"
#include "compiler/codegen/cuda/sm90/wgmma.cuh"

#include <cuda.h> // CUtensorMap and its enums (the encoder comes through the runtime)
#include <cudaTypedefs.h>

#include <cmath>
#include <mutex>

namespace tcc_sm90 {
namespace {

constexpr int kRows = 128;      // query rows per CTA
constexpr int kKeys = 128;      // keys per tile
constexpr int kConsumers = 256; // two warpgroups
constexpr int kThreads = kConsumers + 128; // and the producer's warpgroup
// Registers a thread (setmaxnreg): 384 threads start at 168; the producer
// gives most of its share to the consumers (128 x 24 + 256 x 240 <= 64K).
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct Params {
  void *out;
  float *lse;
  int32_t B, H, Hkv, T, S;
  int64_t os_b, os_h, os_r;
  float sl2; // scale * log2(e)
  bool causal;
  // Each map's coordinates are (column, a, b', batch) with (a, b') = (row,
  // head) or (head, row): whichever of the two has the smaller stride is
  // the map's second dimension.
  bool q_heads_inner, k_heads_inner, v_heads_inner;
};

// The K / V ring: 4 stages at D = 64 (144 KiB with Q), 3 at D = 128
// (224 KiB of the 227 a CTA may have).
template <int D> struct Smem {
  static constexpr int kStages = D == 64 ? 4 : 3;
  static constexpr uint32_t kQ = kRows * D * 2;
  static constexpr uint32_t kKV = kKeys * D * 2; // one K or V tile
  static constexpr uint32_t kBytes = kQ + 2 * kStages * kKV + 1024; // + alignment slack
};

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred p;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra WAIT;\n}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}
// A 4-d box of `map` at (c0, c1, c2, c3) into shared `dst`; completes on `bar`.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                         int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void named_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kConsumers) : "memory");
}
__device__ __forceinline__ void named_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kConsumers) : "memory");
}
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// -DTCC_SM90_TRACE: the first CTA's warpgroup leaders add up clock64()
// cycles per loop phase (attention_sm90_trace reads them; the bench prints
// them). Off in every build but that bench's.
#ifdef TCC_SM90_TRACE
constexpr int kTracePhases = 7;
__device__ unsigned long long g_trace[2][kTracePhases + 1];
#define TRACE_MARK(i)                                                                            \
  do {                                                                                           \
    if (tracing) {                                                                               \
      const long long now = clock64();                                                           \
      trace[i] += now - last;                                                                    \
      last = now;                                                                                \
    }                                                                                            \
  } while (0)
#else
#define TRACE_MARK(i) ((void)0)
#endif

template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    attention_forward_sm90_kernel(const __grid_constant__ CUtensorMap tq,
                                  const __grid_constant__ CUtensorMap tk,
                                  const __grid_constant__ CUtensorMap tv, const Params p) {
  constexpr int kStages = Smem<D>::kStages;
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * kStages + 1]; // full[], empty[], Q
  const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = sQ + Smem<D>::kQ, sV = sK + kStages * Smem<D>::kKV;
  const uint32_t full0 = smem_u32(&bars[0]), empty0 = smem_u32(&bars[kStages]),
                 qbar = smem_u32(&bars[2 * kStages]);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int BH = p.B * p.H, tiles_q = (p.T + kRows - 1) / kRows;
  const int qt = tiles_q - 1 - static_cast<int>(blockIdx.x / BH); // longest first
  const int bh = static_cast<int>(blockIdx.x % BH), b = bh / p.H, h = bh % p.H;
  const int hk = h / (p.H / p.Hkv);
  const int q0 = qt * kRows, shift = p.S - p.T; // key j is visible to row i iff j <= i + shift
  int kend = p.S;
  if (p.causal) {
    const int64_t last = int64_t{q0} + kRows + shift;
    kend = last < 0 ? 0 : (last < p.S ? static_cast<int>(last) : p.S);
  }
  const int tiles = (kend + kKeys - 1) / kKeys;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, kConsumers / 32);
    }
    mbar_init(qbar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp >= kConsumers / 32) { // the producer's warpgroup: one lane works
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (warp == kConsumers / 32 && lane == 0) {
      auto coords = [](bool heads_inner, int col, int row, int head, int batch,
                       const CUtensorMap *map, uint32_t dst, uint32_t bar) {
        if (heads_inner)
          tma_load(dst, map, bar, col, head, row, batch);
        else
          tma_load(dst, map, bar, col, row, head, batch);
      };
      mbar_expect_tx(qbar, Smem<D>::kQ);
#pragma unroll
      for (int a = 0; a < D / 64; ++a)
        coords(p.q_heads_inner, 64 * a, q0, h, b, &tq, sQ + a * kRows * 128, qbar);
      for (int t = 0; t < tiles; ++t) {
        const int st = t % kStages;
        if (t >= kStages)
          mbar_wait(empty0 + 8 * st, ((t / kStages) - 1) & 1);
        const uint32_t full = full0 + 8 * st;
        mbar_expect_tx(full, 2 * Smem<D>::kKV);
#pragma unroll
        for (int a = 0; a < D / 64; ++a) {
          coords(p.k_heads_inner, 64 * a, t * kKeys, hk, b, &tk,
                 sK + st * Smem<D>::kKV + a * kKeys * 128, full);
          coords(p.v_heads_inner, 64 * a, t * kKeys, hk, b, &tv,
                 sV + st * Smem<D>::kKV + a * kKeys * 128, full);
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
#ifdef TCC_SM90_TRACE
  const bool tracing = blockIdx.x == 0 && tid % 128 == 0;
  long long trace[kTracePhases] = {}, last = clock64();
  const long long first = last;
#endif
  const int wg = tid / 128, wwarp = warp % 4;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i)
    o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int row = q0 + wg * 64 + wwarp * 16 + lane / 4; // and row + 8
  const int wg_first = q0 + wg * 64;
  const uint32_t qbase = sQ + wg * 64 * 128;
  uint32_t pa[kKeys / 16][4]; // P of the previous tile, the A operand of its P V

  // O += P V of tile t: k-step j is keys [16j, 16j + 16), rows 16j.. of the
  // V tile (2048 bytes each); D = 128 spans two column blocks kKeys * 128
  // apart.
  auto issue_pv = [&](int t) {
    const uint32_t vt = sV + (t % kStages) * Smem<D>::kKV;
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
      Wgmma<T>::rs(o, pa[j], wgmma_desc(vt + j * 16 * 128, kKeys * 128, 1024));
  };

  mbar_wait(qbar, 0);
  if (wg == 1 && tiles > 0)
    named_arrive(1); // warpgroup 0 issues first
  for (int t = 0; t < tiles; ++t) {
    const int st = t % kStages;
    mbar_wait(full0 + 8 * st, (t / kStages) & 1);
    TRACE_MARK(0);
    named_sync(1 + wg); // this warpgroup's turn at the tensor cores
    TRACE_MARK(1);
    // S = Q K^T: k-step kk reads columns [16kk, 16kk + 16), 32 bytes into
    // column block kk / 4.
    const uint32_t kt = sK + st * Smem<D>::kKV;
    float s[64];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t a = qbase + (kk / 4) * kRows * 128 + (kk % 4) * 32;
      const uint32_t bk = kt + (kk / 4) * kKeys * 128 + (kk % 4) * 32;
      Wgmma<T>::ss128(s, wgmma_desc(a, 16, 1024), wgmma_desc(bk, 16, 1024), kk > 0);
    }
    wgmma_commit();
    if (t > 0) {
      wgmma_fence(); // (ptxas adds it anyway after the branch)
      issue_pv(t - 1);
      wgmma_commit();
      named_arrive(1 + (1 - wg)); // the other warpgroup's turn
      TRACE_MARK(2);
      wgmma_wait<1>();
    } else {
      named_arrive(1 + (1 - wg));
      TRACE_MARK(2);
      wgmma_wait<0>();
    }
    wgmma_fence_operands(s);
    TRACE_MARK(3);

    const int kv0 = t * kKeys;
    if (kv0 + kKeys > p.S || (p.causal && kv0 + kKeys - 1 > wg_first + shift)) {
#pragma unroll
      for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = kv0 + 8 * i + 2 * (lane % 4) + (e & 1);
          const int r = row + 8 * (e >> 1);
          if (col >= p.S || (p.causal && col > r + shift))
            s[4 * i + e] = -INFINITY;
        }
    }
    // Online softmax, rows row (e < 2) and row + 8; the 4 lanes of a quad
    // share a row.
    float corr[2];
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
      corr[hh] = fast_exp2(m[hh] - m_use);
      m[hh] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pv = fast_exp2(fmaf(s[4 * i + 2 * hh + e], p.sl2, -m_use));
          s[4 * i + 2 * hh + e] = pv;
          sum += pv;
        }
      l[hh] = l[hh] * corr[hh] + sum;
    }
    TRACE_MARK(4);
    wgmma_wait<0>(); // P V of the previous tile: pa, o and its stage are free
    wgmma_fence_operands(o);
    TRACE_MARK(5);
    if (t > 0) {
      __syncwarp();
      if (lane == 0)
        mbar_arrive(empty0 + 8 * ((t - 1) % kStages));
    }
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[4 * i + 0] *= corr[0];
      o[4 * i + 1] *= corr[0];
      o[4 * i + 2] *= corr[1];
      o[4 * i + 3] *= corr[1];
    }
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
      wgmma_pack<T>(s, j, pa[j]);
    TRACE_MARK(6);
  }
  if (tiles > 0) { // the last turn: P V of the last tile
    named_sync(1 + wg);
    wgmma_fence();
    issue_pv(tiles - 1);
    wgmma_commit();
    if (wg == 0)
      named_arrive(2); // warpgroup 1's last turn; it has no one left to wake
    wgmma_wait<0>();
    wgmma_fence_operands(o);
  }

  T *out = static_cast<T *>(p.out) + b * p.os_b + h * p.os_h;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float sum = l[hh];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = row + 8 * hh;
    if (r >= p.T)
      continue;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const uint32_t v2 = pack2<T>(o[4 * i + 2 * hh] * inv, o[4 * i + 2 * hh + 1] * inv);
      *reinterpret_cast<uint32_t *>(out + r * p.os_r + 8 * i + 2 * (lane % 4)) = v2;
    }
    if (lane % 4 == 0)
      p.lse[int64_t{bh} * p.T + r] = sum > 0.f ? (m[hh] + __log2f(sum)) * kLn2 : -INFINITY;
  }
#ifdef TCC_SM90_TRACE
  if (tracing) {
    for (int i = 0; i < kTracePhases; ++i)
      g_trace[wg][i] = trace[i];
    g_trace[wg][kTracePhases] = clock64() - first;
  }
#endif
}

// cuTensorMapEncodeTiled from the driver, through the runtime (no -lcuda).
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
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

// The map of one q / k / v tensor: boxes of 64 columns x 128 rows of one
// head, 128-byte swizzle. Dimensions (D, rows, heads, batch) or (D, heads,
// rows, batch), the smaller stride second; *heads_inner says which.
bool encode(CUtensorMap *map, const void *base, bool f16, int64_t D, int64_t rows,
            int64_t heads, int64_t batch, const AttnSm90Strides &s, bool *heads_inner) {
  const auto fn = encoder();
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
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(*heads_inner ? 1 : kRows),
                             static_cast<cuuint32_t>(*heads_inner ? kRows : 1), 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  return fn(map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
            const_cast<void *>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class T, int D> int launch(const AttnSm90Forward &a, const char **why) {
  Params p{};
  p.out = a.out;
  p.lse = a.lse;
  p.B = static_cast<int32_t>(a.B), p.H = static_cast<int32_t>(a.H);
  p.Hkv = static_cast<int32_t>(a.Hkv);
  p.T = static_cast<int32_t>(a.T), p.S = static_cast<int32_t>(a.S);
  p.os_b = a.os.b, p.os_h = a.os.h, p.os_r = a.os.r;
  p.sl2 = a.scale * kLog2e;
  p.causal = a.causal;
  const int64_t blocks = ((a.T + kRows - 1) / kRows) * a.B * a.H;
  if (blocks == 0)
    return 0;
  alignas(64) CUtensorMap tq, tk, tv;
  if (!encode(&tq, a.q, a.f16, D, a.T, a.H, a.B, a.qs, &p.q_heads_inner)) {
    *why = "TMA cannot describe q's layout (or the driver has no cuTensorMapEncodeTiled)";
    return 1;
  }
  if (a.S == 0) { // no key tile is loaded; any valid map will do
    tk = tq, tv = tq;
  } else if (!encode(&tk, a.k, a.f16, D, a.S, a.Hkv, a.B, a.ks, &p.k_heads_inner) ||
             !encode(&tv, a.v, a.f16, D, a.S, a.Hkv, a.B, a.vs, &p.v_heads_inner)) {
    *why = "TMA cannot describe k's or v's layout";
    return 1;
  }
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
  kernel<<<static_cast<unsigned>(blocks), kThreads, Smem<D>::kBytes, a.stream>>>(tq, tk, tv, p);
  return 0;
}

bool stridesOk(const AttnSm90Strides &s) {
  return s.b >= 0 && s.h >= 0 && s.r >= 0 && s.b % 8 == 0 && s.h % 8 == 0 && s.r % 8 == 0;
}

} // namespace

#ifdef TCC_SM90_TRACE
int attention_sm90_trace(unsigned long long (*out)[8]) {
  return cudaMemcpyFromSymbol(out, g_trace, sizeof g_trace) == cudaSuccess ? 0 : 1;
}
#endif

const char *attention_forward_sm90_unsupported(const AttnSm90Forward &a) {
  if (a.D != 64 && a.D != 128)
    return "head size is not 64 or 128";
  if (a.B < 0 || a.H < 0 || a.T < 0 || a.S < 0 || a.Hkv <= 0 || a.H % a.Hkv != 0)
    return "B, H, T, S must be >= 0 and H a multiple of Hkv > 0";
  if (a.T > INT32_MAX - 2 * kRows || a.S > INT32_MAX - 2 * kKeys || a.B * a.H > INT32_MAX ||
      ((a.T + kRows - 1) / kRows) * a.B * a.H >= (int64_t{1} << 31))
    return "T, S or the number of query tiles does not fit 32 bits";
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
