// Hopper (sm_90a) warpgroup matrix products as PTX: the shared-memory tile
// layout they read (128-byte swizzle), their descriptors, and the few
// wgmma.mma_async shapes tcc's own kernels use. Plain CUDA, no CUTLASS:
// a unit that includes this compiles in seconds.
//
// A warpgroup is 4 consecutive warps (128 threads, the first warp a
// multiple of 4). wgmma.mma_async is asynchronous: wgmma_fence() before the
// first product of a batch (and after registers it reads or accumulates
// into were written by other instructions), wgmma_commit() after the batch,
// wgmma_wait<N>() before reading the results (N: batches left in flight).
//
// Accumulator layout (d of a 64 x N product, f32): thread t of the
// warpgroup, warp w = t / 32, lane l, holds for i in [0, N/8)
//   d[4i + 0], d[4i + 1]: row 16w + l/4,     columns 8i + 2(l%4) + {0, 1}
//   d[4i + 2], d[4i + 3]: row 16w + l/4 + 8, the same columns.
// An A operand from registers (64 x 16, 16-bit) has mma.sync's m16n8k16
// fragment per warp, so columns [16j, 16j + 16) of an accumulator become
// the A operand of k-step j by wgmma_pack (FlashAttention-3's P in
// registers).
#ifndef TCC_CUDA_SM90_WGMMA_CUH
#define TCC_CUDA_SM90_WGMMA_CUH

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tcc_sm90 {

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Shared-memory tiles of 16-bit elements, "K-major, 128-byte swizzle"
// (TMA's SWIZZLE_128B, CUTLASS's Layout_K_SW128_Atom): a rows x C tile
// (C a multiple of 64) is C / 64 column blocks of rows x 64 elements, block
// a at byte a * rows * 128; in a block, row r's 16-byte chunk c (elements
// 8c .. 8c + 7) lies at r * 128 + 16 * (c ^ (r % 8)). Tiles start
// 1024-byte aligned (the swizzle is on address bits).
__host__ __device__ constexpr uint32_t sw128_offset(int rows, int r, int chunk) {
  return static_cast<uint32_t>((chunk / 8) * rows * 128 + r * 128 + 16 * ((chunk % 8) ^ (r % 8)));
}

// A wgmma shared-memory descriptor with the 128-byte swizzle. Byte
// offsets: `lbo` between 64-element column blocks of an MN-major operand
// (unused K-major), `sbo` between groups of 8 rows (1024 for the tiles
// above).
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16;
  d |= static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32;
  d |= static_cast<uint64_t>(1) << 62; // SWIZZLE_128B
  return d;
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of an accumulator across the
// asynchronous product that writes it.
template <int N> __device__ __forceinline__ void wgmma_fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}
// Generic-proxy writes to shared memory (cp.async, st.shared) made visible
// to wgmma's reads (the async proxy); then a barrier.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Two floats as a 16-bit pair (round to nearest even), lo in the low half.
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}
// Columns [16j, 16j + 16) of accumulator d as a 64 x 16 A operand.
template <class T, int N>
__device__ __forceinline__ void wgmma_pack(const float (&d)[N], int j, uint32_t (&a)[4]) {
  a[0] = pack2<T>(d[8 * j + 0], d[8 * j + 1]);
  a[1] = pack2<T>(d[8 * j + 2], d[8 * j + 3]);
  a[2] = pack2<T>(d[8 * j + 4], d[8 * j + 5]);
  a[3] = pack2<T>(d[8 * j + 6], d[8 * j + 7]);
}

// The products (operands bf16 or f16, f32 accumulation). ss: both from
// shared memory, K-major; rs_mn: A from registers, B MN-major (e.g. V, rows
// of the K dimension, N contiguous). One macro writes both types' asm; the
// accumulator operands are "%0, ..., %N-1" in the instruction and
// "+f"(d[0]), ... as the asm's outputs.
#define TCC_WGMMA_REGS0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define TCC_WGMMA_REGS1 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TCC_WGMMA_REGS2 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define TCC_WGMMA_REGS3 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TCC_WGMMA_REGS32 TCC_WGMMA_REGS0 ", " TCC_WGMMA_REGS1
#define TCC_WGMMA_REGS64 TCC_WGMMA_REGS32 ", " TCC_WGMMA_REGS2 ", " TCC_WGMMA_REGS3
#define TCC_WGMMA_OUT0(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define TCC_WGMMA_OUT1(d) "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TCC_WGMMA_OUT2(d) "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define TCC_WGMMA_OUT3(d) "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define TCC_WGMMA_OUT32(d) TCC_WGMMA_OUT0(d), TCC_WGMMA_OUT1(d)
#define TCC_WGMMA_OUT64(d) TCC_WGMMA_OUT32(d), TCC_WGMMA_OUT2(d), TCC_WGMMA_OUT3(d)

