// Throwaway (session 41): the 1B decoder's forward RMSNorm + e4m3 cast, both
// layouts written by the kernel's bands against out only + launch_fp8_transpose.
#define main norm_fp8_test_main
#include "tests/cuda/norm_fp8_test.cu"
#undef main
int main() {
  const int64_t rows = 8192, c = 2048, n = rows * c;
  std::mt19937_64 rng(41);
  DeviceBuffer<float> x(n), w(c);
  DeviceBuffer<bf16> y(n);
  DeviceBuffer<e4m3> out(n), outT(n), out2(n), outT2(n);
  DeviceBuffer<tcc_cuda::Fp8ScalingRecord> rec(1);
  ScaleBlock q;
  x.upload(randomRows<float>(rng, rows, c, 1.0));
  w.upload(randomRows<float>(rng, 1, c, 1.0));
  CUDA_CHECK(cudaMemset(rec.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  tcc_cuda::launch_layer_norm<float, bf16>(x.p, w.p, nullptr, y.p, rows, c, 1e-5, true, 0);
  tcc_cuda::launch_fp8_quantize_delayed<bf16, e4m3>(rows, c, y.p, out.p, outT.p, q.p(), rec.p, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  auto banded = [&](int band) { CUDA_CHECK((tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
      x.p, w.p, nullptr, rows, c, 1e-5, true, out.p, outT.p, q.p(), rec.p, 0, band))); };
  auto outOnly = [&](int band) { CUDA_CHECK((tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
      x.p, w.p, nullptr, rows, c, 1e-5, true, out2.p, nullptr, q.p(), rec.p, 0, band))); };
  auto transpose = [&] { tcc_cuda::launch_fp8_transpose<e4m3>(rows, c, out2.p, outT2.p, 0); };
  banded(32); outOnly(32); transpose();
  CUDA_CHECK(cudaDeviceSynchronize());
  auto a1 = out.download(), a2 = out2.download(), t1 = outT.download(), t2 = outT2.download();
  size_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += a1[i].bits != a2[i].bits || t1[i].bits != t2[i].bits;
  std::printf("split vs banded: %zu of %lld bytes differ\n", bad, 2LL * n);
  for (int round = 0; round < 3; ++round) {
    const float b32 = timeMs([&] { banded(32); }), b16 = timeMs([&] { banded(16); });
    const float o32 = timeMs([&] { outOnly(32); }), o8 = timeMs([&] { outOnly(8); }), o4 = timeMs([&] { outOnly(4); });
    const float tr = timeMs(transpose);
    std::printf("round %d: banded32 %.4f banded16 %.4f  out-only32 %.4f out-only8 %.4f out-only4 %.4f  transpose %.4f  out-only32+transpose %.4f ms\n",
                round, b32, b16, o32, o8, o4, tr, timeMs([&] { outOnly(32); transpose(); }));
  }
  return 0;
}
