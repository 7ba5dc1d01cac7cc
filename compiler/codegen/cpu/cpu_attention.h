// tcc CPU kernel prelude, flash attention (kern.attention and
// kern.attention_grad). Pasted into generated steps after cpu_prelude.h and
// runtime/include/tcc/counter_rng.h (compiler/codegen/CodegenSources.cmake);
// the include below serves only a direct #include (tests): in a generated
// step the guard is already defined and the line is skipped.
//
// Flash-style: the forward walks the keys in blocks per block of queries
// with an online softmax, the backward recomputes the probabilities from
// the saved lse; no buffer of T x S elements exists (per thread, a few
// tiles of a block's size). bf16 / f16 are loaded to float, computed in
// float and rounded once per output element; f64 computes in double.
#ifndef TCC_COUNTER_RNG_H
#include "tcc/counter_rng.h"
#endif
#include <type_traits>

namespace tcc_cpu {

// q (B, H, T, D), k and v (B, Hkv, S, D); query head h reads key/value
// head h / (H / Hkv).
struct AttentionShape {
  int64_t batch, heads, kv_heads, queries, keys, dim;
};

// Where one tensor's rows are: row (b, h, i) of `dim` contiguous elements
// starts at element b * batch + h * head + i * row (the CUDA prelude's
// AttnStrides; kern.attention's `layout`).
struct AttentionStrides {
  int64_t batch, head, row;
  template <typename T> T *at(T *base, int64_t b, int64_t h, int64_t i) const {
    return base + b * batch + h * head + i * row;
  }
};
// q, k, v, out, dout, dq, dk, dv.
struct AttentionLayout {
  AttentionStrides q, k, v, out, dout, dq, dk, dv;
};
// Contiguous (B, H, T, D) q, out, dout, dq and (B, Hkv, S, D) k, v, dk, dv.
inline AttentionLayout contiguous_layout(const AttentionShape &s) {
  const AttentionStrides qs{s.heads * s.queries * s.dim, s.queries * s.dim, s.dim};
  const AttentionStrides ks{s.kv_heads * s.keys * s.dim, s.keys * s.dim, s.dim};
  return AttentionLayout{qs, ks, ks, qs, qs, qs, ks, ks};
}

// The dropout of the probabilities: exactly tg.dropout's mask on a
// (B, H, T, S) tensor (counter_rng.h): position ((b*H + h)*T + i)*S + j is
// kept iff (tcc_rng_bits(seed_key, step, index) >> 40) >= ceil(rate * 2^24),
// seed_key = rng_seed ^ mix64(op_id), and kept values are scaled by
// 1 / (1 - rate).
struct AttentionDropout {
  bool active = false;
  uint64_t key = 0;       // the step's stream: mix64(mix64(seed_key) ^ step)
  uint64_t threshold = 0; // ceil(rate * 2^24); rate * 2^24 is exact in double
  double keep_scale = 1;

  AttentionDropout(double rate, uint64_t seed_key, uint64_t step) {
    active = rate > 0;
    key = tcc_rng_mix64(tcc_rng_mix64(seed_key) ^ step);
    threshold = static_cast<uint64_t>(std::ceil(rate * 16777216.0));
    keep_scale = active ? 1.0 / (1.0 - rate) : 1.0;
  }
  bool keep(uint64_t index) const {
    return (tcc_rng_key_bits(key, index) >> 40) >= threshold;
  }
};

namespace attention_detail {

// Block sizes: queries per block, keys per block.
constexpr int64_t kQueryBlock = 32, kKeyBlock = 64;

// rows x dim elements, src rows `stride` elements apart, into dense dst.
template <typename T, typename A>
void load_rows(const T *src, int64_t rows, int64_t dim, int64_t stride, A *dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < dim; ++d)
      dst[r * dim + d] = static_cast<A>(Elem<T>::load(src[r * stride + d]));
}

// A key block transposed, dst[d * kKeyBlock + c] = src[c, d], so a row of
// scores is a sum of vectors over d (the inner loop runs over keys).
template <typename T, typename A>
void load_transposed(const T *src, int64_t cols, int64_t dim, int64_t stride, A *dst) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t d = 0; d < dim; ++d)
      dst[d * kKeyBlock + c] = static_cast<A>(Elem<T>::load(src[c * stride + d]));
}

