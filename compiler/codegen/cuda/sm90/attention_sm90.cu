// tcc's Hopper attention forward (attention_sm90.h). nvcc for sm_90a only.
//
// Persistent CTAs of 384 threads, one an SM. Work items are 128-row query
// tiles of one (b, h) (item_of's order; a shared counter hands them out).
// The producer warpgroup's first lane loads each item's Q and then its
// 128-key tiles of K and V with TMA (async_copy.cuh) into 128-byte
// swizzled shared tiles (wgmma.cuh): two Q buffers, a K ring and a V ring,
// each buffer with a full mbarrier (the bytes landed) and an empty one
// (every consumer warp is done with it). Two consumer warpgroups own 64
// rows of the item each; per key tile t a warpgroup computes
//   S_t (64 x 128, f32)  = Q_wg (64 x D, smem) K_t^T       (wgmma ss, D/16 k-steps)
//   O   (64 x D, f32)   += P_{t-1} (registers) V_{t-1}     (wgmma rs, 8 k-steps)
//   online softmax of S_t in registers (log2 units: one ex2 a score) -> P_t
// so P never goes through shared memory, and the softmax of S_t runs under
// the product with V_{t-1} (FlashAttention-3's intra-warpgroup pipelining).
// The two warpgroups take turns issuing their products (named barriers 1
// and 2), so one's softmax runs under the other's products (FA3's
// ping-pong). Causal items stop at the diagonal; only tiles crossing it or
// the ragged end of S are masked. Rows past T or S come in as zeros (TMA's
// out-of-bounds fill). out is normalized into the finished Q buffer and
// written by TMA; lse by plain stores.
// Each include guarded: a step's sm90 attention unit pastes these headers
// in front of this file (CodegenSources.cmake) and has no include path.
#ifndef TCC_CUDA_SM90_ATTENTION_SM90_H
#include "compiler/codegen/cuda/sm90/attention_sm90.h"
#endif
#ifndef TCC_CUDA_SM90_ASYNC_COPY_CUH
#include "compiler/codegen/cuda/sm90/async_copy.cuh"
#endif
#ifndef TCC_CUDA_SM90_TENSOR_MAPS_H
#include "compiler/codegen/cuda/sm90/tensor_maps.h"
#endif
#ifndef TCC_CUDA_SM90_WGMMA_CUH
#include "compiler/codegen/cuda/sm90/wgmma.cuh"
#endif

#include <algorithm>
#include <cmath>

