// tcc's Hopper attention backward (attention_sm90.h). nvcc for sm_90a only.
//
// Three launches on the caller's stream, with a workspace of
//   lse2  (B*H, Tp) f32   the forward's lse in log2 units (+inf past T)
//   delta (B*H, Tp) f32   rowsum(dout * out), FlashAttention-2's D
//   dq_acc (B*H, Tp/64, 64 x D) f32   dq / scale, summed over key tiles
// (Tp = T rounded up to the query tile M: 128 rows at D = 64, 64 at 128):
//   1. backward_prepare: lse2 and delta of each query row; dq_acc zeroed
//      (one launch fewer than a cudaMemsetAsync before it).
//   2. backward_main: a CTA per (128-key tile, kv head, batch), one SM's
//      worth of shared memory. The producer warpgroup's first lane loads
//      the tile's K and V once, then for every query head of the kv head
//      and every M-row query tile the causal mask leaves (a ring of two
//      stages) Q and dO with TMA and lse2 and delta with bulk copies. Two
//      consumer warpgroups own 64 keys each; for query tile i a warpgroup
//      computes, everything transposed so that keys are the rows
//        S^T  (64 x M)  = K_wg Q_i^T                  (wgmma ss, D/16 k-steps)
//        dP^T (64 x M)  = V_wg dO_i^T                 (wgmma ss)
//        P^T  = exp2(S^T * scale * log2 e - lse2)     (registers; masked)
//        dV  (64 x D)   += P^T dO_i                   (wgmma rs: P^T in registers)
//        dS^T = P^T * (dP^T - delta)
//        dK  (64 x D)   += dS^T Q_i                   (wgmma rs)
//      then, once both warpgroups' dS^T are in shared memory, its part of
//        dQ_i[rows wg] (64 x D)     = dS[rows wg] K   (M = 128; wgmma ss,
//        dQ_i[:, half wg] (64 x D/2) = dS K[:, half]   (M = 64;  128 keys deep)
//      and adds it into dq_acc with one bulk reduction (cp.reduce.async.
//      bulk .add.f32) from shared memory. dK and dV stay in registers
//      across the loop (FlashAttention-3's layout) and are written once,
//      dK scaled, through the K and V tiles in shared memory (16-byte
//      stores of whole rows).
//   3. backward_finish: dq = scale * dq_acc, rows < T, in dq's layout.
// Each include guarded: a step's sm90 attention unit pastes these headers
// in front of this file (CodegenSources.cmake) and has no include path.
#ifndef TCC_CUDA_SM90_ASYNC_COPY_CUH
#include "compiler/codegen/cuda/sm90/async_copy.cuh"
#endif
#ifndef TCC_CUDA_SM90_ATTENTION_SM90_H
#include "compiler/codegen/cuda/sm90/attention_sm90.h"
#endif
#ifndef TCC_CUDA_SM90_TENSOR_MAPS_H
#include "compiler/codegen/cuda/sm90/tensor_maps.h"
#endif
#ifndef TCC_CUDA_SM90_WGMMA_CUH
#include "compiler/codegen/cuda/sm90/wgmma.cuh"
#endif

#include <cmath>

