// out (rows, c) = (x - mean) * rstd * weight + bias per row (rms: x * rstd
// * weight), statistics in acc_t<T>; weight and bias (c) of T or null; out
// of any float type Y (the f32 residual stream normalized straight into a
// bf16 matmul operand), rounded once per element. One warp per row, 8 per
// block; 16-byte accesses when every pointer is 16-byte aligned and c a
// multiple of the vector, else scalar. Deterministic (fixed shuffle order).
template <class T, class Y>
inline void launch_layer_norm(const T *x, const T *weight, const T *bias, Y *out,
                              int64_t rows, int64_t c, double eps, bool rms,
                              cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value && detail::IsFloating<Y>::value,
                "layer_norm: float, double, bf16 or f16");
  if (rows <= 0 || c <= 0)
    return;
  constexpr int V = detail::Vec16<T>::n < detail::Vec16<Y>::n ? detail::Vec16<T>::n
                                                                : detail::Vec16<Y>::n;
  const bool vector = c % V == 0 && detail::aligned16(x) && detail::aligned16(out) &&
                      (!weight || detail::aligned16(weight)) &&
                      (!bias || detail::aligned16(bias));
  const int threads = detail::kNormWarps * 32;
  const unsigned blocks = static_cast<unsigned>(grid_for(rows, detail::kNormWarps));
  const acc_t<T> e = static_cast<acc_t<T>>(eps);
  if (vector)
    detail::layer_norm_forward_kernel<V, T, Y>
        <<<blocks, threads, 0, stream>>>(x, weight, bias, out, rows, c, e, rms);
  else
    detail::layer_norm_forward_kernel<1, T, Y>
        <<<blocks, threads, 0, stream>>>(x, weight, bias, out, rows, c, e, rms);
}

// Warps per block of the backward: as many (at most 8) as fit their
// shared-memory slices (c of acc_t<T> for each of dweight, dbias and the dx
// sum wanted) in kNormBackwardSharedBudget, at least one.
template <class T> inline int layer_norm_backward_warps(int64_t c, int slices) {
  if (slices == 0)
    return detail::kNormWarps;
  const int64_t fit = detail::kNormBackwardSharedBudget /
                      (slices * c * static_cast<int64_t>(sizeof(acc_t<T>)));
  return fit < 1 ? 1 : (fit > detail::kNormWarps ? detail::kNormWarps : static_cast<int>(fit));
}

// A backward call's facts known when the step is generated: the row length
// C, which sums are wanted (dweight, dbias, dx's column sum, of the cast
// with SumOfCast) and rms. Given as launch_layer_norm_backward's Fixed, the
// kernel is compiled for them (detail::layer_norm_backward_kernel says what
// that saves); the launcher returns cudaErrorInvalidValue when the
// arguments say otherwise.
template <int64_t C, bool WeightSum, bool BiasSum, bool DxSum, bool SumOfCast, bool Rms>
struct NormGradFixed {
  static_assert(C > 0, "NormGradFixed: a row length");
  static_assert(!SumOfCast || DxSum, "NormGradFixed: SumOfCast is of dx's column sum");
  static constexpr bool kKnown = true;
  static constexpr int64_t kC = C;
  static constexpr bool kWeightSum = WeightSum, kBiasSum = BiasSum, kDxSum = DxSum,
                        kSumOfCast = SumOfCast, kRms = Rms;
};

// Whether a backward call's arguments are what its Fixed says (always for
// detail::NormGradRuntime); the launchers refuse a call that disagrees.
template <class Fixed, class T, class U>
inline bool layer_norm_backward_agrees(int64_t c, const T *dweight, const T *dbias,
                                       const U *dx_sum, bool sum_of_cast, bool rms) {
  if constexpr (Fixed::kKnown)
    return c == Fixed::kC && (dweight != nullptr) == Fixed::kWeightSum &&
           (dbias != nullptr) == Fixed::kBiasSum && (dx_sum != nullptr) == Fixed::kDxSum &&
           sum_of_cast == Fixed::kSumOfCast && rms == Fixed::kRms;
  return true;
}

