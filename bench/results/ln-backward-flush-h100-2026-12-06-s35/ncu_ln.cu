// Session 35 experiment driver (not committed): GPT-2's layer-norm backward
// (16384 x 768, grad bf16, x f32, residual f32, dx cast to bf16 + its column
// sum, dweight, dbias) launched 5 times, for ncu. argv[1]: sums | dxonly.
#include "compiler/codegen/cuda/cuda_prelude.cuh"
#include "dialects/kern/NormWorkspace.h"
#include <cstdio>
#include <cstring>
using tcc_cuda::bf16;
int main(int argc, char **argv) {
  const bool sums = argc < 2 || std::strcmp(argv[1], "sums") == 0;
  const long rows = 16384, c = 768, parts = tcc::kern::normGradParts(rows);
  float *x, *a, *w, *dx, *dw, *db, *ws; bf16 *g, *cast, *csum;
  cudaMalloc(&x, rows * c * 4); cudaMalloc(&a, rows * c * 4); cudaMalloc(&dx, rows * c * 4);
  cudaMalloc(&w, c * 4); cudaMalloc(&dw, c * 4); cudaMalloc(&db, c * 4);
  cudaMalloc(&ws, parts * 3 * c * 4); cudaMalloc(&g, rows * c * 2); cudaMalloc(&cast, rows * c * 2);
  cudaMalloc(&csum, c * 2);
  cudaMemset(x, 0x3c, rows * c * 4); cudaMemset(a, 0x3c, rows * c * 4); cudaMemset(w, 0x3f, c * 4);
  cudaMemset(g, 0x3c, rows * c * 2);
  for (int i = 0; i < 5; ++i) {
    cudaError_t e = tcc_cuda::launch_layer_norm_backward<bf16, float>(
        g, x, w, a, dx, cast, sums ? dw : nullptr, sums ? db : nullptr, sums ? csum : nullptr,
        sums, sums ? ws : nullptr, parts, rows, c, 1e-5, false, 0, true);
    if (e != cudaSuccess) { std::printf("launch: %s\n", cudaGetErrorString(e)); return 1; }
  }
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("%s: %s\n", sums ? "sums" : "dxonly", cudaGetErrorString(e));
  return e != cudaSuccess;
}