namespace tcc_sm90 {
namespace {

// Query rows per iteration: 128 at D = 64, where 64 left the tensor pipe
// idle two thirds of the time (products too small to hide the softmax and
// the barriers between them); 64 at D = 128 (registers: S^T and dP^T of 128
// queries would not fit beside dK and dV).
template <int D> constexpr int kQRows = D == 64 ? 128 : 64;
// dq_acc is kept in chunks of 64 query rows x D f32 whatever the tile.
constexpr int kChunkRows = 64;
constexpr int kKeys = 128;      // keys per CTA, 64 per consumer warpgroup
constexpr int kConsumers = 256; // two warpgroups
constexpr int kThreads = kConsumers + 128;
// Two stages: three at D = 128 and four at D = 64 were no faster (H200,
// 2026-12-03), nor was a second dQ staging buffer; slower were (D = 64)
// issuing the next tile's S^T and dP^T before staging this tile's dQ
// (0.364 against 0.335 ms: ptxas serialized the products), and persistent
// CTAs taking items from a counter with the next item's K and V loaded
// early (main kernel 337 against 261 us at D64, 851 against 830 at D128).
constexpr int kStages = 2;
// Registers: 240 a consumer thread (the producer's lane needs 24). At 232
// (the forward's split) ptxas spilled 16 registers at D = 128, 4.5 M local
// accesses a launch (ncu), and the main kernel took 2% longer (H200,
// 2026-12-04: 0.937-0.939 against 0.919-0.922 ms for the whole backward).
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float fast_exp2(float x) { // 0 for -inf
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// T rounded up to whole query tiles (of head size D).
int64_t paddedRows(int64_t T, int64_t D) {
  const int64_t m = D == 64 ? kQRows<64> : kQRows<128>;
  return (T + m - 1) / m * m;
}

// Shared memory, offsets from a 1024-byte aligned base (the swizzled tiles
// need it): K and V of the CTA's keys; Q and dO per stage; dS^T (128 keys x
// M queries, both warpgroups' halves) twice, so that one iteration's is
// written while the other warpgroup may still read the last one's; each
// warpgroup's part of dQ (64 x D f32 at D = 64: its 64 query rows; 64 x D/2
// at D = 128: its half of the columns; in accumulator order, for the bulk
// reduction); lse2 and delta per stage. D = 64: 194 KiB; D = 128: 194 KiB.
template <int D> struct BwdSmem {
  static constexpr int M = kQRows<D>;
  static constexpr uint32_t kKV = kKeys * D * 2;
  static constexpr uint32_t kQ = M * D * 2;
  static constexpr uint32_t kDS = kKeys * M * 2;
  // Columns of dQ a warpgroup computes: all at M = 128 (it takes half the
  // rows), half at M = 64.
  static constexpr int kDqCols = M == 128 ? D : D / 2;
  static constexpr uint32_t kDQ = kChunkRows * kDqCols * 4;
  static constexpr uint32_t oK = 0, oV = kKV, oQ = 2 * kKV, oDO = oQ + kStages * kQ;
  static constexpr uint32_t oDS = oDO + kStages * kQ, oDQ = oDS + 2 * kDS;
  static constexpr uint32_t oStats = oDQ + 2 * kDQ; // [stage][lse2, delta][M]
  static constexpr uint32_t kBytes = oStats + kStages * 2 * M * 4 + 1024;
};

struct BwdParams {
  const float *lse2, *delta;
  float *dq_acc;
  void *dk, *dv;
  int64_t dks_b, dks_h, dks_r, dvs_b, dvs_h, dvs_r;
  int32_t B, H, Hkv, T, S, Tp, tiles_k;
  float sl2, scale;
  bool causal;
  // The maps' coordinate order (tensor_maps.h).
  bool q_heads_inner, do_heads_inner, k_heads_inner, v_heads_inner;
};

// One CTA's work: key tile n of kv head hk of batch b, and its query
// tiles: every query head of the kv head, tiles [m_first, Tp / M) each.
struct BwdItem {
  int b, hk, k0, m_first, per_head, iters;
};
// CTAs go head by head, a head's key tiles together (the CTAs running at
// once share few heads' Q, dO and dq_acc rows, which stay in L2: in key-tile
// order, 132 heads' dq_acc, 132 MiB at D = 128, went to DRAM and back every
// reduction), tile 0 first: the longest when causal.
template <int M> __device__ __forceinline__ BwdItem bwd_item(const BwdParams &p) {
  BwdItem it;
  const int bkv = blockIdx.x / p.tiles_k;
  it.b = bkv / p.Hkv, it.hk = bkv % p.Hkv;
  it.k0 = (blockIdx.x % p.tiles_k) * kKeys;
  it.m_first = 0;
  if (p.causal) { // query i sees key j iff j <= i + S - T
    const int first = it.k0 - (p.S - p.T);
    it.m_first = first > 0 ? first / M : 0;
  }
  const int tiles_q = p.Tp / M;
  it.per_head = it.m_first < tiles_q ? tiles_q - it.m_first : 0;
  it.iters = it.per_head * (p.H / p.Hkv);
  return it;
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    backward_main(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                  const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap tdo,
                  const BwdParams p) {
  using L = BwdSmem<D>;
  constexpr int M = L::M;
  extern __shared__ uint8_t smem_raw[];
  // kv: K and V landed; full / empty per stage.
  __shared__ __align__(8) uint64_t kv_bar, full_bars[kStages], empty_bars[kStages];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base + L::oK, sV = base + L::oV;
  const uint32_t kv_full = smem_u32(&kv_bar);
  auto full = [&](int s) { return smem_u32(&full_bars[s]); };
  auto empty = [&](int s) { return smem_u32(&empty_bars[s]); };
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const BwdItem it = bwd_item<M>(p);
  const int group = p.H / p.Hkv;

  if (tid == 0) {
    mbar_init(kv_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), kConsumers / 32);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp >= kConsumers / 32) { // the producer's warpgroup: one lane works
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (warp == kConsumers / 32 && lane == 0) {
      auto load = [](bool heads_inner, int col, int row, int head, int batch,
                     const CUtensorMap *map, uint32_t dst, uint32_t bar) {
        if (heads_inner)
          tma_load(dst, map, bar, col, head, row, batch);
        else
          tma_load(dst, map, bar, col, row, head, batch);
      };
      mbar_expect_tx(kv_full, 2 * L::kKV);
#pragma unroll
      for (int a = 0; a < D / 64; ++a) {
        load(p.k_heads_inner, 64 * a, it.k0, it.hk, it.b, &tk, sK + a * kKeys * 128, kv_full);
        load(p.v_heads_inner, 64 * a, it.k0, it.hk, it.b, &tv, sV + a * kKeys * 128, kv_full);
      }
      for (int i = 0; i < it.iters; ++i) {
        const int s = i % kStages;
        const int hq = it.hk * group + i / it.per_head;
        const int q0 = (it.m_first + i % it.per_head) * M;
        if (i >= kStages)
          mbar_wait(empty(s), ((i / kStages) - 1) & 1);
        mbar_expect_tx(full(s), 2 * L::kQ + 2 * M * 4);
#pragma unroll
        for (int a = 0; a < D / 64; ++a) {
          load(p.q_heads_inner, 64 * a, q0, hq, it.b, &tq,
               base + L::oQ + s * L::kQ + a * M * 128, full(s));
          load(p.do_heads_inner, 64 * a, q0, hq, it.b, &tdo,
               base + L::oDO + s * L::kQ + a * M * 128, full(s));
        }
        const int64_t row = (int64_t{it.b} * p.H + hq) * p.Tp + q0;
        const uint32_t stats = base + L::oStats + s * 2 * M * 4;
        bulk_load(stats, p.lse2 + row, M * 4, full(s));
        bulk_load(stats + M * 4, p.delta + row, M * 4, full(s));
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int wg = tid / 128, wwarp = warp % 4, t128 = tid % 128, shift = p.S - p.T;
  const uint32_t sDQ = base + L::oDQ + wg * L::kDQ;
  const int key = it.k0 + wg * 64 + wwarp * 16 + lane / 4; // this thread's rows: key, key + 8
  const int wg_last_key = it.k0 + wg * 64 + 63;
  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int j = 0; j < D / 2; ++j)
    dk[j] = dv[j] = 0.f;
  mbar_wait(kv_full, 0);

  for (int i = 0; i < it.iters; ++i) {
    const int s = i % kStages;
    const int hq = it.hk * group + i / it.per_head;
    const int m = it.m_first + i % it.per_head, q0 = m * M;
    const uint32_t sQ = base + L::oQ + s * L::kQ, sDO = base + L::oDO + s * L::kQ;
    const uint32_t stats = base + L::oStats + s * 2 * M * 4;
    mbar_wait(full(s), (i / kStages) & 1);

    // S^T = K_wg Q^T and dP^T = V_wg dO^T (64 x M): k-step kk reads
    // columns [16kk, 16kk + 16), 32 bytes into column block kk / 4.
    float st[M / 2], dpt[M / 2];
    auto issue = [&](float(&acc)[M / 2], uint32_t keys, uint32_t queries) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t col = (kk / 4) * kKeys * 128 + wg * 64 * 128 + (kk % 4) * 32;
        const uint32_t qcol = (kk / 4) * M * 128 + (kk % 4) * 32;
        if constexpr (M == 128)
          Wgmma<T>::ss128(acc, wgmma_desc(keys + col, 16, 1024),
                          wgmma_desc(queries + qcol, 16, 1024), kk > 0);
        else
          Wgmma<T>::ss64(acc, wgmma_desc(keys + col, 16, 1024),
                         wgmma_desc(queries + qcol, 16, 1024), kk > 0);
      }
      wgmma_commit();
    };
    wgmma_fence();
    issue(st, sK, sQ);
    issue(dpt, sV, sDO);
    wgmma_wait<1>(); // S^T (dP^T may still run)
    wgmma_fence_operands(st);

    // P^T: element 4c + 2h + e is key `key + 8h`, query q0 + 8c + 2(lane % 4) + e.
    const bool masked = wg_last_key >= p.S || (p.causal && wg_last_key > q0 + shift);
#pragma unroll
    for (int c = 0; c < M / 8; ++c) {
      const int qc = 8 * c + 2 * (lane % 4);
      float2 l2;
      asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n"
                   : "=f"(l2.x), "=f"(l2.y)
                   : "r"(stats + 4 * qc));
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float pv = fast_exp2(fmaf(st[4 * c + 2 * h + e], p.sl2, -(e ? l2.y : l2.x)));
          if (masked) {
            const int kj = key + 8 * h, qi = q0 + qc + e;
            if (kj >= p.S || (p.causal && kj > qi + shift))
              pv = 0.f;
          }
          st[4 * c + 2 * h + e] = pv;
        }
    }
    wgmma_wait<0>(); // dP^T
    wgmma_fence_operands(dpt);
    // dS^T = P^T * (dP^T - delta), before either product is issued: P^T in
    // f32 and dP^T die here, which keeps D = 128 within 240 registers.
#pragma unroll
    for (int c = 0; c < M / 8; ++c) {
      float2 dl;
      asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n"
                   : "=f"(dl.x), "=f"(dl.y)
                   : "r"(stats + M * 4 + 4 * (8 * c + 2 * (lane % 4))));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        dpt[4 * c + 2 * h] = st[4 * c + 2 * h] * (dpt[4 * c + 2 * h] - dl.x);
        dpt[4 * c + 2 * h + 1] = st[4 * c + 2 * h + 1] * (dpt[4 * c + 2 * h + 1] - dl.y);
      }
    }
    // P^T and dS^T as A operands, k-step j = queries [16j, 16j + 16).
    uint32_t pp[M / 16][4], dsp[M / 16][4];
#pragma unroll
    for (int j = 0; j < M / 16; ++j) {
      wgmma_pack<T>(st, j, pp[j]);
      wgmma_pack<T>(dpt, j, dsp[j]);
    }
    // dV += P^T dO and dK += dS^T Q: B is dO or Q as stored (queries x D,
    // D contiguous: MN-major).
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < M / 16; ++j)
      Wgmma<T>::rs(dv, pp[j], wgmma_desc(sDO + j * 16 * 128, M * 128, 1024));
