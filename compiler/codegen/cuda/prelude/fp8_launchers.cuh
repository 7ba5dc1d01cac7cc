// FP8 casts for tg-amp's fp8 precision (issue 37).
//
// out = F8(in * *scale), nearest even, saturating at +-Fp8Format<F8>::kMax
// (NaN stays NaN), row-major rows x cols, and/or its transpose out_t
// (cols x rows), in one pass: cuBLASLt's FP8 products read both operands
// K-contiguous, so the backward's X^T and dY^T come from the same read as
// the forward's X. Either output may be null. *stats accumulates (zero it
// first): the input's amax, saturated and flushed-to-zero elements.
// T: float, bf16 or f16; F8: e4m3 or e5m2. 16-bit inputs whose rows and
// cols are multiples of 8, all pointers 16-byte aligned, take the vector
// form (16-byte loads, 8-byte stores); the rest the scalar one. Deterministic except for the
// order of the statistics' atomics (their results do not depend on it).
template <class T, class F8, class Src = detail::Fp8Plain<T>>
inline void launch_fp8_cast_transpose(int64_t rows, int64_t cols,
                                      const detail::Fp8Source<Src> in, const float *scale,
                                      F8 *out, F8 *out_t,
                                      Fp8CastStats *stats, cudaStream_t stream,
                                      const float *partials = nullptr,
                                      int32_t partial_count = 0,
                                      Fp8TensorScale *current = nullptr,
                                      Fp8ScalingRecord *record = nullptr) {
  static_assert(std::is_same<T, float>::value || std::is_same<T, bf16>::value ||
                    std::is_same<T, f16>::value,
                "fp8 casts read float, bf16 or f16");
  if (rows <= 0 || cols <= 0)
    return;
  const bool aligned = in.aligned16() && ((reinterpret_cast<uintptr_t>(out) |
                                           reinterpret_cast<uintptr_t>(out_t)) % 16) == 0;
  if constexpr (sizeof(T) == 2) {
    const int64_t tiles = ((rows + 63) / 64) * ((cols + 63) / 64);
    if (aligned && rows % 8 == 0 && cols % 8 == 0 && tiles < (int64_t{1} << 31)) {
      const int64_t blocks = tiles < kFp8GridBlocks ? tiles : kFp8GridBlocks;
      detail::fp8_cast_transpose_vec8_kernel<T, F8, Src><<<static_cast<unsigned>(blocks), 256,
                                                           0, stream>>>(
          rows, cols, in, scale, out, out_t, stats, partials, partial_count, current, record);
      return;
    }
  }
  const int64_t tiles = ((rows + 31) / 32) * ((cols + 31) / 32);
  const int64_t blocks = tiles < kFp8GridBlocks ? tiles : kFp8GridBlocks;
  detail::fp8_cast_transpose_kernel<T, F8, Src><<<static_cast<unsigned>(blocks), dim3(32, 8), 0,
                                                  stream>>>(rows, cols, in, scale, out, out_t,
                                                            stats, partials, partial_count,
                                                            current, record);
}

// out_t (cols x rows) = in (rows x cols) transposed, bytes as they are:
// the second layout of an FP8 cast written in the first (the scale and
// statistics are the cast's). The vector form when rows and cols are
// multiples of 16 and both pointers 16-byte aligned.
template <class F8>
inline void launch_fp8_transpose(int64_t rows, int64_t cols, const F8 *in, F8 *out_t,
                                 cudaStream_t stream) {
  if (rows <= 0 || cols <= 0)
    return;
  const uint8_t *from = reinterpret_cast<const uint8_t *>(in);
  uint8_t *to = reinterpret_cast<uint8_t *>(out_t);
  const bool vec = rows % 16 == 0 && cols % 16 == 0 &&
                   ((reinterpret_cast<uintptr_t>(from) | reinterpret_cast<uintptr_t>(to)) % 16) == 0;
  const int64_t side = vec ? 64 : 32;
  const int64_t tiles = ((rows + side - 1) / side) * ((cols + side - 1) / side);
  const int64_t blocks = tiles < kFp8GridBlocks ? tiles : kFp8GridBlocks;
  if (vec)
    detail::fp8_transpose_vec16_kernel<F8><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
        rows, cols, from, to);
  else
    detail::fp8_transpose_kernel<F8><<<static_cast<unsigned>(blocks), dim3(32, 8), 0, stream>>>(
        rows, cols, from, to);
}

