// tcc CPU kernel prelude, fused normalization (kern.layer_norm and
// kern.layer_norm_grad; batch norm's two reductions at the end). Pasted into generated steps after cpu_attention.h
// (compiler/codegen/CodegenSources.cmake); tests include it after
// cpu_prelude.h.
//
// One pass structure per row: the statistics (mean and biased variance, or
// the mean square for rms) are computed from the row itself, never saved:
// row sums in double, elementwise math in acc_t<T> (float for bf16 / f16 /
// f32, double for f64). The gradient's
// weight / bias sums are split into `parts` fixed row ranges whose partial
// sums go to the workspace and are then added in part order, so the result
// does not depend on the thread count.
#include <cmath>

namespace tcc_cpu {

namespace norm_detail {

// mean (0 for rms) and 1 / sqrt(var + eps) of one row of c elements. The
// row sums accumulate in double, as the CPU's kern.reduce row sums do (the
// statistics then match those of the decomposed form closely).
template <typename T, typename A>
inline void row_statistics(const T *x, int64_t c, double eps, bool rms, A &mean, A &rstd) {
  double m = 0;
  if (!rms) {
    for (int64_t j = 0; j < c; ++j)
      m += static_cast<double>(Elem<T>::load(x[j]));
    m = static_cast<double>(static_cast<A>(m / static_cast<double>(c)));
  }
  double squares = 0;
  for (int64_t j = 0; j < c; ++j) {
    const A d = Elem<T>::load(x[j]) - static_cast<A>(m);
    squares += static_cast<double>(d * d);
  }
  mean = static_cast<A>(m);
  rstd = static_cast<A>(1) /
         std::sqrt(static_cast<A>(squares / static_cast<double>(c)) + static_cast<A>(eps));
}

template <typename Y, typename A> inline Y store_as(A v) {
  return Elem<Y>::store(static_cast<acc_t<Y>>(v));
}

} // namespace norm_detail

// out (rows, c) = (x - mean) * rstd * weight + bias per row (rms: x * rstd
// * weight); weight and bias (c) of T or null; out of any float type Y,
// rounded once per element.
template <typename T, typename Y>
void layer_norm_forward(int64_t rows, int64_t c, const T *x, const T *weight, const T *bias,
                        double eps, bool rms, Y *out) {
  using A = acc_t<T>;
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(rows) * c > kParallelWork)
#endif
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * c;
    Y *o = out + r * c;
    A mean, rstd;
    norm_detail::row_statistics(xr, c, eps, rms, mean, rstd);
    for (int64_t j = 0; j < c; ++j) {
      A y = (Elem<T>::load(xr[j]) - mean) * rstd;
      if (weight)
        y *= Elem<T>::load(weight[j]);
      if (bias)
        y += Elem<T>::load(bias[j]);
      o[j] = norm_detail::store_as<Y>(y);
    }
  }
}