// out[c] = x . column c of a transposed block, for c < cols.
template <typename A>
void row_products(const A *x, const A *transposed, int64_t dim, int64_t cols, A *out) {
  for (int64_t c = 0; c < cols; ++c)
    out[c] = 0;
  for (int64_t d = 0; d < dim; ++d) {
    const A xd = x[d];
    const A *col = transposed + d * kKeyBlock;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      out[c] += xd * col[c];
  }
}

// y += a * x
template <typename A> void axpy(A a, const A *x, A *y, int64_t n) {
#pragma omp simd
  for (int64_t d = 0; d < n; ++d)
    y[d] += a * x[d];
}

// The last key query i sees plus one (causal: bottom-right aligned, key j
// is masked when j > i + (S - T)), clamped to [0, S].
inline int64_t visible_keys(int64_t i, const AttentionShape &s, bool causal) {
  if (!causal)
    return s.keys;
  int64_t end = i + 1 + (s.keys - s.queries);
  return end < 0 ? 0 : (end > s.keys ? s.keys : end);
}

} // namespace attention_detail

// out (B, H, T, D) and lse (B, H, T) of q, k, v, placed by `layout` (lse
// contiguous). kKernelNoMemory when a thread's tiles cannot be allocated.
template <typename T>
int32_t attention_forward(const T *q, const T *k, const T *v, T *out, acc_t<T> *lse,
                          const AttentionShape &s, const AttentionLayout &layout,
                          double scale_d, bool causal, double rate, uint64_t seed_key,
                          uint64_t step) {
  using namespace attention_detail;
  using A = acc_t<T>;
  const int64_t D = s.dim, group = s.heads / s.kv_heads;
  const int64_t qblocks = (s.queries + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = s.batch * s.heads * qblocks;
  const A scale = static_cast<A>(scale_d);
  const AttentionDropout drop(rate, seed_key, step);
  const A keep_scale = static_cast<A>(drop.keep_scale);
  const A neg_inf = -std::numeric_limits<A>::infinity();
  int32_t status = kKernelOk;
#ifdef _OPENMP
#pragma omp parallel
#endif
  {
    // Per thread: q tile, k and v tiles, output accumulator, scores, row
    // max and row sum.
    const int64_t tile = kQueryBlock * D * 2 + kKeyBlock * D * 2 +
                         kQueryBlock * kKeyBlock + 2 * kQueryBlock;
    std::unique_ptr<A[]> scratch(new (std::nothrow) A[tile]);
    if (!scratch) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
      status = kKernelNoMemory;
    }
    A *qt = scratch.get(), *kt = qt + kQueryBlock * D; // kt transposed
    A *vt = kt + kKeyBlock * D;
    A *acc = vt + kKeyBlock * D, *sc = acc + kQueryBlock * D;
    A *row_max = sc + kQueryBlock * kKeyBlock, *row_sum = row_max + kQueryBlock;
#ifdef _OPENMP
#pragma omp for schedule(dynamic)
#endif
    for (int64_t task = 0; task < tasks; ++task) {
      if (!scratch)
        continue;
      const int64_t bh = task / qblocks, b = bh / s.heads, h = bh % s.heads;
      const int64_t i0 = (task % qblocks) * kQueryBlock;
      const int64_t rows = s.queries - i0 < kQueryBlock ? s.queries - i0 : kQueryBlock;
      const int64_t hk = h / group;
      const T *kbase = layout.k.at(k, b, hk, 0), *vbase = layout.v.at(v, b, hk, 0);
      load_rows(layout.q.at(q, b, h, i0), rows, D, layout.q.row, qt);
      for (int64_t r = 0; r < rows * D; ++r)
        acc[r] = 0;
      for (int64_t r = 0; r < rows; ++r) {
        row_max[r] = neg_inf;
        row_sum[r] = 0;
      }
      // Key blocks past the last row's last visible key are skipped whole.
      const int64_t key_end = visible_keys(i0 + rows - 1, s, causal);
      for (int64_t j0 = 0; j0 < key_end; j0 += kKeyBlock) {
        const int64_t cols = key_end - j0 < kKeyBlock ? key_end - j0 : kKeyBlock;
        load_transposed(kbase + j0 * layout.k.row, cols, D, layout.k.row, kt);
        load_rows(vbase + j0 * layout.v.row, cols, D, layout.v.row, vt);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          const int64_t visible = visible_keys(i, s, causal) - j0; // columns < visible
          A *srow = sc + r * kKeyBlock;
          row_products(qt + r * D, kt, D, cols, srow);
          A block_max = neg_inf;
          for (int64_t c = 0; c < cols; ++c) {
            const A x = c < visible ? scale * srow[c] : neg_inf;
            srow[c] = x;
            block_max = x > block_max ? x : block_max;
          }
          const A new_max = block_max > row_max[r] ? block_max : row_max[r];
          if (new_max == neg_inf)
            continue; // every key so far masked: nothing to add
          const A correction = tcc_cpu::exp(row_max[r] - new_max); // 0 from -inf
          A *arow = acc + r * D;
          for (int64_t d = 0; d < D; ++d)
            arow[d] *= correction;
          A sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < cols; ++c) {
            const A p = tcc_cpu::exp(srow[c] - new_max); // 0 on masked keys
            srow[c] = p;
            sum += p;
          }
          const uint64_t base = (static_cast<uint64_t>(bh) * s.queries + i) * s.keys + j0;
          for (int64_t c = 0; c < cols; ++c) {
            const A p = srow[c];
            if (p != 0 && (!drop.active || drop.keep(base + c)))
              axpy(p, vt + c * D, arow, D);
          }
          row_sum[r] = row_sum[r] * correction + sum;
          row_max[r] = new_max;
        }
      }
      T *orow = layout.out.at(out, b, h, i0);
      A *lrow = lse + bh * s.queries + i0;
      for (int64_t r = 0; r < rows; ++r) {
        const bool any = row_sum[r] > 0; // false: a fully masked row
        const A factor = any ? keep_scale / row_sum[r] : A(0);
        for (int64_t d = 0; d < D; ++d)
          orow[r * layout.out.row + d] = Elem<T>::store(acc[r * D + d] * factor);
        lrow[r] = any ? row_max[r] + std::log(row_sum[r]) : neg_inf;
      }
    }
  }
  return status;
}

