// kern.rope's CUDA family (prelude rope_kernels.cuh / rope_launchers.cuh)
// against a float64 reference of tg.rope's definition; included by
// kernel_families_test.cu (uses its Dev, Check, Rng, finishCase helpers).
//
// x (rows, d) with rows = lead x t, cos / sin (t, d) of type C (T, or float
// for 16-bit x); random x in [-2, 2) and random tables (not a real rotation,
// so a kernel that used cos[j] for cos[j + h] or mixed up the transposed
// signs fails). Tolerance: each output is x1 c1 +- x2 s2, floor |x1 c1| +
// |x2 s2| (the float math's error scale; a 16-bit output's one rounding is
// within u of the value).

// want[r, j] for the plain (transposed = false) and transposed rotations.
inline double ropeReference(const std::vector<double> &x, const std::vector<double> &c,
                            const std::vector<double> &s, int64_t r, int64_t j,
                            int64_t t, int64_t d, bool transposed, double &floor) {
  const int64_t h = d / 2, row = r * d, tab = (r % t) * d;
  double a, b;
  if (j < h) {
    a = x[row + j] * c[tab + j];
    b = transposed ? x[row + j + h] * s[tab + j + h] : -x[row + j + h] * s[tab + j];
  } else {
    a = x[row + j] * c[tab + j];
    b = transposed ? -x[row + j - h] * s[tab + j - h] : x[row + j - h] * s[tab + j];
  }
  floor = std::fabs(a) + std::fabs(b);
  return a + b;
}

template <class T, class C>
void caseRope(int64_t lead, int64_t t, int64_t d, bool transposed) {
  const std::string desc =
      format("<%s,%s> lead=%" PRId64 " t=%" PRId64 " d=%" PRId64 "%s", typeName<T>(),
             typeName<C>(), lead, t, d, transposed ? " transposed" : "");
  if (!selected("rope", desc))
    return;
  Rng rng("rope " + desc);
  const int64_t rows = lead * t;
  std::vector<T> x(rows * d);
  std::vector<C> cos(t * d), sin(t * d);
  std::vector<double> xd(x.size()), cd(cos.size()), sd(sin.size());
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
  Dev<T> dx(x.size()), dout(x.size());
  Dev<C> dcos(cos.size()), dsin(sin.size());
  dx.upload(x);
  dcos.upload(cos);
  dsin.upload(sin);
  dout.poison();
  tcc_cuda::launch_rope<T, C>(dx.p, dcos.p, dsin.p, dout.p, rows, t, d, transposed,
                              gStream);
  sync();
  std::vector<T> out = dout.download();
  Check c(rtolFor<T>(), atolFor<T>());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < d; ++j) {
      double floor = 0;
      double want = ropeReference(xd, cd, sd, r, j, t, d, transposed, floor);
      c.value(out[r * d + j], want, floor, r * d + j);
    }
  finishCase("rope", desc, c);
}

template <class T, class C> void ropeAll() {
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {
      {1, 1, 2}, {3, 5, 8}, {2 * 12, 64, 64}, {4, 128, 128}, {1, 1000, 6}};
  for (const auto &s : shapes)
    for (bool transposed : {false, true})
      caseRope<T, C>(std::get<0>(s), std::get<1>(s), std::get<2>(s), transposed);
}
