// Tile-shape sweep of tcc's flash-attention kernels (bf16, causal, the
// run.sh shapes): times each kernel variant (tile sizes, CTAs an SM) alone
// with CUDA events, median of 20 after 3 warmup. Used to pick
// detail::AttnTiles (attention_launchers.cuh); built like attention_bench.
#include "compiler/codegen/cuda/cuda_prelude.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

using tcc_cuda::bf16;
using tcc_cuda::Elem;
using tcc_cuda::launch_attention_backward;
using tcc_cuda::launch_attention_forward;
using tcc_cuda::detail::AttnParams;
using tcc_cuda::detail::attn_bwd_dkdv_mma_kernel;
using tcc_cuda::detail::attn_bwd_dq_mma_kernel;
using tcc_cuda::detail::attn_bwd_kv_smem_bytes;
using tcc_cuda::detail::attn_bwd_q_smem_bytes;
using tcc_cuda::detail::attn_forward_mma;
using tcc_cuda::detail::attn_mix64;
using tcc_cuda::detail::attn_params;

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(1);} } while (0)

__global__ void fill(bf16 *x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = Elem<bf16>::store(float(attn_mix64(seed + i * 0x9E3779B97F4A7C15ull) >> 40) * (2.f / 16777216.f) - 1.f);
}

template <class F> double med(F f) {
  for (int i = 0; i < 3; ++i) f();
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ms(20);
  for (auto &m : ms) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); cudaEventElapsedTime(&m, a, b); }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[10];
}

struct Bufs { bf16 *q, *k, *v, *o, *dO, *dq, *dk, *dv; float *lse, *delta; };

template <int D> void sweep(int64_t B, int64_t H, int64_t T) {
  const int64_t n = B * H * T * D;
  Bufs m;
  for (bf16 **p : {&m.q, &m.k, &m.v, &m.o, &m.dO, &m.dq, &m.dk, &m.dv}) CK(cudaMalloc(p, n * 2));
  CK(cudaMalloc(&m.lse, B * H * T * 4)); CK(cudaMalloc(&m.delta, B * H * T * 4));
  uint64_t s = 1;
  for (bf16 *p : {m.q, m.k, m.v, m.dO}) fill<<<1024, 256>>>(p, n, s++);
  const float scale = 1.f / std::sqrt(float(D));
  AttnParams p = attn_params(B, H, H, T, T, scale, true, 0.f, 0, 0);
  CK(launch_attention_forward<bf16>(m.q, m.k, m.v, m.o, m.lse, B, H, H, T, T, D, scale, true, 0.f, 0, 0, nullptr));
  CK(launch_attention_backward<bf16>(m.q, m.k, m.v, m.o, m.lse, m.dO, m.dq, m.dk, m.dv, m.delta, B, H, H, T, T, D, scale, true, 0.f, 0, 0, true, nullptr));
  const double flops = 4.0 * B * H * T * T * D * 0.5;
  std::printf("D=%d B=%lld H=%lld T=%lld causal\n", D, (long long)B, (long long)H, (long long)T);
#define FWD(BM, BN, MT, MB) { double t = med([&] { CK((attn_forward_mma<bf16, D, BM, BN, MT, MB>(m.q, m.k, m.v, m.o, m.lse, p, nullptr))); }); \
    std::printf("  fwd BM=%d BN=%d MT=%d minb=%d: %.4f ms %.1f TFLOP/s\n", BM, BN, MT, MB, t, flops / t * 1e-9); }
#define KV(BM, BN, MB) { constexpr int sm = attn_bwd_kv_smem_bytes<D, BM, BN>(); auto kern = attn_bwd_dkdv_mma_kernel<bf16, D, BM, BN, MB, false>; \
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, sm)); \
    double t = med([&] { kern<<<unsigned((T + BN - 1) / BN * B * H), BN * 2, sm>>>(m.q, m.k, m.v, m.dO, m.lse, m.delta, m.dk, m.dv, p); }); \
    std::printf("  dkdv BM=%d BN=%d minb=%d: %.4f ms (4 products: %.1f TFLOP/s)\n", BM, BN, MB, t, 2 * flops / t * 1e-9); }
#define DQ(BM, BN, MT, MB) { constexpr int sm = attn_bwd_q_smem_bytes<D, BM, BN>(); auto kern = attn_bwd_dq_mma_kernel<bf16, D, BM, BN, MT, MB, false>; \
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, sm)); \
    double t = med([&] { kern<<<unsigned((T + BM - 1) / BM * B * H), BM * 2 / MT, sm>>>(m.q, m.k, m.v, m.dO, m.lse, m.delta, m.dq, p); }); \
    std::printf("  dq BM=%d BN=%d MT=%d minb=%d: %.4f ms (3 products: %.1f TFLOP/s)\n", BM, BN, MT, MB, t, 1.5 * flops / t * 1e-9); }
  if constexpr (D == 64) {
    FWD(64, 64, 1, 4)
    KV(32, 64, 4)
    DQ(64, 32, 1, 4) DQ(128, 64, 2, 2) DQ(64, 64, 1, 3) DQ(128, 64, 2, 3) DQ(128, 128, 2, 2)
  } else {
    FWD(128, 64, 2, 2)
    KV(64, 128, 1)
    DQ(128, 32, 2, 2)
  }
  for (void *x : {(void *)m.q, (void *)m.k, (void *)m.v, (void *)m.o, (void *)m.dO, (void *)m.dq, (void *)m.dk, (void *)m.dv, (void *)m.lse, (void *)m.delta}) cudaFree(x);
}

int main() {
  sweep<64>(16, 12, 1024);
  sweep<128>(8, 16, 2048);
  return 0;
}