// dx = rstd * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)), dx_hat
// = grad * weight (rms: without mean(dx_hat)), statistics recomputed from x;
// dweight = sum over rows of grad * x_hat, dbias = sum of grad (each when
// non-null); with an addend (of T: the residual stream's gradient), dx is
// written plus it. grad has any float type G. dx_cast (of any float type Y,
// or null): dx's stored values converted to Y as well. dx_sum (c, of any
// float type U, or null): the sum over rows of dx's stored values (of
// dx_cast's with sum_of_cast). With dweight, dbias or dx_sum, `workspace`
// is (parts, slots, c) of acc_t<T> (parts = tcc::kern::normGradParts(rows),
// slots = 3 with dx_sum, else 2: tcc::kern::normGradSlots):
// the backward runs exactly `parts` blocks, each writing its rows' partial
// sums there, and a second kernel adds the parts in one fixed order:
// deterministic, no atomics. Returns the launch error of a row too long for shared memory
// (c * sizeof(acc_t<T>) per sum wanted, beyond the device's opt-in limit). cache_grad:
// keep the grad row (and, where it fits, the addend's) in registers as
// well as x's (both kernels are tested; the default is the faster on an
// H200 at GPT-2's shape). Fixed: detail::NormGradRuntime, or the call's
// NormGradFixed.
template <class G, class T, class Fixed = detail::NormGradRuntime, class Y, class U>
inline cudaError_t launch_layer_norm_backward(const G *grad, const T *x, const T *weight,
                                              const T *addend, T *dx, Y *dx_cast,
                                              T *dweight, T *dbias, U *dx_sum,
                                              bool sum_of_cast, acc_t<T> *workspace,
                                              int64_t parts, int64_t rows, int64_t c,
                                              double eps, bool rms, cudaStream_t stream,
                                              bool cache_grad = true) {
  static_assert(detail::IsFloating<T>::value && detail::IsFloating<G>::value &&
                    detail::IsFloating<Y>::value && detail::IsFloating<U>::value,
                "layer_norm_backward: float, double, bf16 or f16");
  if (rows <= 0 || c <= 0) {
    // No rows: the sums are zero (a reduction over nothing).
    for (T *v : {dweight, dbias})
      if (v && c > 0)
        if (cudaError_t e = cudaMemsetAsync(v, 0, c * sizeof(T), stream); e != cudaSuccess)
          return e;
    if (dx_sum && c > 0)
      return cudaMemsetAsync(dx_sum, 0, c * sizeof(U), stream);
    return cudaSuccess;
  }
  if (sum_of_cast && dx_cast == nullptr)
    return cudaErrorInvalidValue;
  if (!layer_norm_backward_agrees<Fixed>(c, dweight, dbias, dx_sum, sum_of_cast, rms))
    return cudaErrorInvalidValue;
  const bool sums = dweight != nullptr || dbias != nullptr || dx_sum != nullptr;
  if (!sums)
    workspace = nullptr;
  else if (workspace == nullptr || parts < 1)
    return cudaErrorInvalidValue;
  constexpr int VTG = detail::Vec16<T>::n < detail::Vec16<G>::n ? detail::Vec16<T>::n
                                                                  : detail::Vec16<G>::n;
  constexpr int V = VTG < detail::Vec16<Y>::n ? VTG : detail::Vec16<Y>::n;
  const bool vector = c % V == 0 && detail::aligned16(x) && detail::aligned16(grad) &&
                      detail::aligned16(dx) && (!weight || detail::aligned16(weight)) &&
                      (!addend || detail::aligned16(addend)) &&
                      (!dx_cast || detail::aligned16(dx_cast));
  const int slices =
      (dweight != nullptr ? 1 : 0) + (dbias != nullptr ? 1 : 0) + (dx_sum != nullptr ? 1 : 0);
  const int warps = layer_norm_backward_warps<T>(c, slices);
  const size_t shared = static_cast<size_t>(warps) * slices * c * sizeof(acc_t<T>);
  const int64_t grid = sums ? parts : grid_for(rows, warps);
  const acc_t<T> e = static_cast<acc_t<T>>(eps);
  auto kernel = cache_grad ? detail::layer_norm_backward_kernel<1, G, T, Y, true, Fixed>
                           : detail::layer_norm_backward_kernel<1, G, T, Y, false, Fixed>;
  // A fixed row length that is no multiple of V never takes the vector
  // kernels: not compiled.
  if constexpr (!Fixed::kKnown || Fixed::kC % V == 0)
    if (vector)
      kernel = cache_grad ? detail::layer_norm_backward_kernel<V, G, T, Y, true, Fixed>
                          : detail::layer_norm_backward_kernel<V, G, T, Y, false, Fixed>;
  if (shared > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared));
    if (err != cudaSuccess)
      return err;
  }
  kernel<<<static_cast<unsigned>(grid), warps * 32, shared, stream>>>(
      grad, x, weight, addend, dx, dx_cast, workspace, dweight != nullptr, dbias != nullptr,
      dx_sum != nullptr, sum_of_cast, rows, c, e, rms, detail::NormGradNoFp8{});
  const int64_t slots = dx_sum != nullptr ? 3 : 2;
  if (sums)
    detail::layer_norm_sum_parts_kernel<T, U>
        <<<static_cast<unsigned>(grid_for(slots * c, 32)), detail::kNormSumWarps * 32, 0,
           stream>>>(workspace, parts, c, slots, dweight, dbias, dx_sum);
  return cudaSuccess;
}

