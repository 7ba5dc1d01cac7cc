// The float64 reference of layer norm and RMSNorm, forward and backward,
// shared by the CPU kernels' test (tests/codegen/CpuNormTest.cpp) and the
// CUDA kernels' (tests/cuda/norm_kernels_test.cu): y = xhat w + b with
// xhat = (x - mean) rstd (no mean for RMSNorm), and the gradients of a loss
// whose gradient with respect to y is g: dx, dw = sum over rows of g xhat,
// db = sum over rows of g. w, b: null for none (1 and 0).
#ifndef TCC_TESTS_REFERENCE_NORM_REFERENCE_H
#define TCC_TESTS_REFERENCE_NORM_REFERENCE_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace tcc_test {

struct NormReference {
  std::vector<double> y, dx, dw, db;
};

inline NormReference normReference(const std::vector<double> &x, const std::vector<double> &g,
                                   const std::vector<double> *w, const std::vector<double> *b,
                                   int64_t rows, int64_t c, double eps, bool rms) {
  NormReference ref{std::vector<double>(rows * c), std::vector<double>(rows * c),
                    std::vector<double>(c), std::vector<double>(c)};
  std::vector<double> xhat(c);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &x[r * c], *gr = &g[r * c];
    double mean = 0, sq = 0;
    if (!rms) {
      for (int64_t j = 0; j < c; ++j)
        mean += xr[j];
      mean /= c;
    }
    for (int64_t j = 0; j < c; ++j)
      sq += (xr[j] - mean) * (xr[j] - mean);
    double rstd = 1 / std::sqrt(sq / c + eps), sumD = 0, sumDot = 0;
    for (int64_t j = 0; j < c; ++j) {
      xhat[j] = (xr[j] - mean) * rstd;
      ref.y[r * c + j] = xhat[j] * (w ? (*w)[j] : 1) + (b ? (*b)[j] : 0);
      double d = gr[j] * (w ? (*w)[j] : 1);
      sumD += d;
      sumDot += d * xhat[j];
      ref.dw[j] += gr[j] * xhat[j];
      ref.db[j] += gr[j];
    }
    double meanD = rms ? 0 : sumD / c, meanDot = sumDot / c;
    for (int64_t j = 0; j < c; ++j)
      ref.dx[r * c + j] = rstd * (gr[j] * (w ? (*w)[j] : 1) - meanD - xhat[j] * meanDot);
  }
  return ref;
}

} // namespace tcc_test

#endif
