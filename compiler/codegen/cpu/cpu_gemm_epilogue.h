// tcc CPU kernel prelude, GEMM with an epilogue (kern.gemm_epilogue,
// kern.gemm_dgelu, kern.gemm_bias_grad).
// Pasted into generated steps after cpu_prelude.h (compiler/codegen/
// CodegenSources.cmake); a direct #include (tests) must include
// cpu_prelude.h first.
//
// out (m, n) = act(op(a) x op(b) [+ bias]) [+ residual], aux = the sum before
// the activation. The product is accumulated in Acc (float for bf16 / f16
// and f32, double for f64) into a scratch matrix, then one loop applies the
// epilogue and rounds each output element once, as cuBLASLt's epilogue does.
#include <cmath>
#include <memory>
#include <new>
#include <type_traits>

namespace tcc_cpu {

enum GemmActivation { kActNone = 0, kActGeluTanh = 1, kActGeluErf = 2 };

// tanh is tcc_cpu::tanh (cpu_prelude.h): branch-free through exp, so the
// epilogue loops vectorize; std::tanh made GELU cost 9x its matrix product
// on gpt_char (docs/performance.md, 2026-11-25). f64 keeps std::tanh.
template <typename Acc> Acc gemm_activation(int act, Acc x) {
  if (act == kActGeluTanh)
    return Acc(0.5) * x *
           (Acc(1) + tcc_cpu::tanh(Acc(0.7978845608028654) * (x + Acc(0.044715) * x * x * x)));
  if (act == kActGeluErf)
    return Acc(0.5) * x * (Acc(1) + std::erf(x * Acc(0.7071067811865476)));
  return x;
}

// P: a's and b's element type (and aux's); O: out's, bias's and residual's
// (P, or float after a 16-bit P). bias, residual and aux may be null.
// kKernelNoMemory if the scratch matrices cannot be allocated.
template <typename P, typename O>
int32_t gemm_epilogue(bool ta, bool tb, int m, int n, int k, const P *a, const P *b,
                      const O *bias, const O *residual, int act, O *out, P *aux) {
  using Acc = acc_t<P>;
  const int64_t na = static_cast<int64_t>(m) * k, nb = static_cast<int64_t>(k) * n,
                nc = static_cast<int64_t>(m) * n;
  // The product goes straight into out (or aux) when that holds Acc values:
  // the loop below reads position i before writing it. out may be the
  // residual itself (an accumulation in place, tg-lower-to-kern), which the
  // product must not overwrite first; aux aliases nothing.
  Acc *product = nullptr;
  std::unique_ptr<Acc[]> scratch;
  if (std::is_same<P, Acc>::value && std::is_same<O, Acc>::value &&
      static_cast<const void *>(residual) != static_cast<const void *>(out))
    product = reinterpret_cast<Acc *>(out);
  else if (std::is_same<P, Acc>::value && aux)
    product = reinterpret_cast<Acc *>(aux);
  if (!product) {
    scratch.reset(new (std::nothrow) Acc[nc > 0 ? nc : 1]);
    if (!scratch)
      return kKernelNoMemory;
    product = scratch.get();
  }
  if (k == 0) // an empty sum (BLAS may leave c alone)
    for (int64_t i = 0; i < nc; ++i)
      product[i] = Acc(0);
  else {
    // The operands as Acc (a copy only for the 16-bit types).
    std::unique_ptr<Acc[]> wa, wb;
    const Acc *pa = reinterpret_cast<const Acc *>(a), *pb = reinterpret_cast<const Acc *>(b);
    if (!std::is_same<P, Acc>::value) {
      wa.reset(new (std::nothrow) Acc[na]);
      wb.reset(new (std::nothrow) Acc[nb]);
      if (!wa || !wb)
        return kKernelNoMemory;
      for (int64_t i = 0; i < na; ++i)
        wa[i] = Elem<P>::load(a[i]);
      for (int64_t i = 0; i < nb; ++i)
        wb[i] = Elem<P>::load(b[i]);
      pa = wa.get();
      pb = wb.get();
    }
    gemm<Acc>(ta, tb, m, n, k, Acc(1), pa, pb, Acc(0), product);
  }
  // One loop per (activation, aux, residual): no branch left inside, so
  // the compiler vectorizes it (tcc_cpu::tanh is branch-free).
  auto loop = [&](auto actTag, auto auxTag, auto residualTag) {
    constexpr int kAct = decltype(actTag)::value;
    constexpr bool kAux = decltype(auxTag)::value, kResidual = decltype(residualTag)::value;
#pragma omp parallel for if (nc >= 65536)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        int64_t i = r * n + c;
        Acc pre = product[i] + (bias ? static_cast<Acc>(Elem<O>::load(bias[c])) : Acc(0));
        if (kAux)
          aux[i] = Elem<P>::store(pre);
        Acc value = gemm_activation<Acc>(kAct, pre);
        if (kResidual)
          value += static_cast<Acc>(Elem<O>::load(residual[i]));
        out[i] = Elem<O>::store(static_cast<acc_t<O>>(value));
      }
  };
  auto withAct = [&](auto actTag) {
    using T = std::true_type;
    using F = std::false_type;
    if (aux && residual)
      loop(actTag, T{}, T{});
    else if (aux)
      loop(actTag, T{}, F{});
    else if (residual)
      loop(actTag, F{}, T{});
    else
      loop(actTag, F{}, F{});
  };
  if (act == kActGeluTanh)
    withAct(std::integral_constant<int, kActGeluTanh>{});
  else if (act == kActGeluErf)
    withAct(std::integral_constant<int, kActGeluErf>{});
  else
    withAct(std::integral_constant<int, kActNone>{});
  return kKernelOk;
}

