// Throwaway (session 43): the 1B decoder's forward RMSNorm + e4m3 cast
// (8192 x 2048, f32 x, bf16 y), for ncu: the plain norm, the banded cast
// (both layouts, band 32) and its row-major pass alone (band 32, 8), each
// launched 3 times in that order, then timed.
#define main norm_fp8_test_main
#include "tests/cuda/norm_fp8_test.cu"
#undef main
int main() {
  const int64_t rows = 8192, c = 2048, n = rows * c;
  std::mt19937_64 rng(43);
  DeviceBuffer<float> x(n), w(c);
  DeviceBuffer<bf16> y(n);
  DeviceBuffer<e4m3> out(n), outT(n);
  DeviceBuffer<tcc_cuda::Fp8ScalingRecord> rec(1);
  ScaleBlock q;
  x.upload(randomRows<float>(rng, rows, c, 1.0));
  w.upload(randomRows<float>(rng, 1, c, 1.0));
  CUDA_CHECK(cudaMemset(rec.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  tcc_cuda::launch_fp8_quantize_delayed<bf16, e4m3>(rows, c, y.p, out.p, outT.p, q.p(), rec.p, 0);
  auto plain = [&] { tcc_cuda::launch_layer_norm<float, bf16>(x.p, w.p, nullptr, y.p, rows, c, 1e-5, true, 0); };
  auto banded = [&](int band) { CUDA_CHECK((tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
      x.p, w.p, nullptr, rows, c, 1e-5, true, out.p, outT.p, q.p(), rec.p, 0, band))); };
  auto outOnly = [&](int band) { CUDA_CHECK((tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
      x.p, w.p, nullptr, rows, c, 1e-5, true, out.p, nullptr, q.p(), rec.p, 0, band))); };
  for (int k = 0; k < 3; ++k) plain();
  for (int k = 0; k < 3; ++k) banded(32);
  for (int k = 0; k < 3; ++k) outOnly(32);
  for (int k = 0; k < 3; ++k) outOnly(8);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("plain %.4f  banded32 %.4f  out-only32 %.4f  out-only8 %.4f ms\n", timeMs(plain),
              timeMs([&] { banded(32); }), timeMs([&] { outOnly(32); }), timeMs([&] { outOnly(8); }));
  return 0;
}
