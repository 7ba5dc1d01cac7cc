// tcc CPU kernel prelude — pasted by the CPU code generator at the top of
// every generated step.cpp, so the generated source is self-contained.
// Kernels whose loops depend on a shape (elementwise with broadcasting,
// reductions) are generated inline instead; these are the fixed-shape-family
// kernels. Matrix products go to BLAS (OpenBLAS, Debian libopenblas-dev).
#include <cmath>
#include <cstddef>
#include <cstdint>

extern "C" {
// CBLAS, declared here so the generated file needs no BLAS headers.
enum { TCC_CBLAS_ROW_MAJOR = 101, TCC_CBLAS_NO_TRANS = 111, TCC_CBLAS_TRANS = 112 };
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc);
void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb,
                 double beta, double *c, int ldc);
}

namespace tcc_cpu {

// max over row[0..c): subtracted before exp so softmax never overflows.
template <typename T> T row_max(const T *row, int64_t c) {
  T m = row[0];
  for (int64_t j = 1; j < c; ++j)
    m = row[j] > m ? row[j] : m;
  return m;
}

// c (M,N) = alpha * op(a) x op(b) + beta * c; a is (M,K) or (K,M) when ta,
// b is (K,N) or (N,K) when tb; all row-major.
inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha,
                 const float *a, const float *b, float beta, float *c) {
  cblas_sgemm(TCC_CBLAS_ROW_MAJOR, ta ? TCC_CBLAS_TRANS : TCC_CBLAS_NO_TRANS,
              tb ? TCC_CBLAS_TRANS : TCC_CBLAS_NO_TRANS, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}
inline void gemm(bool ta, bool tb, int m, int n, int k, double alpha,
                 const double *a, const double *b, double beta, double *c) {
  cblas_dgemm(TCC_CBLAS_ROW_MAJOR, ta ? TCC_CBLAS_TRANS : TCC_CBLAS_NO_TRANS,
              tb ? TCC_CBLAS_TRANS : TCC_CBLAS_NO_TRANS, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

// loss (N) = logsumexp(logits[n]) - logits[n, labels[n]]; logits is (N,C).
// Returns false if a label is outside [0, C).
template <typename T, typename L>
bool softmax_cross_entropy(int64_t n, int64_t c, const T *logits,
                           const L *labels, T *loss) {
  for (int64_t i = 0; i < n; ++i) {
    const T *row = logits + i * c;
    if (labels[i] < 0 || labels[i] >= c)
      return false;
    T maxv = row_max(row, c);
    T sum = 0;
    for (int64_t j = 0; j < c; ++j)
      sum += std::exp(row[j] - maxv);
    loss[i] = std::log(sum) + maxv - row[labels[i]];
  }
  return true;
}

// out (N,C) = (softmax(logits[n]) - onehot(labels[n])) * grad[n].
template <typename T, typename L>
bool softmax_cross_entropy_grad(int64_t n, int64_t c, const T *logits,
                                const L *labels, const T *grad, T *out) {
  for (int64_t i = 0; i < n; ++i) {
    const T *row = logits + i * c;
    T *orow = out + i * c;
    if (labels[i] < 0 || labels[i] >= c)
      return false;
    T maxv = row_max(row, c);
    T sum = 0;
    for (int64_t j = 0; j < c; ++j) {
      orow[j] = std::exp(row[j] - maxv);
      sum += orow[j];
    }
    T scale = grad[i] / sum;
    for (int64_t j = 0; j < c; ++j)
      orow[j] *= scale;
    orow[labels[i]] -= grad[i];
  }
  return true;
}

// param (n) -= lr * grad.
template <typename T>
void sgd_update(int64_t n, T *param, const T *grad, float lr) {
  for (int64_t i = 0; i < n; ++i)
    param[i] -= static_cast<T>(lr) * grad[i];
}

} // namespace tcc_cpu