// For operand type TY (bf16, f16):
//   wgmma_m64n128k16_ss_TY, wgmma_m64n64k16_ss_TY: d (64 x N, f32) = [d +]
//     a (64 x 16, smem, K-major) b^T (N x 16, smem, K-major);
//   wgmma_m64n64k16_ss_mn_TY: the same from MN-major a and b (the
//     attention backward's dQ = dS K from dS^T and K as stored);
//   wgmma_m64nNk16_rs_mn_TY, N 64 or 128: d (64 x N, f32) += a (64 x 16,
//     registers, wgmma_pack) b (N x 16, smem, MN-major).
#define TCC_WGMMA_PRODUCTS(TY)                                                       \
  __device__ __forceinline__ void wgmma_m64n128k16_ss_##TY(float(&d)[64], uint64_t a,              \
                                                          uint64_t b, bool accumulate) {           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." #TY "." #TY                        \
                 " {" TCC_WGMMA_REGS64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"                          \
                 : TCC_WGMMA_OUT64(d)                                                              \
                 : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));                             \
  }                                                                                                \
  /* 64 x 64 products from shared memory: K-major both (tn 0), or MN-major */                     \
  /* both (tn 1: A stored K rows of M contiguous, B K rows of N contiguous) */                     \
  __device__ __forceinline__ void wgmma_m64n64k16_ss_##TY(float(&d)[32], uint64_t a, uint64_t b,   \
                                                         bool accumulate) {                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." #TY "." #TY                         \
                 " {" TCC_WGMMA_REGS32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"                          \
                 : TCC_WGMMA_OUT32(d)                                                              \
                 : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));                             \
  }                                                                                                \
  __device__ __forceinline__ void wgmma_m64n64k16_ss_mn_##TY(float(&d)[32], uint64_t a,            \
                                                            uint64_t b, bool accumulate) {         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." #TY "." #TY                         \
                 " {" TCC_WGMMA_REGS32 "}, %32, %33, p, 1, 1, 1, 1;\n}\n"                          \
                 : TCC_WGMMA_OUT32(d)                                                              \
                 : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));                             \
  }                                                                                                \
  __device__ __forceinline__ void wgmma_m64n64k16_rs_mn_##TY(float(&d)[32],                        \
                                                            const uint32_t(&a)[4], uint64_t b) {   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." #TY "." #TY                         \
                 " {" TCC_WGMMA_REGS32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"            \
                 : TCC_WGMMA_OUT32(d)                                                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));                    \
  }                                                                                                \
  __device__ __forceinline__ void wgmma_m64n128k16_rs_mn_##TY(float(&d)[64],                       \
                                                             const uint32_t(&a)[4], uint64_t b) {  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." #TY "." #TY                        \
                 " {" TCC_WGMMA_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"            \
                 : TCC_WGMMA_OUT64(d)                                                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));                    \
  }
TCC_WGMMA_PRODUCTS(bf16)
TCC_WGMMA_PRODUCTS(f16)
#undef TCC_WGMMA_PRODUCTS

template <class T> struct Wgmma;
template <> struct Wgmma<__nv_bfloat16> {
  __device__ __forceinline__ static void ss128(float (&d)[64], uint64_t a, uint64_t b, bool acc) {
    wgmma_m64n128k16_ss_bf16(d, a, b, acc);
  }
  __device__ __forceinline__ static void ss64(float (&d)[32], uint64_t a, uint64_t b, bool acc) {
    wgmma_m64n64k16_ss_bf16(d, a, b, acc);
  }
  __device__ __forceinline__ static void ss_mn(float (&d)[32], uint64_t a, uint64_t b,
                                               bool acc) {
    wgmma_m64n64k16_ss_mn_bf16(d, a, b, acc);
  }
  __device__ __forceinline__ static void rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
    wgmma_m64n64k16_rs_mn_bf16(d, a, b);
  }
  __device__ __forceinline__ static void rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
    wgmma_m64n128k16_rs_mn_bf16(d, a, b);
  }
};
template <> struct Wgmma<__half> {
  __device__ __forceinline__ static void ss128(float (&d)[64], uint64_t a, uint64_t b, bool acc) {
    wgmma_m64n128k16_ss_f16(d, a, b, acc);
  }
  __device__ __forceinline__ static void ss64(float (&d)[32], uint64_t a, uint64_t b, bool acc) {
    wgmma_m64n64k16_ss_f16(d, a, b, acc);
  }
  __device__ __forceinline__ static void ss_mn(float (&d)[32], uint64_t a, uint64_t b,
                                               bool acc) {
    wgmma_m64n64k16_ss_mn_f16(d, a, b, acc);
  }
  __device__ __forceinline__ static void rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
    wgmma_m64n64k16_rs_mn_f16(d, a, b);
  }
  __device__ __forceinline__ static void rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
    wgmma_m64n128k16_rs_mn_f16(d, a, b);
  }
};

} // namespace tcc_sm90

#endif
