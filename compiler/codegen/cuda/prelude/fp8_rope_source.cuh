//===--------------------------------------------------------------------===//
// An FP8 cast's source that applies rotary embeddings while it reads
// (tg-amp's fp8 precision, issue 37; CudaStepEmitter::fp8RopeCastComputes)
//===--------------------------------------------------------------------===//

} // namespace detail

// In a LLaMA-style backward, attention's backward writes dq and dk, two
// kern.rope launches rotate them back into their columns of the packed
// dqkv buffer, and one cast reads the whole buffer as the QKV products'
// E5M2 operand. A rope whose columns only that cast reads is not launched;
// this source computes its columns from its input as the rope kernel would
// (rope_kernel's formulas, each output rounded once to T, so the FP8 bytes,
// scales and statistics are those of the unfused step), and reads the
// others (dv) from the buffer. Per 8 elements of a band it reads 16 bytes
// of the element's half of the head and 16 of the other half (the same
// bytes the neighbouring tile reads, mostly from L2), and 8 cos and 8 sin
// of its position (L1 / L2); the rope's 16-bit write and the cast's read
// of it are gone.

// One rope's band: columns [col, col + heads * D) of every row of the
// (rows x Cols) buffer, row b * Positions + i, column col + hh * D + j
// computed from x(b, hh, i, j) (strides xs, D contiguous) with cos / sin
// (Positions, D) contiguous; `transposed`: the gradient form.
template <class T, class C> struct Fp8RopeBand {
  const T *x;
  RopeStrides xs;
  const C *cos, *sin;
  int32_t col, heads;
  bool transposed;
};

// The buffer's rows are (B * Positions) positions of Cols columns; each
// band's heads are D wide (D % 16 == 0, so an 8-element group lies in one
// half), col % 8 == 0 (CudaStepEmitter checks both). N bands, in no
// particular order, disjoint.
template <class T, class C, int64_t Cols, int D, int64_t Positions, int N>
struct Fp8RopeSource {
  static_assert(sizeof(T) == 2, "a 16-bit buffer");
  static_assert(D % 16 == 0 && Cols % 8 == 0, "8-element groups within one half of a head");
  using Element = T;
  static constexpr int kOutputs = 1;
  static constexpr int kHalf = D / 2;
  const T *in; // the buffer: the columns of no band
  Fp8RopeBand<T, C> band[N];

  // Where element i (row-major in rows x Cols) comes from: its band (-1:
  // the buffer), the offset of its x element and of its partner in the
  // other half, and its table index (position * D + j).
  struct Place {
    int band;
    int64_t own, partner;
    int32_t table;
    bool first; // j < D / 2
  };
  // f(band k, k) for each band, k a constant: with the bands indexed by a
  // loop counter, the source was copied to the stack (152 bytes at N = 2).
  template <int K = 0, class F> __device__ __forceinline__ void each_band(F &&f) const {
    if constexpr (K < N) {
      f(band[K], K);
      each_band<K + 1>(f);
    }
  }
  __device__ __forceinline__ Place place(int64_t i) const {
    const uint64_t u = static_cast<uint64_t>(i);
    const uint64_t r = u / Cols;
    const int32_t c = static_cast<int32_t>(u - r * Cols);
    Place p{-1, 0, 0, 0, true};
    each_band([&](const Fp8RopeBand<T, C> &b, int k) {
      const int32_t rel = c - b.col;
      if (rel >= 0 && rel < b.heads * D) {
        const int64_t bi = static_cast<int64_t>(r / Positions);
        const int64_t pos = static_cast<int64_t>(r) - bi * Positions;
        const int32_t hh = rel / D, j = rel - hh * D;
        const RopeStrides &s = b.xs;
        p.band = k;
        p.first = j < kHalf;
        p.own = s.offset + bi * s.batch + hh * s.head + pos * s.row + j;
        p.partner = p.own + (p.first ? kHalf : -kHalf);
        p.table = static_cast<int32_t>(pos) * D + j;
      }
    });
    return p;
  }
  // The output of one element of a band: x own, partner in the other
  // half, c = cos at the element, s = sin at the element (plain) or at its
  // partner (transposed) — rope_kernel's four cases:
  //   plain, first half:       x1 c1 - x2 s1     plain, second half:      x2 c2 + x1 s2
  //   transposed, first half:  x1 c1 + x2 s2     transposed, second half: x2 c2 - x1 s1
  __device__ __forceinline__ static T rotate(float own, float partner, float c, float s,
                                             bool first, bool transposed) {
    const float ps = partner * s;
    return Elem<T>::store(detail::rope_fma(own, c, first != transposed ? -ps : ps));
  }