#pragma unroll
    for (int j = 0; j < M / 16; ++j)
      Wgmma<T>::rs(dk, dsp[j], wgmma_desc(sQ + j * 16 * 128, M * 128, 1024));
    wgmma_commit();

    // dS^T into this warpgroup's rows of buffer i % 2 (rows: the 128 keys;
    // M queries, 64 a swizzled 128-byte row of a column block): dsp[j] =
    // (row, chunk 2j), (row + 8, 2j), (row, 2j + 1), (row + 8, 2j + 1), 4
    // bytes at lane % 4.
    const uint32_t sDS = base + L::oDS + (i % 2) * L::kDS;
    const int r = wg * 64 + wwarp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < M / 16; ++j)
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const uint32_t at = sDS + sw128_offset(kKeys, r + 8 * (x & 1), 2 * j + (x >> 1)) +
                            4 * (lane % 4);
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at), "r"(dsp[j][x]) : "memory");
      }
    fence_proxy_async_shared();
    if (t128 == 0) // the last iteration's reduction is done reading sDQ
      bulk_wait_read<0>();
    named_sync<kConsumers>(3); // both halves of dS^T are in

    // This warpgroup's part of dQ = dS K over all 128 keys: A is dS^T as
    // stored (keys x queries: MN-major), B is K as stored (keys x D:
    // MN-major); k-step j = keys [16j, 16j + 16). M = 128 (D = 64): query
    // rows [64 wg, 64 wg + 64), all D columns (A from column block wg);
    // M = 64 (D = 128): all 64 rows, columns [wg D/2, wg D/2 + D/2) (B from
    // column block wg).
    constexpr int kDqCols = L::kDqCols;
    const uint32_t rows_at = sDS + (M == 128 ? wg * kKeys * 128 : 0);
    const uint32_t kcols = sK + (M == 128 ? 0 : wg * kKeys * 128);
    float dq[kDqCols / 2];
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
      Wgmma<T>::ss_mn(dq, wgmma_desc(rows_at + j * 16 * 128, kKeys * 128, 1024),
                      wgmma_desc(kcols + j * 16 * 128, kKeys * 128, 1024), j > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(dq);
    // Accumulator order: float4 i4 of thread t128 at (i4 * 128 + t128) * 4.
#pragma unroll
    for (int i4 = 0; i4 < kDqCols / 8; ++i4) {
      const uint32_t at = sDQ + 16 * (i4 * 128 + t128);
      asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(at), "f"(dq[4 * i4]),
                   "f"(dq[4 * i4 + 1]), "f"(dq[4 * i4 + 2]), "f"(dq[4 * i4 + 3])
                   : "memory");
    }
    wgmma_fence_operands(dk);
    wgmma_fence_operands(dv);
    __syncwarp();
    if (lane == 0) // every product of this stage's Q and dO is done
      mbar_arrive(empty(s));
    fence_proxy_async_shared();
    named_sync<128>(1 + wg);
    if (t128 == 0) {
      // 64-row chunk (bh, m M / 64 + wg) at M = 128; (bh, m), column half wg, at M = 64.
      const int64_t chunk = (int64_t{it.b} * p.H + hq) * (p.Tp / kChunkRows) +
                            (M == 128 ? 2 * m + wg : m);
      bulk_reduce_add_f32(p.dq_acc + chunk * kChunkRows * D +
                              (M == 128 ? 0 : wg * kChunkRows * (D / 2)),
                          sDQ, L::kDQ);
      bulk_commit();
    }
  }
  if (t128 == 0) // the reductions have landed before the kernel ends
    bulk_wait_done<0>();

  // dK (scaled) and dV through shared memory, so that rows go out 16 bytes
  // a thread: straight from the accumulators a warp stored 16 bytes of each
  // of 8 rows, half of every 32-byte sector (ncu: 50% excess sectors). The
  // K and V tiles take them once both warpgroups' last dQ products, which
  // read K, are done. Accumulator rows key and key + 8, columns
  // 8c + 2(lane % 4): 4 bytes of chunk c, as the dS^T stores above.
  named_sync<kConsumers>(3);
  const int r0 = wg * 64 + wwarp * 16 + lane / 4;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const uint32_t at = sw128_offset(kKeys, r0 + 8 * h, c) + 4 * (lane % 4);
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sK + at),
                   "r"(pack2<T>(dk[4 * c + 2 * h] * p.scale, dk[4 * c + 2 * h + 1] * p.scale))
                   : "memory");
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sV + at),
                   "r"(pack2<T>(dv[4 * c + 2 * h], dv[4 * c + 2 * h + 1]))
                   : "memory");
    }
  named_sync<kConsumers>(3);
  T *const gk = static_cast<T *>(p.dk) + it.b * p.dks_b + it.hk * p.dks_h;
  T *const gv = static_cast<T *>(p.dv) + it.b * p.dvs_b + it.hk * p.dvs_h;
  constexpr int kRowChunks = D / 8; // 16-byte pieces of a row