// With x_hat = (x - mean) * rstd and dx_hat = grad * weight (grad without
// weight): dx = rstd * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat))
// (rms: without mean(dx_hat)); dweight = sum over rows of grad * x_hat,
// dbias = sum over rows of grad (each written when non-null); with an
// addend (the residual gradient, of T), dx is written plus it. grad has any
// float type G. dx_cast (of any float type Y, or null): dx's stored values
// converted to Y as well (a cast of dx folded in). dx_sum (c, of any float
// type U, or null): the sum over rows of dx's stored values (of dx_cast's
// with sum_of_cast; a bias gradient folded in). workspace: (parts, slots,
// c) of acc_t<T>, slots 3 with dx_sum else 2, needed when dweight, dbias or
// dx_sum is wanted; part p covers rows [p * rows / parts, (p + 1) * rows /
// parts).
template <typename G, typename T, typename Y, typename U>
void layer_norm_backward(int64_t rows, int64_t c, const G *grad, const T *x, const T *weight,
                         const T *addend, double eps, bool rms, T *dx, Y *dx_cast, T *dweight,
                         T *dbias, U *dx_sum, bool sum_of_cast, acc_t<T> *workspace,
                         int64_t parts) {
  using A = acc_t<T>;
  const bool sums = dweight || dbias || dx_sum;
  const int64_t slots = dx_sum ? 3 : 2;
  if (!sums)
    parts = 1;
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(rows) * c > kParallelWork)
#endif
  for (int64_t p = 0; p < parts; ++p) {
    A *dw_part = sums ? workspace + p * slots * c : nullptr;
    A *db_part = sums ? dw_part + c : nullptr;
    A *dx_part = dx_sum ? dw_part + 2 * c : nullptr;
    if (sums)
      for (int64_t j = 0; j < slots * c; ++j)
        dw_part[j] = 0;
    const int64_t begin = p * rows / parts, end = (p + 1) * rows / parts;
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = x + r * c;
      const G *gr = grad + r * c;
      A mean, rstd;
      norm_detail::row_statistics(xr, c, eps, rms, mean, rstd);
      double sum_dxhat = 0, sum_dot = 0; // row sums in double, as row_statistics
      for (int64_t j = 0; j < c; ++j) {
        const A g = static_cast<A>(Elem<G>::load(gr[j]));
        const A xhat = (Elem<T>::load(xr[j]) - mean) * rstd;
        const A dxhat = weight ? g * Elem<T>::load(weight[j]) : g;
        sum_dxhat += dxhat;
        sum_dot += dxhat * xhat;
        if (sums) {
          dw_part[j] += g * xhat;
          db_part[j] += g;
        }
      }
      const A mean_dxhat = rms ? static_cast<A>(0) : static_cast<A>(sum_dxhat / c);
      const A mean_dot = static_cast<A>(sum_dot / c);
      for (int64_t j = 0; j < c; ++j) {
        const A g = static_cast<A>(Elem<G>::load(gr[j]));
        const A xhat = (Elem<T>::load(xr[j]) - mean) * rstd;
        const A dxhat = weight ? g * Elem<T>::load(weight[j]) : g;
        A d = rstd * (dxhat - mean_dxhat - xhat * mean_dot);
        if (addend)
          d += Elem<T>::load(addend[r * c + j]);
        dx[r * c + j] = Elem<T>::store(d);
        if (dx_cast) // from the stored value, as a separate cast reads it
          dx_cast[r * c + j] = norm_detail::store_as<Y>(Elem<T>::load(dx[r * c + j]));
        if (dx_sum) // the values the folded reduce_sum reads
          dx_part[j] += sum_of_cast ? static_cast<A>(Elem<Y>::load(dx_cast[r * c + j]))
                                    : static_cast<A>(Elem<T>::load(dx[r * c + j]));
      }
    }
  }
  if (!sums)
    return;
  for (int64_t j = 0; j < c; ++j) {
    A w = 0, b = 0, t = 0;
    for (int64_t p = 0; p < parts; ++p) {
      w += workspace[p * slots * c + j];
      b += workspace[p * slots * c + c + j];
      if (dx_sum)
        t += workspace[p * slots * c + 2 * c + j];
    }
    if (dweight)
      dweight[j] = Elem<T>::store(w);
    if (dbias)
      dbias[j] = Elem<T>::store(b);
    if (dx_sum)
      dx_sum[j] = norm_detail::store_as<U>(t);
  }
}

// Batch norm's reductions (kern.batch_norm_stats / _grad_sums): x (n, c, s)
// read per channel (n runs of s values, c * s apart), sums in double,
// threads over channels, so the result does not depend on the thread
// count. (The GPU's (P, 2, C) workspace operand is not needed here.)
// mean, var (c): sums of x - K with K = x[0, c, 0], var = max(S2 / n -
// (S1 / n)^2, 0) biased, as the GPU kernels.
template <typename T, typename A>
void batch_norm_stats(int64_t n, int64_t c, int64_t s, const T *x, A *mean, A *var) {
#pragma omp parallel for if (static_cast<double>(n) * c * s > kParallelWork)
  for (int64_t ch = 0; ch < c; ++ch) {
    const double shift = static_cast<double>(Elem<T>::load(x[ch * s]));
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T *run = x + (i * c + ch) * s;
      for (int64_t j = 0; j < s; ++j) {
        const double d = static_cast<double>(Elem<T>::load(run[j])) - shift;
        s1 += d;
        s2 += d * d;
      }
    }
    const double count = static_cast<double>(n * s), m = s1 / count, v = s2 / count - m * m;
    mean[ch] = static_cast<A>(shift + m);
    var[ch] = static_cast<A>(v > 0 ? v : 0);
  }
}

// grad_sum = sum(g), grad_xhat_sum = rstd * sum(g * (x - mean)) (c).
template <typename G, typename T, typename A>
void batch_norm_grad_sums(int64_t n, int64_t c, int64_t s, const G *g, const T *x,
                          const A *mean, const A *rstd, A *grad_sum, A *grad_xhat_sum) {
#pragma omp parallel for if (static_cast<double>(n) * c * s > kParallelWork)
  for (int64_t ch = 0; ch < c; ++ch) {
    const double m = static_cast<double>(mean[ch]);
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = (i * c + ch) * s;
      for (int64_t j = 0; j < s; ++j) {
        const double gv = static_cast<double>(Elem<G>::load(g[at + j]));
        s1 += gv;
        s2 += gv * (static_cast<double>(Elem<T>::load(x[at + j])) - m);
      }
    }
    grad_sum[ch] = static_cast<A>(s1);
    grad_xhat_sum[ch] = static_cast<A>(s2 * static_cast<double>(rstd[ch]));
  }
}

} // namespace tcc_cpu
