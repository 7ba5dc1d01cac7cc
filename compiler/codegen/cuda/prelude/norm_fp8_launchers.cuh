// Shared memory a block of layer_norm_fp8_cast_kernel may take for its band
// (band x (c + 4) bytes): two blocks an SM fit in the H100/H200's 227 KiB.
constexpr int64_t kNormFp8SharedBudget = 96 * 1024;

// The band rows launch_layer_norm_fp8_quantize takes for rows of c columns:
// the most of 32, 16, 8, 4 whose shared copy fits kNormFp8SharedBudget; 0
// when not even 4 rows fit (c beyond ~24K).
inline int layer_norm_fp8_band(int64_t c) {
  for (int band = 32; band >= 4; band /= 2)
    if (band * (c + 4) <= kNormFp8SharedBudget)
      return band;
  return 0;
}

// out / out_t (either may be null) = FP8 of y = layer_norm(x) rounded to Y
// (rows x c, and its transpose c x rows), scaled as
// launch_fp8_quantize_current / _delayed (record non-null) scale the stored
// y: the same bytes, scale (*q) and statistics as launch_layer_norm into a
// Y buffer followed by that cast, without y's bytes (prelude
// norm_fp8_kernels.cuh). Two launches: the amax pass (it returns at once
// under delayed scaling once the site has a scale), then the cast.
// Takes the vector form of launch_layer_norm only (c a multiple of its V,
// x, weight and bias 16-byte aligned: the statistics are summed in its
// order) and rows of at most ~24K columns; returns cudaErrorInvalidValue
// for others, launching nothing. `band`: rows a block casts at once (a
// multiple of 4, at most 32; 0: layer_norm_fp8_band(c)).
template <class T, class Y, class F8>
inline cudaError_t launch_layer_norm_fp8_quantize(const T *x, const T *weight, const T *bias,
                                                  int64_t rows, int64_t c, double eps, bool rms,
                                                  F8 *out, F8 *out_t, Fp8TensorScale *q,
                                                  Fp8ScalingRecord *record,
                                                  cudaStream_t stream, int band = 0) {
  static_assert(detail::IsFloating<T>::value && (sizeof(Y) == 2),
                "layer_norm_fp8: a float input normalized into 16-bit values");
  constexpr int V = detail::Vec16<T>::n < detail::Vec16<Y>::n ? detail::Vec16<T>::n
                                                                : detail::Vec16<Y>::n;
  if (band == 0)
    band = layer_norm_fp8_band(c);
  const bool vector = c % V == 0 && detail::aligned16(x) && (!weight || detail::aligned16(weight)) &&
                      (!bias || detail::aligned16(bias)) &&
                      reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (!vector || V % 2 != 0 || band < 4 || band > 32 || band % 4 != 0 ||
      band * (c + 4) > 227 * 1024)
    return cudaErrorInvalidValue;
  if (rows <= 0 || c <= 0) {
    detail::fp8_empty_scale_kernel<<<1, 1, 0, stream>>>(q);
    return cudaSuccess;
  }
  const acc_t<T> e = static_cast<acc_t<T>>(eps);
  float *partials =
      reinterpret_cast<float *>(reinterpret_cast<char *>(q) + sizeof(Fp8TensorScale));
  const int64_t cap = record != nullptr ? kFp8DelayedAmaxBlocks : kFp8AmaxPartials;
  const int64_t wanted = grid_for(rows, detail::kNormWarps);
  const int64_t amax_blocks = wanted < cap ? wanted : cap;
  detail::layer_norm_fp8_amax_kernel<V, T, Y>
      <<<static_cast<unsigned>(amax_blocks), detail::kNormWarps * 32, 0, stream>>>(
          x, weight, bias, rows, c, e, rms, partials, &q->stats, record,
          record != nullptr ? &q->unused[0] : nullptr);
  // The band's shared copy only when the kernel writes out_t from it.
  const size_t shared =
      out_t != nullptr ? static_cast<size_t>(band) * static_cast<size_t>(c + 4) : 0;
  auto kernel = detail::layer_norm_fp8_cast_kernel<V, T, Y, F8>;
  if (shared > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared));
    if (err != cudaSuccess)
      return err;
  }
  const int64_t bands = (rows + band - 1) / band;
  const int64_t blocks = bands < kFp8GridBlocks ? bands : kFp8GridBlocks;
  kernel<<<static_cast<unsigned>(blocks), detail::kNormWarps * 32, shared, stream>>>(
      x, weight, bias, rows, c, e, rms, band, out, out_t, &q->stats, partials,
      static_cast<int32_t>(amax_blocks), q, record);
  return cudaSuccess;
}