#pragma unroll 4
  for (int e = tid; e < kKeys * kRowChunks; e += kConsumers) {
    const int r = e / kRowChunks, c = e % kRowChunks, kj = it.k0 + r;
    if (kj >= p.S)
      continue;
    const uint32_t at = sw128_offset(kKeys, r, c);
    uint4 vk, vv;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(vk.x), "=r"(vk.y), "=r"(vk.z), "=r"(vk.w)
                 : "r"(sK + at));
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(vv.x), "=r"(vv.y), "=r"(vv.z), "=r"(vv.w)
                 : "r"(sV + at));
    *reinterpret_cast<uint4 *>(gk + kj * p.dks_r + 8 * c) = vk;
    *reinterpret_cast<uint4 *>(gv + kj * p.dvs_r + 8 * c) = vv;
  }
}

// lse2 and delta for query row (bh, i), i < Tp: D / 8 lanes a row, 16
// bytes of out and dout each (rows are 16-byte aligned: the strides are
// multiples of 8 elements); and dq_acc zeroed.
template <class T, int D>
__global__ void backward_prepare(const T *out, const T *dout, const float *lse, float *lse2,
                                 float *delta, float4 *dq_acc, int64_t rows, int32_t H, int32_t T_,
                                 int32_t Tp, AttnSm90Strides os, AttnSm90Strides dos) {
  constexpr int kLanes = D / 8;
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  // dq_acc: rows * D / 4 float4s, two a thread.
  if (thread < rows * kLanes) {
    dq_acc[2 * thread] = make_float4(0.f, 0.f, 0.f, 0.f);
    dq_acc[2 * thread + 1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const int64_t r = thread / kLanes;
  const int part = static_cast<int>(thread % kLanes);
  const bool live = r < rows;
  const int64_t rr = live ? r : 0;
  const int64_t bh = rr / Tp;
  const int i = static_cast<int>(rr % Tp), b = static_cast<int>(bh / H),
            h = static_cast<int>(bh % H);
  float sum = 0.f;
  if (live && i < T_) {
    const uint4 o = *reinterpret_cast<const uint4 *>(out + b * os.b + h * os.h + i * os.r + 8 * part);
    const uint4 g =
        *reinterpret_cast<const uint4 *>(dout + b * dos.b + h * dos.h + i * dos.r + 8 * part);
    const T *ov = reinterpret_cast<const T *>(&o), *gv = reinterpret_cast<const T *>(&g);
#pragma unroll
    for (int c = 0; c < 8; ++c)
      sum += static_cast<float>(ov[c]) * static_cast<float>(gv[c]);
  }
#pragma unroll
  for (int x = kLanes / 2; x > 0; x /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, x);
  if (live && part == 0) {
    delta[r] = sum;
    // +inf where no key is seen (past T, or a fully masked row): P = 0.
    const float l = i < T_ ? lse[bh * T_ + i] : -INFINITY;
    lse2[r] = l == -INFINITY ? INFINITY : l * kLog2e;
  }
}

// dq = scale * dq_acc for rows < T, a block a 64 x D chunk (bh, m) of
// dq_acc (the main kernel's accumulator order: at D = 128 column half w
// (the warpgroup's), float4 i4 of thread t of the warpgroup; at D = 64 all
// columns, float4 i4 of thread t): read whole float4s
// into a row-major tile in shared memory, then written 16 bytes (8
// elements) of a row a thread. (A thread a float4 written straight to dq,
// two 4-byte pieces of two rows, took 31 us at GPT-2's shape.)
template <class T, int D>
__global__ void __launch_bounds__(256)
    backward_finish(const float4 *dq_acc, T *dq, int32_t H, int32_t T_, int32_t tiles_q,
                    AttnSm90Strides s, float scale) {
  constexpr int kPitch = D + 4; // floats a tile row (+4: rows 8 apart on other banks)
  constexpr int kCols = BwdSmem<D>::kDqCols; // columns a warpgroup summed
  __shared__ __align__(16) float tile[kChunkRows * kPitch];
  const int64_t chunk = blockIdx.x;
  const float4 *src = dq_acc + chunk * (kChunkRows * D / 4);
#pragma unroll
  for (int k = 0; k < kChunkRows * D / 4 / 256; ++k) {
    const int f = k * 256 + threadIdx.x;
    const float4 v = src[f];
    constexpr int kPart = kChunkRows * kCols / 4; // float4s of one warpgroup's part
    const int w = f / kPart, i4 = (f % kPart) / 128, t = f % 128;
    const int row = 16 * (t / 32) + (t % 32) / 4;
    const int col = w * kCols + 8 * i4 + 2 * (t % 4);
    *reinterpret_cast<float2 *>(&tile[row * kPitch + col]) = make_float2(v.x, v.y);
    *reinterpret_cast<float2 *>(&tile[(row + 8) * kPitch + col]) = make_float2(v.z, v.w);
  }
  __syncthreads();
  const int bh = static_cast<int>(chunk / tiles_q), m = static_cast<int>(chunk % tiles_q);
  const int b = bh / H, h = bh % H;
  T *const base = dq + b * s.b + h * s.h;
#pragma unroll
  for (int k = 0; k < kChunkRows * D / 8 / 256; ++k) {
    const int e = k * 256 + threadIdx.x; // 8-element piece
    const int row = e / (D / 8), col = 8 * (e % (D / 8));
    if (m * kChunkRows + row >= T_)
      continue;
    const float *x = &tile[row * kPitch + col];
    uint4 out;
    out.x = pack2<T>(x[0] * scale, x[1] * scale);
    out.y = pack2<T>(x[2] * scale, x[3] * scale);
    out.z = pack2<T>(x[4] * scale, x[5] * scale);
    out.w = pack2<T>(x[6] * scale, x[7] * scale);
    *reinterpret_cast<uint4 *>(base + (int64_t{m} * kChunkRows + row) * s.r + col) = out;
  }
}

struct Workspace {
  float *lse2, *delta, *dq_acc;
};
Workspace carve(const AttnSm90Backward &a) {
  const int64_t rows = a.B * a.H * paddedRows(a.T, a.D);
  float *w = static_cast<float *>(a.workspace);
  return {w, w + rows, w + 2 * rows};
}

template <class T, int D> int launch(const AttnSm90Backward &a, const char **why) {
  const Workspace w = carve(a);
  const int64_t Tp = paddedRows(a.T, D), rows = a.B * a.H * Tp;
  if (rows > 0) {
    backward_prepare<T, D><<<static_cast<unsigned>((rows * (D / 8) + 255) / 256), 256, 0,
                             a.stream>>>(
        static_cast<const T *>(a.out), static_cast<const T *>(a.dout), a.lse, w.lse2, w.delta,
        reinterpret_cast<float4 *>(w.dq_acc), rows, static_cast<int32_t>(a.H), static_cast<int32_t>(a.T), static_cast<int32_t>(Tp),
        a.os, a.dos);
  }
  const int64_t tiles_k = (a.S + kKeys - 1) / kKeys, ctas = tiles_k * a.B * a.Hkv;
  if (ctas > 0) {
    BwdParams p{};
    p.lse2 = w.lse2, p.delta = w.delta, p.dq_acc = w.dq_acc;
    p.dk = a.dk, p.dv = a.dv;
    p.dks_b = a.dks.b, p.dks_h = a.dks.h, p.dks_r = a.dks.r;
    p.dvs_b = a.dvs.b, p.dvs_h = a.dvs.h, p.dvs_r = a.dvs.r;
    p.B = static_cast<int32_t>(a.B), p.H = static_cast<int32_t>(a.H);
    p.Hkv = static_cast<int32_t>(a.Hkv), p.T = static_cast<int32_t>(a.T);
    p.S = static_cast<int32_t>(a.S), p.Tp = static_cast<int32_t>(Tp);
    p.tiles_k = static_cast<int32_t>(tiles_k);
    p.sl2 = a.scale * kLog2e, p.scale = a.scale;
    p.causal = a.causal;
    alignas(64) CUtensorMap tq, tk, tv, tdo;
    auto encode = [&](CUtensorMap *map, const void *ptr, int64_t rows_, int64_t heads,
                      const AttnSm90Strides &s, bool *heads_inner, uint32_t box_rows) {
      return encode_attention_map(map, ptr, a.f16, D, rows_, heads, a.B, s, heads_inner,
                                  box_rows);
    };
    if (!encode(&tk, a.k, a.S, a.Hkv, a.ks, &p.k_heads_inner, kKeys) ||
        !encode(&tv, a.v, a.S, a.Hkv, a.vs, &p.v_heads_inner, kKeys)) {
      *why = "TMA cannot describe k's or v's layout";
      return 1;
    }
    if (a.T == 0) { // no query tile is loaded; any valid map will do
      tq = tk, tdo = tk;
    } else if (!encode(&tq, a.q, a.T, a.H, a.qs, &p.q_heads_inner, kQRows<D>) ||
               !encode(&tdo, a.dout, a.T, a.H, a.dos, &p.do_heads_inner, kQRows<D>)) {
      *why = "TMA cannot describe q's or dout's layout";
      return 1;
    }
    const auto kernel = backward_main<T, D>;
    // The attribute is per function and device; setting it each launch is
    // cheap and right for any current device.
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             BwdSmem<D>::kBytes) != cudaSuccess) {
      *why = "cannot reserve the kernel's shared memory (not an sm_90 GPU?)";
      return 1;
    }
    kernel<<<static_cast<unsigned>(ctas), kThreads, BwdSmem<D>::kBytes, a.stream>>>(tq, tk, tv,
                                                                                 tdo, p);
  }
  if (rows > 0)
    backward_finish<T, D><<<static_cast<unsigned>(rows / kChunkRows), 256, 0, a.stream>>>(
        reinterpret_cast<const float4 *>(w.dq_acc), static_cast<T *>(a.dq),
        static_cast<int32_t>(a.H), static_cast<int32_t>(a.T), static_cast<int32_t>(Tp / kChunkRows),
        a.dqs, a.scale);
  return 0;
}

} // namespace