  // A group's loads and what compute8 needs of its place (the offsets
  // are not kept: the fetched tiles stay in registers).
  struct Raw {
    uint4 own, partner;
    int32_t table;
    int8_t band;
    bool first;
  };
  __device__ __forceinline__ Raw fetch8(int64_t i) const {
    const Place at = place(i);
    Raw raw;
    raw.table = at.table;
    raw.band = static_cast<int8_t>(at.band);
    raw.first = at.first;
    if (at.band < 0) {
      raw.own = __ldg(reinterpret_cast<const uint4 *>(in + i));
      return raw;
    }
    each_band([&](const Fp8RopeBand<T, C> &b, int k) {
      if (k == at.band) {
        raw.own = __ldg(reinterpret_cast<const uint4 *>(b.x + at.own));
        raw.partner = __ldg(reinterpret_cast<const uint4 *>(b.x + at.partner));
      }
    });
    return raw;
  }
  __device__ __forceinline__ void compute8(const Raw &raw, int64_t, uint4 *out) const {
    if (raw.band < 0) {
      out[0] = raw.own;
      return;
    }
    const C *cos = nullptr, *sin = nullptr;
    bool transposed = false;
    each_band([&](const Fp8RopeBand<T, C> &b, int k) {
      if (k == raw.band) {
        cos = b.cos;
        sin = b.sin;
        transposed = b.transposed;
      }
    });
    const int32_t s_at = transposed ? raw.table + (raw.first ? kHalf : -kHalf) : raw.table;
    C cv[8], sv[8];
    detail::rope_load<8>(cos + raw.table, cv);
    detail::rope_load<8>(sin + s_at, sv);
    T own[8], partner[8], y[8];
    memcpy(own, &raw.own, 16);
    memcpy(partner, &raw.partner, 16);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      y[k] = rotate(static_cast<float>(Elem<T>::load(own[k])),
                    static_cast<float>(Elem<T>::load(partner[k])),
                    static_cast<float>(Elem<C>::load(cv[k])),
                    static_cast<float>(Elem<C>::load(sv[k])), raw.first, transposed);
    memcpy(out, y, 16);
  }
  __device__ __forceinline__ uint4 load8(int64_t i) const {
    uint4 out;
    compute8(fetch8(i), i, &out);
    return out;
  }
  __device__ __forceinline__ T load(int64_t i) const {
    const Place at = place(i);
    if (at.band < 0)
      return in[i];
    T y = in[i];
    each_band([&](const Fp8RopeBand<T, C> &b, int k) {
      if (k == at.band) {
        const int32_t s_at = b.transposed ? at.table + (at.first ? kHalf : -kHalf) : at.table;
        y = rotate(static_cast<float>(Elem<T>::load(b.x[at.own])),
                   static_cast<float>(Elem<T>::load(b.x[at.partner])),
                   static_cast<float>(Elem<C>::load(b.cos[at.table])),
                   static_cast<float>(Elem<C>::load(b.sin[s_at])), at.first, b.transposed);
      }
    });
    return y;
  }
  // The vector form's 16-byte loads: the buffer, each band's x, tables and
  // row starts (the tables' rows start at multiples of D, a multiple of 8).
  __host__ __device__ bool aligned16() const {
    bool ok = reinterpret_cast<uintptr_t>(in) % 16 == 0;
    for (int k = 0; k < N; ++k) {
      const RopeStrides &s = band[k].xs;
      ok = ok &&
           (reinterpret_cast<uintptr_t>(band[k].x) | reinterpret_cast<uintptr_t>(band[k].cos) |
            reinterpret_cast<uintptr_t>(band[k].sin)) % 16 == 0 &&
           (s.offset | s.batch | s.head | s.row) % 8 == 0;
    }
    return ok;
  }
};

namespace detail {