// dx = the norm's input gradient as launch_layer_norm_backward computes it
// (with dweight, dbias, dx_sum and the workspace as there), and dx's
// values rounded to Y cast to F8 as launch_fp8_quantize_current / _delayed
// (record non-null) cast a stored Y copy: out / out_t (either may be null),
// the scale at *q and its statistics, byte for byte those of the unfused
// pair (launch_layer_norm_backward with a Y dx_cast, then its cast),
// without the Y copy (prelude norm_fp8_kernels.cuh). Two launches of the
// backward kernel: the amax pass (it returns at once under delayed scaling
// once the site has a scale), then the backward that casts; then the
// parts' sums. Takes the vector kernel only (c a multiple of its V, which
// must be a multiple of 4; x, grad, dx, weight, addend and out 16-byte
// aligned) and, when the kernel writes out_t from bands, rows whose band
// of FP8 bytes fits shared memory beside the sums; returns
// cudaErrorInvalidValue for others, launching nothing.
// With both layouts, rows and c multiples of 16 and out_t 16-byte aligned,
// the backward writes out only and launch_fp8_transpose makes out_t from
// it (the same bytes): written band by band from the kernel, a band is
// its warps' rows, 8 bytes of each column of out_t at a time, and the
// band's two block-wide barriers stall the row loop (2026-12-07, H100, the
// 1B decoder's 8192 x 2048: 0.1549 ms banded against 0.1485 for the
// unfused pair).
template <class G, class T, class Y, class F8, class Fixed = detail::NormGradRuntime, class U>
inline cudaError_t launch_layer_norm_backward_fp8_quantize(
    const G *grad, const T *x, const T *weight, const T *addend, T *dx, T *dweight, T *dbias,
    U *dx_sum, bool sum_of_cast, acc_t<T> *workspace, int64_t parts, int64_t rows, int64_t c,
    double eps, bool rms, F8 *out, F8 *out_t, Fp8TensorScale *q, Fp8ScalingRecord *record,
    cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value && detail::IsFloating<G>::value && sizeof(Y) == 2,
                "layer_norm_backward_fp8: float rows, dx cast through a 16-bit Y");
  constexpr int VTG = detail::Vec16<T>::n < detail::Vec16<G>::n ? detail::Vec16<T>::n
                                                                  : detail::Vec16<G>::n;
  constexpr int V = VTG < detail::Vec16<Y>::n ? VTG : detail::Vec16<Y>::n;
  if constexpr (V % 4 != 0) {
    return cudaErrorInvalidValue;
  } else {
    if (!layer_norm_backward_agrees<Fixed>(c, dweight, dbias, dx_sum, sum_of_cast, rms))
      return cudaErrorInvalidValue;
    const bool sums = dweight != nullptr || dbias != nullptr || dx_sum != nullptr;
    if (sums && (workspace == nullptr || parts < 1))
      return cudaErrorInvalidValue;
    if (!sums)
      workspace = nullptr;
    const bool vector = c % V == 0 && detail::aligned16(x) && detail::aligned16(grad) &&
                        detail::aligned16(dx) && (!weight || detail::aligned16(weight)) &&
                        (!addend || detail::aligned16(addend)) &&
                        reinterpret_cast<uintptr_t>(out) % 16 == 0;
    const int slices =
        (dweight != nullptr ? 1 : 0) + (dbias != nullptr ? 1 : 0) + (dx_sum != nullptr ? 1 : 0);
    const int warps = layer_norm_backward_warps<T>(c, slices);
    // With both layouts wanted and rows, c multiples of 16, the kernel
    // writes out only and launch_fp8_transpose makes out_t from it; the
    // kernel's shared band (warps x (c + 4) bytes after the sums) is then
    // not given, nor when out_t is not wanted at all.
    const bool transpose_after = out != nullptr && out_t != nullptr && rows % 16 == 0 &&
                                 c % 16 == 0 && reinterpret_cast<uintptr_t>(out_t) % 16 == 0;
    const bool bands = out_t != nullptr && !transpose_after;
    const size_t shared = static_cast<size_t>(warps) * slices * c * sizeof(acc_t<T>) +
                          (bands ? static_cast<size_t>(warps) * (c + 4) : 0);
    if (!vector || shared > 227 * 1024)
      return cudaErrorInvalidValue;
    if (rows <= 0 || c <= 0) {
      detail::fp8_empty_scale_kernel<<<1, 1, 0, stream>>>(q);
      return launch_layer_norm_backward<G, T, Fixed>(grad, x, weight, addend, dx,
                                                     static_cast<Y *>(nullptr), dweight, dbias,
                                                     dx_sum, false, workspace, parts, rows, c,
                                                     eps, rms, stream);
    }
    const acc_t<T> e = static_cast<acc_t<T>>(eps);
    float *partials =
        reinterpret_cast<float *>(reinterpret_cast<char *>(q) + sizeof(Fp8TensorScale));
    const int64_t cap = record != nullptr ? kFp8DelayedAmaxBlocks : kFp8AmaxPartials;
    const int64_t wanted = grid_for(rows, warps);
    const int64_t amax_blocks = wanted < cap ? wanted : cap;
    detail::layer_norm_backward_kernel<V, G, T, Y, true, Fixed, detail::NormGradFp8Amax>
        <<<static_cast<unsigned>(amax_blocks), warps * 32, 0, stream>>>(
            grad, x, weight, addend, dx, static_cast<Y *>(nullptr), nullptr, false, false, false,
            sum_of_cast, rows, c, e, rms,
            detail::NormGradFp8Amax{partials, &q->stats, record,
                                    record != nullptr ? &q->unused[0] : nullptr, 0.0f});
    auto kernel =
        detail::layer_norm_backward_kernel<V, G, T, Y, true, Fixed, detail::NormGradFp8Cast<F8>>;
    if (shared > 48 * 1024) {
      cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(shared));
      if (err != cudaSuccess)
        return err;
    }
    const int64_t grid = sums ? parts : wanted;
    kernel<<<static_cast<unsigned>(grid), warps * 32, shared, stream>>>(
        grad, x, weight, addend, dx, static_cast<Y *>(nullptr), workspace, dweight != nullptr,
        dbias != nullptr, dx_sum != nullptr, sum_of_cast, rows, c, e, rms,
        detail::NormGradFp8Cast<F8>{out, bands ? out_t : nullptr, partials,
                                    static_cast<int32_t>(amax_blocks), q, record, 0.0f, 0.0f, 0u,
                                    0u, nullptr});
    if (transpose_after)
      launch_fp8_transpose<F8>(rows, c, out, out_t, stream);
    const int64_t slots = dx_sum != nullptr ? 3 : 2;
    if (sums)
      detail::layer_norm_sum_parts_kernel<T, U>
          <<<static_cast<unsigned>(grid_for(slots * c, 32)), detail::kNormSumWarps * 32, 0,
             stream>>>(workspace, parts, c, slots, dweight, dbias, dx_sum);
    return cudaSuccess;
  }
}
