// kern.rope's CUDA family (prelude rope_kernels.cuh / rope_launchers.cuh)
// against a float64 reference of tg.rope's definition; included by
// kernel_families_test.cu (uses its Dev, Check, Rng, finishCase helpers).
//
// x, out logically (B, H, T, D) at element strides (tcc_cuda::RopeStrides:
// (b, hh, i, j) at offset + b*batch + hh*head + i*row + j), cos / sin (T, D)
// contiguous of type C (T, or float for 16-bit x). Layouts: contiguous (the
// old (rows, d) form: B = lead, H = 1), x read from a packed (B, T, 3*H*D)
// qkv buffer, out written into one (the rest of the buffer must keep its
// 0xFF poison), and offsets that are not a multiple of the vector width (the
// scalar V = 1 path); plus a check that the vector and scalar paths give the
// same bits. Random x in [-2, 2) and random tables (not a real rotation, so
// a kernel that used cos[j] for cos[j + h] or mixed up the transposed signs
// fails). Tolerance: each output is x1 c1 +- x2 s2, floor |x1 c1| + |x2 s2|
// (the float math's error scale; a 16-bit output's one rounding is within u
// of the value).

// want[b, hh, i, j] for the plain (transposed = false) and transposed
// rotations; x is the whole input buffer (as doubles), read at xs.
inline double ropeReference(const std::vector<double> &x, tcc_cuda::RopeStrides xs,
                            const std::vector<double> &c, const std::vector<double> &s,
                            int64_t b, int64_t hh, int64_t i, int64_t j, int64_t d,
                            bool transposed, double &floor) {
  const int64_t h = d / 2, tab = i * d;
  const int64_t row = xs.offset + b * xs.batch + hh * xs.head + i * xs.row;
  double a, e;
  if (j < h) {
    a = x[row + j] * c[tab + j];
    e = transposed ? x[row + j + h] * s[tab + j + h] : -x[row + j + h] * s[tab + j];
  } else {
    a = x[row + j] * c[tab + j];
    e = transposed ? -x[row + j - h] * s[tab + j - h] : x[row + j - h] * s[tab + j];
  }
  floor = std::fabs(a) + std::fabs(e);
  return a + e;
}

// Elements a (B, H, T, D) tensor at strides s spans in its buffer: one past
// the last element.
inline int64_t ropeExtent(tcc_cuda::RopeStrides s, int64_t nb, int64_t nh, int64_t t,
                          int64_t d) {
  return s.offset + (nb - 1) * s.batch + (nh - 1) * s.head + (t - 1) * s.row + d;
}

// Random x buffer (xn elements) and tables of a case, as stored and as the
// doubles the reference reads.
template <class T, class C> struct RopeInputs {
  std::vector<T> x;
  std::vector<C> cos, sin;
  std::vector<double> xd, cd, sd;
  RopeInputs(Rng &rng, int64_t xn, int64_t t, int64_t d)
      : x(xn), cos(t * d), sin(t * d), xd(xn), cd(t * d), sd(t * d) {
    for (size_t k = 0; k < x.size(); ++k) {
      x[k] = fromD<T>(rng.uniform(-2, 2));
      xd[k] = toD(x[k]); // the reference reads the stored (rounded) inputs
    }
    for (size_t k = 0; k < cos.size(); ++k) {
      cos[k] = fromD<C>(rng.uniform(-1, 1));
      sin[k] = fromD<C>(rng.uniform(-1, 1));
      cd[k] = toD(cos[k]);
      sd[k] = toD(sin[k]);
    }
  }
};

// One launch of (B, H, T, D) with x at xs in an xn-element buffer and out at
// os in an on-element buffer (poisoned first), checked against the
// reference; every out element outside the tensor must still be poison.
template <class T, class C>
void caseRopeLayout(const char *layout, int64_t nb, int64_t nh, int64_t t, int64_t d,
                    bool transposed, tcc_cuda::RopeStrides xs, int64_t xn,
                    tcc_cuda::RopeStrides os, int64_t on) {
  const std::string desc =
      format("<%s,%s> %s B=%" PRId64 " H=%" PRId64 " T=%" PRId64 " D=%" PRId64 "%s",
             typeName<T>(), typeName<C>(), layout, nb, nh, t, d,
             transposed ? " transposed" : "");
  if (!selected("rope", desc))
    return;
  Rng rng("rope " + desc);
  RopeInputs<T, C> in(rng, xn, t, d);
  Dev<T> dx(xn), dout(on);
  Dev<C> dcos(in.cos.size()), dsin(in.sin.size());
  dx.upload(in.x);
  dcos.upload(in.cos);
  dsin.upload(in.sin);
  dout.poison();
  tcc_cuda::launch_rope<T, C>(dx.p, xs, dcos.p, dsin.p, dout.p, os, nb, nh, t, d, transposed,
                              gStream);
  sync();
  std::vector<T> out = dout.download();
  std::vector<char> covered(on, 0);
  Check c(rtolFor<T>(), atolFor<T>());
  c.expect(ropeExtent(xs, nb, nh, t, d) <= xn && ropeExtent(os, nb, nh, t, d) <= on,
           "test bug: a tensor outside its buffer");
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t hh = 0; hh < nh; ++hh)
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = 0; j < d; ++j) {
          const int64_t at = os.offset + b * os.batch + hh * os.head + i * os.row + j;
          double floor = 0;
          double want =
              ropeReference(in.xd, xs, in.cd, in.sd, b, hh, i, j, d, transposed, floor);
          c.value(out[at], want, floor, at);
          covered[at] = 1;
        }
  for (int64_t k = 0; k < on; ++k)
    if (!covered[k] && !Check::isPoison(out[k])) {
      c.fail(format("at %" PRId64 ": outside the output tensor, overwritten", k));
      break;
    }
  finishCase("rope", desc, c);
}