namespace tcc_sm90 {
namespace {

constexpr int kRows = 128;      // query rows per CTA
constexpr int kKeys = 128;      // keys per tile
constexpr int kConsumers = 256; // two warpgroups
constexpr int kThreads = kConsumers + 128; // and the producer's warpgroup
// Registers a thread (setmaxnreg): 384 threads start at 168; the producer
// gives most of its share to the consumers (128 x 40 + 256 x 232 <= 64K).
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct Params {
  void *out;
  float *lse;
  int32_t B, H, Hkv, T, S;
  int64_t os_b, os_h, os_r;
  float sl2; // scale * log2(e)
  int group;      // heads per group of items (item_of)
  int *scheduler; // [next item - gridDim.x, CTAs done]: zero between launches
  bool causal;
  // Each map's coordinates are (column, a, b', batch) with (a, b') = (row,
  // head) or (head, row): whichever of the two has the smaller stride is
  // the map's second dimension.
  bool q_heads_inner, k_heads_inner, v_heads_inner, o_heads_inner;
};

// Shared memory: two Q tiles (the next item's loads while this one
// finishes), a ring of K tiles and a ring of V tiles. Key tile t's K is read
// by S_t, its V one iteration later by P_t V_t, so the V ring is the deeper.
// D = 64: 2 + 3 + 4 tiles of 16 KiB (144 KiB); D = 128: 2 + 2 + 3 of 32 KiB
// (224 KiB of the 227 a CTA may have).
template <int D> struct Smem {
  static constexpr int kStagesK = D == 64 ? 3 : 2, kStagesV = D == 64 ? 4 : 3;
  static constexpr uint32_t kQ = kRows * D * 2;
  static constexpr uint32_t kKV = kKeys * D * 2; // one K or V tile
  static constexpr uint32_t kBytes = 2 * kQ + (kStagesK + kStagesV) * kKV + 1024; // + alignment
};

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// 2^x for x <= 0 on the FMA pipe, for a share of the softmax's exponentials
// (the MUFU pipe does 16 a clock an SM, a 16th of the tensor cores' pace;
// FlashAttention-4's trick): x = n + f, n = round(x), f in [-0.5, 0.5];
// 2^f by a cubic (relative error 1.0e-4, fit here with p(0) = 1 exactly);
// n added to the exponent bits. Exactly 0 for x <= -127 (masked scores).
__device__ __forceinline__ float poly_exp2(float x) {
  x = fmaxf(x, -127.f);
  const float t = x + 12582912.f;      // 1.5 * 2^23: n + 2^22 in t's low bits
  const float f = x - (t - 12582912.f); // exact
  const float p = fmaf(fmaf(fmaf(0.05500796f, f, 0.24221061f), f, 0.69328302f), f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}
// One softmax column chunk (of 16) in TCC_SM90_EXP_EVERY takes poly_exp2;
// 0, none, is the default: on the H200 (2026-12-03, --bench, two rounds)
// one in 4, 3 or 2 was no faster at D64 (0.106-0.110 ms against 0.107) and
// slower at D128 (0.307-0.334 against 0.291-0.295), so the MUFU pipe is not
// what bounds the softmax here.
#ifndef TCC_SM90_EXP_EVERY
#define TCC_SM90_EXP_EVERY 0
#endif
constexpr int kExpPeriod = TCC_SM90_EXP_EVERY > 0 ? TCC_SM90_EXP_EVERY : 1 << 30;

// -DTCC_SM90_TRACE: the first CTA's warpgroup leaders add up clock64()
// cycles per loop phase (attention_sm90_trace reads them; the bench prints
// them). Off in every build but that bench's.
#ifdef TCC_SM90_TRACE
constexpr int kTracePhases = 9;
// [phases..., total cycles, tiles, waits for each item's first tile]
__device__ unsigned long long g_trace[2][kTracePhases + 3];
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

// One work item: query tile qt of (b, h), and the key tiles it reads.
struct Item {
  int b, h, hk, q0, tiles;
};
// Items go in groups of p.group heads, which bounds how many heads' K and
// V the CTAs running at once read; inside a group, the longest query tiles
// first (causal), so that the last items of a group, and of the grid, are
// short ones.
__device__ __forceinline__ Item item_of(const Params &p, int i) {
  const int BH = p.B * p.H, tiles_q = (p.T + kRows - 1) / kRows;
  const int grp = i / (p.group * tiles_q), j = i - grp * p.group * tiles_q;
  const int heads = min(p.group, BH - grp * p.group); // the last group may be smaller
  const int qt = tiles_q - 1 - j / heads;
  const int bh = grp * p.group + j % heads;
  Item it;
  it.b = bh / p.H, it.h = bh % p.H;
  it.hk = it.h / (p.H / p.Hkv);
  it.q0 = qt * kRows;
  int kend = p.S;
  if (p.causal) { // key j is visible to row i iff j <= i + S - T
    const int64_t last = int64_t{it.q0} + kRows + (p.S - p.T);
    kend = last < 0 ? 0 : (last < p.S ? static_cast<int>(last) : p.S);
  }
  it.tiles = (kend + kKeys - 1) / kKeys;
  return it;
}

// Persistent: CTA c runs item c first, then the items p.scheduler hands
// out (item_of's order), the producer loading the next item's Q and first
// tiles while the consumers finish this one. The K and V rings run on
// across items.
template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    attention_forward_sm90_kernel(const __grid_constant__ CUtensorMap tq,
                                  const __grid_constant__ CUtensorMap tk,
                                  const __grid_constant__ CUtensorMap tv,
                                  const __grid_constant__ CUtensorMap to, const Params p,
                                  int items) {
  constexpr int SK = Smem<D>::kStagesK, SV = Smem<D>::kStagesV;
  extern __shared__ uint8_t smem_raw[];
  // A full (bytes landed) and an empty (every consumer warp done) mbarrier
  // for each Q buffer, K stage and V stage: Q 0-1, K 2.., V 2 + SK..
  constexpr int kBars = 2 + SK + SV;
  __shared__ __align__(8) uint64_t full_bars[kBars], empty_bars[kBars];
  __shared__ int item_slot[2]; // the item each Q buffer's full phase announces
  const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = sQ + 2 * Smem<D>::kQ, sV = sK + SK * Smem<D>::kKV;
  const uint32_t full0 = smem_u32(&full_bars[0]), empty0 = smem_u32(&empty_bars[0]);
  auto qbar = [&](uint32_t base, int u) { return base + 8 * (u % 2); };
  auto kbar = [&](uint32_t base, int g) { return base + 8 * (2 + g % SK); };
  auto vbar = [&](uint32_t base, int g) { return base + 8 * (2 + SK + g % SV); };
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  if (tid == 0) {
    for (int i = 0; i < kBars; ++i) {
      mbar_init(full0 + 8 * i, 1);
      mbar_init(empty0 + 8 * i, kConsumers / 32);
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
      // Items: this CTA's first is blockIdx.x, the next ones come from the
      // shared counter (dynamic: causal items differ in length). Item u is
      // announced in item_slot[u % 2] with its Q buffer's full phase; past
      // the last, the slot says `items` and the consumers stop.
      int g = 0, u = 0; // key tiles and items so far
      // The next item is asked for an item ahead (the atomic's round trip
      // under this item's loads).
      int next = atomicAdd(p.scheduler, 1) + gridDim.x;
      for (int i = blockIdx.x;; ++u) {
        if (u >= 2) // item u - 2 is done with this Q buffer and slot
          mbar_wait(qbar(empty0, u), ((u / 2) - 1) & 1);
        item_slot[u % 2] = i < items ? i : items;
        const Item it = item_of(p, i < items ? i : 0);
        if (i >= items) {
          mbar_arrive(qbar(full0, u));
          break;
        }
        i = next;
        if (i < items)
          next = atomicAdd(p.scheduler, 1) + gridDim.x;
        if (it.tiles == 0) {
          mbar_arrive(qbar(full0, u));
          continue;
        }
        mbar_expect_tx(qbar(full0, u), Smem<D>::kQ);
#pragma unroll
        for (int a = 0; a < D / 64; ++a)
          load(p.q_heads_inner, 64 * a, it.q0, it.h, it.b, &tq,
               sQ + (u % 2) * Smem<D>::kQ + a * kRows * 128, qbar(full0, u));
        // Tile t's K, then its V (wanted an iteration later).
        for (int t = 0; t < it.tiles; ++t, ++g) {
          if (g >= SK)
            mbar_wait(kbar(empty0, g), ((g / SK) - 1) & 1);
          mbar_expect_tx(kbar(full0, g), Smem<D>::kKV);
#pragma unroll
          for (int a = 0; a < D / 64; ++a)
            load(p.k_heads_inner, 64 * a, t * kKeys, it.hk, it.b, &tk,
                 sK + (g % SK) * Smem<D>::kKV + a * kKeys * 128, kbar(full0, g));
          if (g >= SV)
            mbar_wait(vbar(empty0, g), ((g / SV) - 1) & 1);
          mbar_expect_tx(vbar(full0, g), Smem<D>::kKV);
#pragma unroll
          for (int a = 0; a < D / 64; ++a)
            load(p.v_heads_inner, 64 * a, t * kKeys, it.hk, it.b, &tv,
                 sV + (g % SV) * Smem<D>::kKV + a * kKeys * 128, vbar(full0, g));
        }
      }
      // The last CTA past the counter zeroes it for the next launch.
      __threadfence();
      if (atomicAdd(p.scheduler + 1, 1) == static_cast<int>(gridDim.x) - 1) {
        p.scheduler[0] = 0;
        p.scheduler[1] = 0;
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
#ifdef TCC_SM90_TRACE
  const bool tracing = blockIdx.x == 0 && tid % 128 == 0;
  long long trace[kTracePhases] = {}, last = clock64(), first_waits = 0;
  const long long first = last;
  int traced_tiles = 0;
#endif
  const int wg = tid / 128, wwarp = warp % 4, shift = p.S - p.T;
  int g = 0; // as the producer's
  for (int u = 0;; ++u) {
    mbar_wait(qbar(full0, u), (u / 2) & 1);
    const int i = *static_cast<volatile int *>(&item_slot[u % 2]);
    if (i >= items)
      break;
    const Item it = item_of(p, i);
    const uint32_t qbase = sQ + (u % 2) * Smem<D>::kQ + wg * 64 * 128;
    auto release = [&](uint32_t empty_bar) { // every consumer warp is done with it
      __syncwarp();
      if (lane == 0)
        mbar_arrive(empty_bar);
    };
    const int row = it.q0 + wg * 64 + wwarp * 16 + lane / 4; // and row + 8
    const int wg_first = it.q0 + wg * 64;
    float o[D / 2];
#pragma unroll
    for (int j = 0; j < D / 2; ++j)
      o[j] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    uint32_t pa[kKeys / 16][4]; // P of the previous tile, the A operand of its P V

    // O += P V of ring tile gt: k-step j is keys [16j, 16j + 16), rows 16j..
    // of the V tile (2048 bytes each); D = 128 spans two column blocks
    // kKeys * 128 apart.
    auto issue_pv = [&](int gt) {
      const uint32_t vt = sV + (gt % SV) * Smem<D>::kKV;
#pragma unroll
      for (int j = 0; j < kKeys / 16; ++j)
        Wgmma<T>::rs(o, pa[j], wgmma_desc(vt + j * 16 * 128, kKeys * 128, 1024));
    };

    if (it.tiles > 0 && wg == 1)
      named_arrive<kConsumers>(1); // warpgroup 0 issues first
    for (int t = 0; t < it.tiles; ++t, ++g) {
      mbar_wait(kbar(full0, g), (g / SK) & 1);
      if (t > 0)
        mbar_wait(vbar(full0, g - 1), ((g - 1) / SV) & 1);
#ifdef TCC_SM90_TRACE
      if (tracing && t == 0)
        first_waits += clock64() - last;
#endif
      TRACE_MARK(0);
      named_sync<kConsumers>(1 + wg); // this warpgroup's turn at the tensor cores
      TRACE_MARK(1);
      // S = Q K^T: k-step kk reads columns [16kk, 16kk + 16), 32 bytes into
      // column block kk / 4.
      const uint32_t kt = sK + (g % SK) * Smem<D>::kKV;
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
        issue_pv(g - 1);
        wgmma_commit();
        named_arrive<kConsumers>(1 + (1 - wg)); // the other warpgroup's turn
        TRACE_MARK(2);
        wgmma_wait<1>();
      } else {
        named_arrive<kConsumers>(1 + (1 - wg));
        TRACE_MARK(2);
        wgmma_wait<0>();
      }
      wgmma_fence_operands(s);
      TRACE_MARK(3);
      release(kbar(empty0, g)); // S_t is done with K_t

      const int kv0 = t * kKeys;
      if (kv0 + kKeys > p.S || (p.causal && kv0 + kKeys - 1 > wg_first + shift)) {
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = kv0 + 8 * j + 2 * (lane % 4) + (e & 1);
            const int r = row + 8 * (e >> 1);
            if (col >= p.S || (p.causal && col > r + shift))
              s[4 * j + e] = -INFINITY;
          }
      }
      // Online softmax, rows row (e < 2) and row + 8; the 4 lanes of a quad
      // share a row.
      float corr[2];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < 16; ++j)
          mx = fmaxf(mx, fmaxf(s[4 * j + 2 * hh], s[4 * j + 2 * hh + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[hh], mx * p.sl2);
        const float m_use = m_new == -INFINITY ? 0.f : m_new; // no -inf - -inf
        corr[hh] = fast_exp2(m[hh] - m_use);
        m[hh] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float x = fmaf(s[4 * j + 2 * hh + e], p.sl2, -m_use);
            const float pv = j % kExpPeriod == kExpPeriod - 1 ? poly_exp2(x) : fast_exp2(x);
            s[4 * j + 2 * hh + e] = pv;
            sum += pv;
          }
        l[hh] = l[hh] * corr[hh] + sum;
      }
      TRACE_MARK(4);
      wgmma_wait<0>(); // P V of the previous tile: pa, o and its stage are free
      wgmma_fence_operands(o);
      TRACE_MARK(5);
      if (t > 0)
        release(vbar(empty0, g - 1)); // P V of tile t - 1 is done with its V
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        o[4 * j + 0] *= corr[0];
        o[4 * j + 1] *= corr[0];
        o[4 * j + 2] *= corr[1];
        o[4 * j + 3] *= corr[1];
      }
#pragma unroll
      for (int j = 0; j < kKeys / 16; ++j)
        wgmma_pack<T>(s, j, pa[j]);
      TRACE_MARK(6);
#ifdef TCC_SM90_TRACE
      traced_tiles += tracing;
#endif
    }
    if (it.tiles > 0) { // the last turn: P V of the last tile
      named_sync<kConsumers>(1 + wg);
      wgmma_fence();
      issue_pv(g - 1);
      wgmma_commit();
      if (wg == 0)
        named_arrive<kConsumers>(2); // warpgroup 1's last turn; it has no one left to wake
      wgmma_wait<0>();
      wgmma_fence_operands(o);
      release(vbar(empty0, g - 1));
    }
    TRACE_MARK(7);

    // out: this warpgroup's 64 rows, normalized, into its half of the Q
    // buffer (every S of the item is done with it) in the tiles' swizzled
    // layout, then one TMA store (rows past T are not written); the buffer
    // goes back to the producer once the store has read it.
    const uint32_t obuf = sQ + (u % 2) * Smem<D>::kQ;
    const int64_t bh = int64_t{it.b} * p.H + it.h;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float sum = l[hh];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int rl = wg * 64 + wwarp * 16 + lane / 4 + 8 * hh; // row in the tile
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const uint32_t v2 = pack2<T>(o[4 * j + 2 * hh] * inv, o[4 * j + 2 * hh + 1] * inv);
        const uint32_t at = obuf + sw128_offset(kRows, rl, j) + 4 * (lane % 4);
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at), "r"(v2) : "memory");
      }
      if (lane % 4 == 0 && it.q0 + rl < p.T)
        p.lse[bh * p.T + it.q0 + rl] = sum > 0.f ? (m[hh] + __log2f(sum)) * kLn2 : -INFINITY;
    }
    fence_proxy_async_shared();
    named_sync<128>(3 + wg); // this warpgroup's rows are in the buffer
    if (tid % 128 == 0) {
#pragma unroll
      for (int a = 0; a < D / 64; ++a) {
        const uint32_t src = obuf + a * kRows * 128 + wg * 64 * 128;
        if (p.o_heads_inner)
          tma_store(&to, src, 64 * a, it.h, it.q0 + wg * 64, it.b);
        else
          tma_store(&to, src, 64 * a, it.q0 + wg * 64, it.h, it.b);
      }
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    }
    release(qbar(empty0, u));
    TRACE_MARK(8);
  }
  if (tid % 128 == 0) // the last stores have landed before the kernel ends
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#ifdef TCC_SM90_TRACE
  if (tracing) {
    for (int i = 0; i < kTracePhases; ++i)
      g_trace[wg][i] = trace[i];
    g_trace[wg][kTracePhases] = clock64() - first;
    g_trace[wg][kTracePhases + 1] = traced_tiles;
    g_trace[wg][kTracePhases + 2] = first_waits;
  }