namespace detail {
// The amax launch of a cast of n elements of `in` into *q's partials
// (launch_fp8_quantize_current, below); returns its blocks (the partials
// the cast reduces).
template <class T, class Src>
inline int32_t fp8_amax_launch(int64_t n, const Src &in, bool vec, Fp8TensorScale *q,
                               Fp8ScalingRecord *record, cudaStream_t stream) {
  float *partials =
      reinterpret_cast<float *>(reinterpret_cast<char *>(q) + sizeof(Fp8TensorScale));
  const int64_t items = vec ? n / 8 : n;
  const int64_t wanted = (items + 255) / 256;
  const int64_t cap = record != nullptr ? kFp8DelayedAmaxBlocks : kFp8AmaxPartials;
  const int64_t blocks = wanted < cap ? wanted : cap;
  fp8_amax_kernel<T, Src><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      n, in, vec, partials, &q->stats, record, record != nullptr ? &q->unused[0] : nullptr);
  return static_cast<int32_t>(blocks);
}
} // namespace detail

// Current scaling of one operand: *q's scale from in's own amax, then
// out / out_t = F8(in * scale) as launch_fp8_cast_transpose (either may be
// null). Two launches on `stream`: the amax kernel writes one maximum per
// block into the kFp8AmaxPartials floats after *q (which must have room:
// kFp8ScaleBytes in all) and zeroes the statistics; the cast reduces those
// maxima in every block, scales, and records the scale and its inverse in
// *q. Two reads of in, no atomics before the cast's statistics, nothing
// read back on the host.
//
// Delayed scaling (record non-null, the site's Fp8ScalingRecord in the
// step state): once the record holds a scale, the amax launch only zeroes
// the statistics and the cast scales by the record's scale (one read of
// in), records it in *q, and its last block updates the record's history
// and next scale (fp8_finish_delayed, fp8_scaling.cuh). A record without a scale (the
// site's first cast) is scaled as above, with the amax launch kept to
// kFp8DelayedAmaxBlocks blocks.
//
// `in`: a pointer (detail::Fp8Plain) or a generated source (fp8_kernels.cuh).
template <class T, class F8, class Src = detail::Fp8Plain<T>>
inline void launch_fp8_quantize_current(int64_t rows, int64_t cols,
                                        const detail::Fp8Source<Src> in, F8 *out, F8 *out_t,
                                        Fp8TensorScale *q, cudaStream_t stream,
                                        Fp8ScalingRecord *record = nullptr) {
  const int64_t n = rows * cols;
  if (n <= 0) {
    detail::fp8_empty_scale_kernel<<<1, 1, 0, stream>>>(q);
    return;
  }
  const bool vec = sizeof(T) == 2 && n % 8 == 0 && in.aligned16();
  const int32_t blocks = detail::fp8_amax_launch<T, Src>(n, in, vec, q, record, stream);
  launch_fp8_cast_transpose<T, F8, Src>(
      rows, cols, in, nullptr, out, out_t, &q->stats, stream,
      reinterpret_cast<const float *>(reinterpret_cast<const char *>(q) + sizeof(Fp8TensorScale)),
      blocks, q, record);
}

// Delayed scaling of one operand (launch_fp8_quantize_current with the
// site's record).
template <class T, class F8, class Src = detail::Fp8Plain<T>>
inline void launch_fp8_quantize_delayed(int64_t rows, int64_t cols,
                                        const detail::Fp8Source<Src> in, F8 *out, F8 *out_t,
                                        Fp8TensorScale *q, Fp8ScalingRecord *record,
                                        cudaStream_t stream) {
  launch_fp8_quantize_current<T, F8, Src>(rows, cols, in, out, out_t, q, stream, record);
}