int64_t attention_backward_sm90_workspace(const AttnSm90Backward &a) {
  return a.B * a.H * paddedRows(a.T, a.D) * (2 + a.D) * static_cast<int64_t>(sizeof(float));
}

const char *attention_backward_sm90_unsupported(const AttnSm90Backward &a) {
  if (a.D != 64 && a.D != 128)
    return "head size is not 64 or 128";
  if (a.B < 0 || a.H < 0 || a.T < 0 || a.S < 0 || a.Hkv <= 0 || a.H % a.Hkv != 0)
    return "B, H, T, S must be >= 0 and H a multiple of Hkv > 0";
  if (a.T > INT32_MAX - 2 * kQRows<64> || a.S > INT32_MAX - 2 * kKeys || a.B * a.H > INT32_MAX ||
      ((a.S + kKeys - 1) / kKeys) * a.B * a.Hkv >= (int64_t{1} << 31) ||
      a.B * a.H * paddedRows(a.T, a.D) * 32 >= (int64_t{1} << 31) * 256)
    return "T, S or the number of tiles does not fit 32 bits";
  if (!(a.scale > 0.f) || !std::isfinite(a.scale))
    return "scale is not positive and finite";
  for (const void *ptr : {a.q, a.k, a.v, a.out, a.dout, static_cast<const void *>(a.lse),
                          static_cast<const void *>(a.dq), static_cast<const void *>(a.dk),
                          static_cast<const void *>(a.dv), static_cast<const void *>(a.workspace)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      return "a tensor or the workspace is not 16-byte aligned";
  for (const AttnSm90Strides *s : {&a.qs, &a.ks, &a.vs, &a.os, &a.dos, &a.dqs, &a.dks, &a.dvs})
    if (!tma_strides_ok(*s))
      return "a stride is negative or not a multiple of 8 elements";
  if (a.workspace == nullptr && attention_backward_sm90_workspace(a) > 0)
    return "no workspace (attention_backward_sm90_workspace bytes)";
  return nullptr;
}

int attention_backward_sm90(const AttnSm90Backward &a, const char **why) {
  if (const char *no = attention_backward_sm90_unsupported(a)) {
    *why = no;
    return 1;
  }
  if (a.f16)
    return a.D == 64 ? launch<__half, 64>(a, why) : launch<__half, 128>(a, why);
  return a.D == 64 ? launch<__nv_bfloat16, 64>(a, why) : launch<__nv_bfloat16, 128>(a, why);
}

} // namespace tcc_sm90