// The old contiguous (rows, d) form: rows = lead x t, B = lead, H = 1.
template <class T, class C>
void caseRope(int64_t lead, int64_t t, int64_t d, bool transposed) {
  const tcc_cuda::RopeStrides s{0, t * d, 0, d};
  caseRopeLayout<T, C>("contiguous", lead, 1, t, d, transposed, s, lead * t * d, s,
                       lead * t * d);
}

// The strided layouts of (B, H, T, D): q / k read from a packed (B, T, 3, H,
// D) qkv buffer into a contiguous out; a contiguous x written into the k
// slot of a packed buffer; and offsets of one element (a misaligned start,
// so the scalar path) on both sides.
template <class T, class C>
void ropeStridedCases(int64_t nb, int64_t nh, int64_t t, int64_t d, bool transposed) {
  const int64_t packedRow = 3 * nh * d, packedN = nb * t * packedRow;
  const int64_t flatN = nb * nh * t * d;
  const tcc_cuda::RopeStrides flat{0, nh * t * d, t * d, d};
  const tcc_cuda::RopeStrides q{0, t * packedRow, d, packedRow};
  const tcc_cuda::RopeStrides k{nh * d, t * packedRow, d, packedRow};
  caseRopeLayout<T, C>("qkv-in q", nb, nh, t, d, transposed, q, packedN, flat, flatN);
  caseRopeLayout<T, C>("qkv-in k", nb, nh, t, d, transposed, k, packedN, flat, flatN);
  caseRopeLayout<T, C>("qkv-out k", nb, nh, t, d, transposed, flat, flatN, k, packedN);
  // Misaligned: x contiguous from element 1, out in a packed buffer from
  // element H*D + 1 (its row and head strides are still multiples of V).
  const tcc_cuda::RopeStrides x1{1, nh * t * d, t * d, d};
  const tcc_cuda::RopeStrides k1{nh * d + 1, t * packedRow, d, packedRow};
  caseRopeLayout<T, C>("misaligned", nb, nh, t, d, transposed, x1, flatN + 1, k1, packedN);
}

// The vector path (aligned, contiguous) and the scalar path (the same
// values one element further on in both buffers) give the same bits.
template <class T, class C>
void caseRopeSameBits(int64_t nb, int64_t nh, int64_t t, int64_t d, bool transposed) {
  const std::string desc =
      format("<%s,%s> vector = scalar bits B=%" PRId64 " H=%" PRId64 " T=%" PRId64
             " D=%" PRId64 "%s",
             typeName<T>(), typeName<C>(), nb, nh, t, d, transposed ? " transposed" : "");
  if (!selected("rope", desc))
    return;
  Rng rng("rope " + desc);
  const int64_t n = nb * nh * t * d;
  RopeInputs<T, C> in(rng, n, t, d);
  std::vector<T> shifted(n + 1);
  shifted[0] = fromD<T>(0);
  std::copy(in.x.begin(), in.x.end(), shifted.begin() + 1);
  Dev<T> dx(n), dx1(n + 1), dout(n), dout1(n + 1);
  Dev<C> dcos(in.cos.size()), dsin(in.sin.size());
  dx.upload(in.x);
  dx1.upload(shifted);
  dcos.upload(in.cos);
  dsin.upload(in.sin);
  dout.poison();
  dout1.poison();
  const tcc_cuda::RopeStrides s0{0, nh * t * d, t * d, d}, s1{1, nh * t * d, t * d, d};
  tcc_cuda::launch_rope<T, C>(dx.p, s0, dcos.p, dsin.p, dout.p, s0, nb, nh, t, d, transposed,
                              gStream);
  tcc_cuda::launch_rope<T, C>(dx1.p, s1, dcos.p, dsin.p, dout1.p, s1, nb, nh, t, d,
                              transposed, gStream);
  sync();
  std::vector<T> a = dout.download(), b = dout1.download();
  Check c(0);
  for (int64_t e = 0; e < n; ++e)
    if (std::memcmp(&a[e], &b[e + 1], sizeof(T)) != 0) {
      c.fail(format("at %" PRId64 ": vector %.17g, scalar %.17g", e, toD(a[e]),
                    toD(b[e + 1])));
      break;
    }
  finishCase("rope", desc, c);
}

template <class T, class C> void ropeAll() {
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {
      {1, 1, 2}, {3, 5, 8}, {2 * 12, 64, 64}, {4, 128, 128}, {1, 1000, 6}};
  for (const auto &s : shapes)
    for (bool transposed : {false, true})
      caseRope<T, C>(std::get<0>(s), std::get<1>(s), std::get<2>(s), transposed);
  // (B, H, T, D): head dims 64 and 128 (vector path when aligned), 16 (h = 8:
  // one vector per half for 16-bit x), 12 (h = 6: vector for double only)
  // and 6 (h = 3: always scalar).
  const std::tuple<int64_t, int64_t, int64_t, int64_t> strided[] = {
      {2, 3, 5, 64}, {2, 3, 5, 128}, {1, 4, 7, 16}, {1, 3, 4, 12}, {2, 2, 3, 6}};
  for (const auto &s : strided)
    for (bool transposed : {false, true}) {
      ropeStridedCases<T, C>(std::get<0>(s), std::get<1>(s), std::get<2>(s),
                             std::get<3>(s), transposed);
      caseRopeSameBits<T, C>(std::get<0>(s), std::get<1>(s), std::get<2>(s),
                             std::get<3>(s), transposed);
    }
}