namespace detail {
// Result k.. of a multi-result source, one launch_fp8_quantize_current each
// (the scalar form), or the amax pass of each into `to` (the vector form).
template <class T, class F8, class Src, int k>
inline void fp8_quantize_each(int64_t rows, int64_t cols, const Src &in, bool vec,
                              F8 *const *out, F8 *const *out_t, Fp8TensorScale *const *q,
                              Fp8ScalingRecord *const *record, cudaStream_t stream,
                              Fp8CastTargets<F8, Src::kOutputs> &to) {
  if constexpr (k < Src::kOutputs) {
    const Fp8Pick<Src, k> one{in};
    if (!vec) {
      launch_fp8_quantize_current<T, F8, Fp8Pick<Src, k>>(rows, cols, one, out[k], out_t[k],
                                                          q[k], stream, record[k]);
    } else {
      to.partial_count[k] =
          fp8_amax_launch<T, Fp8Pick<Src, k>>(rows * cols, one, true, q[k], record[k], stream);
      to.out[k] = out[k];
      to.out_t[k] = out_t[k];
      to.stats[k] = &q[k]->stats;
      to.scale[k] = nullptr;
      to.partials[k] = reinterpret_cast<const float *>(reinterpret_cast<const char *>(q[k]) +
                                                       sizeof(Fp8TensorScale));
      to.current[k] = q[k];
      to.record[k] = record[k];
    }
    fp8_quantize_each<T, F8, Src, k + 1>(rows, cols, in, vec, out, out_t, q, record, stream,
                                         to);
  }
}
} // namespace detail

// The K = Src::kOutputs results of a multi-result source (fp8_kernels.cuh:
// an elementwise op with K 16-bit results of one shape, each read only by
// FP8 products), result k as launch_fp8_quantize_current(rows, cols,
// <result k>, out[k], out_t[k], q[k], stream, record[k]) would cast it,
// with the same bytes, scales, statistics and record updates. The vector
// form (16-bit, rows and cols multiples of 8, everything 16-byte aligned)
// computes every result from one read of the source's inputs: an amax
// launch per result (at once done under delayed scaling with a scale),
// then one cast of all K. Otherwise the results are cast one by one.
template <class T, class F8, class Src>
inline void launch_fp8_quantize_multi(int64_t rows, int64_t cols, const Src in,
                                      F8 *const *out, F8 *const *out_t,
                                      Fp8TensorScale *const *q, Fp8ScalingRecord *const *record,
                                      cudaStream_t stream) {
  static_assert(sizeof(T) == 2, "multi-result casts read 16-bit results");
  constexpr int K = Src::kOutputs;
  const int64_t n = rows * cols;
  if (n <= 0) {
    for (int k = 0; k < K; ++k)
      detail::fp8_empty_scale_kernel<<<1, 1, 0, stream>>>(q[k]);
    return;
  }
  uintptr_t bits = 0;
  for (int k = 0; k < K; ++k)
    bits |= reinterpret_cast<uintptr_t>(out[k]) | reinterpret_cast<uintptr_t>(out_t[k]);
  const int64_t tiles = ((rows + 63) / 64) * ((cols + 63) / 64);
  const bool vec = in.aligned16() && bits % 16 == 0 && rows % 8 == 0 && cols % 8 == 0 &&
                   tiles < (int64_t{1} << 31);
  detail::Fp8CastTargets<F8, K> to{};
  detail::fp8_quantize_each<T, F8, Src, 0>(rows, cols, in, vec, out, out_t, q, record, stream,
                                           to);
  if (!vec)
    return;
  const int64_t blocks = tiles < kFp8GridBlocks ? tiles : kFp8GridBlocks;
  detail::fp8_cast_transpose_vec8_multi_kernel<T, F8, Src, K>
      <<<static_cast<unsigned>(blocks), 256, 0, stream>>>(rows, cols, in, to);
}