#endif
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
  p.scheduler = a.scheduler;
  const int64_t items = ((a.T + kRows - 1) / kRows) * a.B * a.H; // query tiles
  if (items == 0)
    return 0;
  alignas(64) CUtensorMap tq, tk, tv, to;
  auto encode = [&](CUtensorMap *map, const void *base, int64_t rows, int64_t heads,
                    const AttnSm90Strides &s, bool *heads_inner, uint32_t box_rows = kRows) {
    return encode_attention_map(map, base, a.f16, D, rows, heads, a.B, s, heads_inner, box_rows);
  };
  if (!encode(&tq, a.q, a.T, a.H, a.qs, &p.q_heads_inner)) {
    *why = "TMA cannot describe q's layout (or the driver has no cuTensorMapEncodeTiled)";
    return 1;
  }
  if (a.S == 0) { // no key tile is loaded; any valid map will do
    tk = tq, tv = tq;
  } else if (!encode(&tk, a.k, a.S, a.Hkv, a.ks, &p.k_heads_inner) ||
             !encode(&tv, a.v, a.S, a.Hkv, a.vs, &p.v_heads_inner)) {
    *why = "TMA cannot describe k's or v's layout";
    return 1;
  }
  if (!encode(&to, a.out, a.T, a.H, a.os, &p.o_heads_inner, kRows / 2)) {
    *why = "TMA cannot describe out's layout";
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
  static int sms = 0; // one CTA an SM (its shared memory)
  if (sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        sms <= 0) {
      *why = "cannot read the GPU's SM count";
      return 1;
    }
  }
  const int grid = static_cast<int>(items < sms ? items : sms);
  // Heads per group: 64. On the H200 (2026-12-03, --bench's sweep of 1 to
  // 64) more heads a group was faster at both issue shapes, 64 the fastest
  // (D64: 0.102 ms against 0.108 at 16; D128: 0.276 against 0.281): the
  // longest-first order over more heads balances the CTAs better than
  // fewer heads' K and V reuse L2.
  int64_t group = 64;
  if (a.group_heads > 0)
    group = a.group_heads;
  p.group = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(group, a.B * a.H)));
  kernel<<<grid, kThreads, Smem<D>::kBytes, a.stream>>>(tq, tk, tv, to, p,
                                                       static_cast<int>(items));
  return 0;
}

} // namespace

#ifdef TCC_SM90_TRACE
int attention_sm90_trace(unsigned long long (*out)[12]) {
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
  for (const AttnSm90Strides *s : {&a.qs, &a.ks, &a.vs, &a.os})
    if (!tma_strides_ok(*s))
      return "a stride is negative or not a multiple of 8 elements";
  if (a.scheduler == nullptr || reinterpret_cast<uintptr_t>(a.scheduler) % 8 != 0)
    return "no scheduler (two zeroed ints of device memory, 8-byte aligned)";
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