template <typename Acc> Acc gelu_derivative(bool tanh_form, Acc x) {
  if (tanh_form) {
    Acc k = Acc(0.7978845608028654);
    Acc t = tcc_cpu::tanh(k * (x + Acc(0.044715) * x * x * x));
    return Acc(0.5) * (Acc(1) + t) +
           Acc(0.5) * x * (Acc(1) - t * t) * k * (Acc(1) + Acc(3 * 0.044715) * x * x);
  }
  Acc cdf = Acc(0.5) * (Acc(1) + std::erf(x * Acc(0.7071067811865476)));
  Acc pdf = std::exp(Acc(-0.5) * x * x) * Acc(0.3989422804014327);
  return cdf + x * pdf;
}

// out (m, n) = gelu'(pre) * (op(a) x op(b)) (kern.gemm_dgelu): the product
// accumulated in Acc, then one loop; each output rounded once.
template <typename P>
int32_t gemm_dgelu(bool ta, bool tb, int m, int n, int k, const P *a, const P *b,
                   const P *pre, bool tanh_form, P *out) {
  using Acc = acc_t<P>;
  const int64_t nc = static_cast<int64_t>(m) * n;
  // f32 / f64: the product straight into out (read back position by
  // position); 16-bit: into a float scratch matrix.
  std::unique_ptr<Acc[]> scratch;
  Acc *product = std::is_same<P, Acc>::value ? reinterpret_cast<Acc *>(out) : nullptr;
  if (!product) {
    scratch.reset(new (std::nothrow) Acc[nc > 0 ? nc : 1]);
    if (!scratch)
      return kKernelNoMemory;
    product = scratch.get();
  }
  if (std::is_same<P, Acc>::value) {
    if (k == 0)
      for (int64_t i = 0; i < nc; ++i)
        product[i] = Acc(0);
    else
      gemm<Acc>(ta, tb, m, n, k, Acc(1), reinterpret_cast<const Acc *>(a),
                reinterpret_cast<const Acc *>(b), Acc(0), product);
  } else {
    // 16-bit operands: float copies, multiplied by sgemm.
    const int64_t na = static_cast<int64_t>(m) * k, nb = static_cast<int64_t>(k) * n;
    std::unique_ptr<Acc[]> wa(new (std::nothrow) Acc[na > 0 ? na : 1]);
    std::unique_ptr<Acc[]> wb(new (std::nothrow) Acc[nb > 0 ? nb : 1]);
    if (!wa || !wb)
      return kKernelNoMemory;
    for (int64_t i = 0; i < na; ++i)
      wa[i] = Elem<P>::load(a[i]);
    for (int64_t i = 0; i < nb; ++i)
      wb[i] = Elem<P>::load(b[i]);
    if (k == 0)
      for (int64_t i = 0; i < nc; ++i)
        product[i] = Acc(0);
    else
      gemm<Acc>(ta, tb, m, n, k, Acc(1), wa.get(), wb.get(), Acc(0), product);
  }
  // One loop per form: no branch inside, so it vectorizes.
  auto loop = [&](auto tanhTag) {
    constexpr bool kTanh = decltype(tanhTag)::value;
#pragma omp parallel for if (nc >= 65536)
    for (int64_t i = 0; i < nc; ++i)
      out[i] = Elem<P>::store(
          product[i] * gelu_derivative<Acc>(kTanh, static_cast<Acc>(Elem<P>::load(pre[i]))));
  };
  if (tanh_form)
    loop(std::true_type{});
  else
    loop(std::false_type{});
  return kKernelOk;
}

