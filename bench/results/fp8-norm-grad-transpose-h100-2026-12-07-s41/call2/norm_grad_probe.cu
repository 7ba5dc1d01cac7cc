// Throwaway (session 41): the 1B decoder's RMS backward + e5m2 cast, timed
// and profiled by variant. Not part of the suite.
#define main norm_grad_fp8_test_main
#include "tests/cuda/norm_grad_fp8_test.cu"
#undef main
int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "time";
  const int64_t rows = 8192, c = 2048, n = rows * c;
  const int64_t parts = tcc::kern::normGradParts(rows);
  std::mt19937_64 rng(41);
  DeviceBuffer<float> x(n), a(n), w(c), dx(n), dw(c);
  DeviceBuffer<bf16> g(n), y(n);
  DeviceBuffer<float> ws(parts * tcc::kern::normGradSlots(false) * c);
  DeviceBuffer<e5m2> out(n), outT(n);
  DeviceBuffer<tcc_cuda::Fp8ScalingRecord> rec(1);
  ScaleBlock q;
  x.upload(randomRows<float>(rng, rows, c, 1.0));
  a.upload(randomRows<float>(rng, rows, c, 1e-3));
  g.upload(randomRows<bf16>(rng, rows, c, 1e-3));
  w.upload(randomRows<float>(rng, 1, c, 1.0));
  CUDA_CHECK(cudaMemset(rec.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  using Fixed = tcc_cuda::NormGradFixed<2048, true, false, false, false, true>;
  auto plain = [&] {
    CUDA_CHECK((tcc_cuda::launch_layer_norm_backward<bf16, float, Fixed>(
        g.p, x.p, w.p, a.p, dx.p, y.p, dw.p, static_cast<float *>(nullptr),
        static_cast<float *>(nullptr), false, ws.p, parts, rows, c, 1e-5, true, 0)));
  };
  auto cast = [&] {
    tcc_cuda::launch_fp8_quantize_delayed<bf16, e5m2>(rows, c, y.p, out.p, outT.p, q.p(), rec.p, 0);
  };
  auto castPlainOnly = [&] {
    tcc_cuda::launch_fp8_quantize_delayed<bf16, e5m2>(rows, c, y.p, out.p, nullptr, q.p(), rec.p, 0);
  };
  auto fused = [&](e5m2 *t) {
    CUDA_CHECK((tcc_cuda::launch_layer_norm_backward_fp8_quantize<bf16, float, bf16, e5m2, Fixed>(
        g.p, x.p, w.p, a.p, dx.p, dw.p, static_cast<float *>(nullptr),
        static_cast<float *>(nullptr), false, ws.p, parts, rows, c, 1e-5, true, out.p, t,
        q.p(), rec.p, 0)));
  };
  DeviceBuffer<e5m2> outT2(n);
  auto transpose = [&] { tcc_cuda::launch_fp8_transpose<e5m2>(rows, c, out.p, outT2.p, 0); };
  plain(); cast();
  CUDA_CHECK(cudaDeviceSynchronize());
  {
    fused(outT.p);
    CUDA_CHECK(cudaDeviceSynchronize());
    auto a1 = out.download(); auto t1 = outT.download();
    fused(nullptr); transpose();
    CUDA_CHECK(cudaDeviceSynchronize());
    auto a2 = out.download(); auto t2 = outT2.download();
    size_t bad = 0;
    for (size_t i = 0; i < a1.size(); ++i) bad += a1[i].bits != a2[i].bits || t1[i].bits != t2[i].bits;
    std::printf("split vs banded: %zu of %zu bytes differ\n", bad, 2 * a1.size());
  }
  if (mode == "time") {
    for (int round = 0; round < 3; ++round) {
      const float tPlain = timeMs(plain), tCast = timeMs(cast), tCastPlain = timeMs(castPlainOnly);
      const float tFused = timeMs([&] { fused(outT.p); }), tFusedOut = timeMs([&] { fused(nullptr); });
      const float tTrans = timeMs(transpose);
      const float tSplit = timeMs([&] { fused(nullptr); transpose(); });
      std::printf("round %d: plain %.4f  cast %.4f  cast(out only) %.4f  pair %.4f  fused %.4f  fused(out only) %.4f  transpose %.4f  fused(out)+transpose %.4f ms\n",
                  round, tPlain, tCast, tCastPlain, tPlain + tCast, tFused, tFusedOut, tTrans, tSplit);
    }
  } else {
    for (int i = 0; i < 3; ++i) {
      if (mode == "plain") plain();
      else if (mode == "cast") cast();
      else if (mode == "fused") fused(outT.p);
      else if (mode == "fusedout") fused(nullptr);
      else if (mode == "transpose") transpose();
    }
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  return 0;
}