template <typename T>
int32_t attention_forward(const T *q, const T *k, const T *v, T *out, acc_t<T> *lse,
                          const AttentionShape &s, double scale_d, bool causal,
                          double rate, uint64_t seed_key, uint64_t step) {
  return attention_forward(q, k, v, out, lse, s, contiguous_layout(s), scale_d, causal, rate,
                           seed_key, step);
}

// dq, dk, dv of attention_forward, recomputing p = exp(s - lse) and using
// D_i = rowsum(dout * out). Each task owns one (b, key/value head): it
// walks that head's key blocks, and for each the query heads sharing it,
// so dk and dv are summed over the group in a fixed order and each dq row
// is only touched by its task: the result does not depend on threads.
// dq accumulates in a per-thread copy of the task's rows (G*T*D, in the
// accumulation type) and is stored once at the end (it may be strided).
// `workspace` (kern.attention_grad's, sized for the CUDA kernels) is not
// used.
template <typename T>
int32_t attention_backward(const T *q, const T *k, const T *v, const T *out,
                           const acc_t<T> *lse, const T *dout, T *dq, T *dk, T *dv,
                           float * /*workspace*/, const AttentionShape &s,
                           const AttentionLayout &layout, double scale_d, bool causal,
                           double rate, uint64_t seed_key, uint64_t step) {
  using namespace attention_detail;
  using A = acc_t<T>;
  const int64_t D = s.dim, group = s.heads / s.kv_heads;
  const int64_t tasks = s.batch * s.kv_heads;
  const A scale = static_cast<A>(scale_d);
  const AttentionDropout drop(rate, seed_key, step);
  const A keep_scale = static_cast<A>(drop.keep_scale);
  const A neg_inf = -std::numeric_limits<A>::infinity();
  int32_t status = kKernelOk;
#ifdef _OPENMP
#pragma omp parallel
#endif
  {
    // Per thread: k, v tiles and dk, dv accumulators of a key block; q and
    // dout tiles of a query block; its p and ds; D_i of the group's rows;
    // for bf16 / f16, the float dq of the group's rows.
    const int64_t tile = 5 * kKeyBlock * D + 2 * kQueryBlock * D +
                         2 * kQueryBlock * kKeyBlock + group * s.queries +
                         group * s.queries * D;
    std::unique_ptr<A[]> scratch(new (std::nothrow) A[tile]);
    if (!scratch) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
      status = kKernelNoMemory;
    }
    // kt by rows and transposed (ktt), vt transposed.
    A *kt = scratch.get(), *ktt = kt + kKeyBlock * D, *vt = ktt + kKeyBlock * D;
    A *dkt = vt + kKeyBlock * D;
    A *dvt = dkt + kKeyBlock * D, *qt = dvt + kKeyBlock * D, *gt = qt + kQueryBlock * D;
    A *pt = gt + kQueryBlock * D, *dst = pt + kQueryBlock * kKeyBlock;
    A *row_dot = dst + kQueryBlock * kKeyBlock;
#ifdef _OPENMP
#pragma omp for schedule(dynamic)
#endif
    for (int64_t task = 0; task < tasks; ++task) {
      if (!scratch)
        continue;
      const int64_t b = task / s.kv_heads, hk = task % s.kv_heads;
      const int64_t bh0 = b * s.heads + hk * group; // the group's first (b, h)
      const int64_t group_rows = group * s.queries;
      const int64_t h0 = hk * group; // the group's first query head
      A *dq_acc = row_dot + group_rows; // rows (g, i) of the group
      for (int64_t e = 0; e < group_rows * D; ++e)
        dq_acc[e] = 0;
      for (int64_t r = 0; r < group_rows; ++r) {
        const int64_t hq = h0 + r / s.queries, i = r % s.queries;
        const T *o = layout.out.at(out, b, hq, i), *g = layout.dout.at(dout, b, hq, i);
        A sum = 0;
        for (int64_t d = 0; d < D; ++d)
          sum += static_cast<A>(Elem<T>::load(o[d])) * static_cast<A>(Elem<T>::load(g[d]));
        row_dot[r] = sum;
      }
      const T *kbase = layout.k.at(k, b, hk, 0), *vbase = layout.v.at(v, b, hk, 0);
      for (int64_t j0 = 0; j0 < s.keys; j0 += kKeyBlock) {
        const int64_t cols = s.keys - j0 < kKeyBlock ? s.keys - j0 : kKeyBlock;
        const T *kblock = kbase + j0 * layout.k.row, *vblock = vbase + j0 * layout.v.row;
        load_rows(kblock, cols, D, layout.k.row, kt);
        load_transposed(kblock, cols, D, layout.k.row, ktt);
        load_transposed(vblock, cols, D, layout.v.row, vt);
        for (int64_t e = 0; e < cols * D; ++e)
          dkt[e] = dvt[e] = 0;
        // Queries before first_query see none of this block's keys.
        int64_t first_query = causal ? j0 - (s.keys - s.queries) : 0;
        first_query = first_query < 0 ? 0 : first_query;
        for (int64_t g = 0; g < group; ++g) {
          const int64_t bh = bh0 + g;
          for (int64_t i0 = first_query; i0 < s.queries; i0 += kQueryBlock) {
            const int64_t rows = s.queries - i0 < kQueryBlock ? s.queries - i0 : kQueryBlock;
            load_rows(layout.q.at(q, b, h0 + g, i0), rows, D, layout.q.row, qt);
            load_rows(layout.dout.at(dout, b, h0 + g, i0), rows, D, layout.dout.row, gt);
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t i = i0 + r;
              const A row_lse = lse[bh * s.queries + i];
              const int64_t visible = visible_keys(i, s, causal) - j0;
              const A di = row_dot[g * s.queries + i];
              const uint64_t base = (static_cast<uint64_t>(bh) * s.queries + i) * s.keys + j0;
              A *prow = pt + r * kKeyBlock, *dsrow = dst + r * kKeyBlock;
              if (row_lse == neg_inf) { // no visible key: p = 0
                for (int64_t c = 0; c < cols; ++c)
                  prow[c] = dsrow[c] = 0;
                continue;
              }
              row_products(qt + r * D, ktt, D, cols, prow); // q . k
              row_products(gt + r * D, vt, D, cols, dsrow); // dP' = dout . v
#pragma omp simd
              for (int64_t c = 0; c < cols; ++c)
                prow[c] = tcc_cpu::exp(c < visible ? scale * prow[c] - row_lse : neg_inf);
              // P' = p kept and scaled; dp = dP' kept and scaled;
              // ds = p (dp - D_i).
              if (drop.active) {
                for (int64_t c = 0; c < cols; ++c) {
                  const A kept = drop.keep(base + c) ? keep_scale : A(0);
                  dsrow[c] = prow[c] * (kept * dsrow[c] - di);
                  prow[c] *= kept;
                }
              } else {
#pragma omp simd
                for (int64_t c = 0; c < cols; ++c)
                  dsrow[c] = prow[c] * (dsrow[c] - di);
              }
            }
            // dv += P'^T dout, dk += scale ds^T q, dq += scale ds k.
            for (int64_t r = 0; r < rows; ++r) {
              A *dq_row = dq_acc + (g * s.queries + i0 + r) * D;
              for (int64_t c = 0; c < cols; ++c) {
                const A pv = pt[r * kKeyBlock + c], ds = scale * dst[r * kKeyBlock + c];
                if (pv != 0)
                  axpy(pv, gt + r * D, dvt + c * D, D);
                if (ds != 0) {
                  axpy(ds, qt + r * D, dkt + c * D, D);
                  axpy(ds, kt + c * D, dq_row, D);
                }
              }
            }
          }
        }
        T *dk_out = layout.dk.at(dk, b, hk, j0), *dv_out = layout.dv.at(dv, b, hk, j0);
        for (int64_t c = 0; c < cols; ++c)
          for (int64_t d = 0; d < D; ++d) {
            dk_out[c * layout.dk.row + d] = Elem<T>::store(dkt[c * D + d]);
            dv_out[c * layout.dv.row + d] = Elem<T>::store(dvt[c * D + d]);
          }
      }
      for (int64_t r = 0; r < group_rows; ++r) {
        T *dq_out = layout.dq.at(dq, b, h0 + r / s.queries, r % s.queries);
        for (int64_t d = 0; d < D; ++d)
          dq_out[d] = Elem<T>::store(dq_acc[r * D + d]);
      }
    }
  }
  return status;
}

template <typename T>
int32_t attention_backward(const T *q, const T *k, const T *v, const T *out,
                           const acc_t<T> *lse, const T *dout, T *dq, T *dk, T *dv,
                           float *workspace, const AttentionShape &s, double scale_d,
                           bool causal, double rate, uint64_t seed_key, uint64_t step) {
  return attention_backward(q, k, v, out, lse, dout, dq, dk, dv, workspace, s,
                            contiguous_layout(s), scale_d, causal, rate, seed_key, step);
}

} // namespace tcc_cpu