// out (m, n) = op(a) x b and bias_grad (n) = the sums of b (k, n) over its
// k rows (kern.gemm_bias_grad: a weight gradient X^T dY and the bias
// gradient of the same dY). Both accumulated in Acc and rounded once.
template <typename P>
int32_t gemm_bias_grad(bool ta, int m, int n, int k, const P *a, const P *b, P *out,
                       P *bias_grad) {
  using Acc = acc_t<P>;
  const int64_t na = static_cast<int64_t>(m) * k, nb = static_cast<int64_t>(k) * n,
                nc = static_cast<int64_t>(m) * n;
  constexpr bool kAccOperands = std::is_same<P, Acc>::value;
  // The operands as Acc (a copy only for the 16-bit types); the product
  // straight into out when out holds Acc values.
  std::unique_ptr<Acc[]> wa, wb, scratch;
  const Acc *pa = reinterpret_cast<const Acc *>(a), *pb = reinterpret_cast<const Acc *>(b);
  Acc *product = reinterpret_cast<Acc *>(out);
  if (!kAccOperands) {
    wa.reset(new (std::nothrow) Acc[na > 0 ? na : 1]);
    wb.reset(new (std::nothrow) Acc[nb > 0 ? nb : 1]);
    scratch.reset(new (std::nothrow) Acc[nc > 0 ? nc : 1]);
    if (!wa || !wb || !scratch)
      return kKernelNoMemory;
    for (int64_t i = 0; i < na; ++i)
      wa[i] = Elem<P>::load(a[i]);
    for (int64_t i = 0; i < nb; ++i)
      wb[i] = Elem<P>::load(b[i]);
    pa = wa.get();
    pb = wb.get();
    product = scratch.get();
  }
  if (k == 0) // an empty sum (BLAS may leave c alone)
    for (int64_t i = 0; i < nc; ++i)
      product[i] = Acc(0);
  else
    gemm<Acc>(ta, false, m, n, k, Acc(1), pa, pb, Acc(0), product);
  if (!kAccOperands)
    for (int64_t i = 0; i < nc; ++i)
      out[i] = Elem<P>::store(product[i]);
  std::unique_ptr<Acc[]> sums(new (std::nothrow) Acc[n > 0 ? n : 1]);
  if (!sums)
    return kKernelNoMemory;
  for (int64_t j = 0; j < n; ++j)
    sums[j] = Acc(0);
  for (int64_t r = 0; r < k; ++r) // row by row: b is read in memory order
    for (int64_t j = 0; j < n; ++j)
      sums[j] += pb[r * n + j];
  for (int64_t j = 0; j < n; ++j)
    bias_grad[j] = Elem<P>::store(sums[j]);
  return kKernelOk;
}

} // namespace tcc_cpu