// Delayed scaling of `count` operands at once (the step's weights, cast at
// its first FP8 product): member m is launch_fp8_quantize_delayed(rows[m],
// cols[m], in[m], out[m], out_t[m], q[m], record[m]), with the same results,
// but the members of the vector form share two launches per up to Cap of
// them (one amax pass that, once the records hold scales, only zeroes
// each member's statistics, then one cast pass) instead of two each; the
// rest (misaligned or odd shapes) are launched one by one. W = float: each
// in[m] is an f32 tensor whose values rounded to T are the operand (the
// f32 master weights; detail::Fp8Rounded), cast as that T tensor would be.
template <class T, class F8, class W = T>
inline void launch_fp8_quantize_delayed_batch(int32_t count, const W *const *in, F8 *const *out,
                                              F8 *const *out_t, Fp8TensorScale *const *q,
                                              Fp8ScalingRecord *const *record,
                                              const int32_t *rows, const int32_t *cols,
                                              cudaStream_t stream) {
  constexpr int Cap = 32; // the table stays a few KiB of kernel parameters
  using Src = detail::Fp8SourceFrom<T, W>;
  detail::Fp8CastBatch<T, F8, Cap, W> b{};
  auto flush = [&] {
    if (b.count == 0)
      return;
    detail::fp8_amax_batch_kernel<T, F8, Cap, W>
        <<<b.amax_first[b.count], 256, 0, stream>>>(b);
    detail::fp8_cast_batch_kernel<T, F8, Cap, W><<<b.cast_first[b.count], 256, 0, stream>>>(b);
    b = detail::Fp8CastBatch<T, F8, Cap, W>{};
  };
  for (int32_t m = 0; m < count; ++m) {
    const int64_t n = static_cast<int64_t>(rows[m]) * cols[m];
    const bool aligned = ((reinterpret_cast<uintptr_t>(in[m]) |
                           reinterpret_cast<uintptr_t>(out[m]) |
                           reinterpret_cast<uintptr_t>(out_t[m])) % 16) == 0;
    if (sizeof(T) != 2 || n <= 0 || !aligned || rows[m] % 8 != 0 || cols[m] % 8 != 0 ||
        record[m] == nullptr) {
      launch_fp8_quantize_delayed<T, F8, Src>(rows[m], cols[m], Src(in[m]), out[m], out_t[m],
                                              q[m], record[m], stream);
      continue;
    }
    // The blocks each launch of its own would have had.
    const int64_t amax_wanted = (n / 8 + 255) / 256;
    const int64_t tiles = ((rows[m] + 63) / 64) * static_cast<int64_t>((cols[m] + 63) / 64);
    const int i = b.count++;
    b.in[i] = in[m];
    b.out[i] = out[m];
    b.out_t[i] = out_t[m];
    b.q[i] = q[m];
    b.record[i] = record[m];
    b.rows[i] = rows[m];
    b.cols[i] = cols[m];
    b.amax_first[i + 1] = b.amax_first[i] + static_cast<uint32_t>(
        amax_wanted < kFp8DelayedAmaxBlocks ? amax_wanted : kFp8DelayedAmaxBlocks);
    b.cast_first[i + 1] = b.cast_first[i] +
                          static_cast<uint32_t>(tiles < kFp8GridBlocks ? tiles : kFp8GridBlocks);
    if (b.count == Cap)
      flush();
  }
  flush();
}

// The next step's *scale and *scale_inv from this step's *stats and a
// history of `length` amaxes (delayed scaling; see fp8_update_scale_kernel).
template <class F8>
inline void launch_fp8_update_scale(const Fp8CastStats *stats, float *history, int32_t length,
                                    int64_t step, int32_t margin, float *scale,
                                    float *scale_inv, cudaStream_t stream) {
  detail::fp8_update_scale_kernel<F8><<<1, 1, 0, stream>>>(stats, history, length, step,
                                                           margin, scale, scale_inv);
}
