// The strided layouts attention_kernels_test.cu checks the _strided
// launchers with: where each tensor lies in its buffer (packed q, k, v and
// dq, dk, dv when T == S, padded rows otherwise; out / dout (B, T, H, D)),
// and host scatter / gather between dense (B, Hx, N, D) and a placement.
// Included by attention_kernels_test.cu after its Shape.
#ifndef TCC_TESTS_CUDA_ATTENTION_LAYOUTS_CUH
#define TCC_TESTS_CUDA_ATTENTION_LAYOUTS_CUH

// Where a strided tensor lies in its buffer.
struct Placement {
  int64_t offset;
  tcc_cuda::AttnStrides st;
  int64_t at(int64_t b, int64_t h, int64_t i) const {
    return offset + b * st.b + h * st.h + i * st.r;
  }
};
template <class T>
void scatter(const std::vector<T> &dense, int64_t B, int64_t Hx, int64_t N, int64_t D,
             const Placement &p, std::vector<T> &buf) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hx; ++h)
      for (int64_t i = 0; i < N; ++i)
        std::memcpy(&buf[p.at(b, h, i)], &dense[((b * Hx + h) * N + i) * D], D * sizeof(T));
}
template <class T>
std::vector<T> gather(const std::vector<T> &buf, int64_t B, int64_t Hx, int64_t N, int64_t D,
                      const Placement &p) {
  std::vector<T> dense(B * Hx * N * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hx; ++h)
      for (int64_t i = 0; i < N; ++i)
        std::memcpy(&dense[((b * Hx + h) * N + i) * D], &buf[p.at(b, h, i)], D * sizeof(T));
  return dense;
}

// The placements of the strided run: packed q, k, v (and dq, dk, dv) when
// T == S, else padded rows; out / dout (B, T, H, D).
struct StridedPlan {
  Placement q, k, v, o;
  int64_t inputElems, outElems;
};
StridedPlan stridedPlan(const Shape &sh) {
  StridedPlan p;
  const int64_t B = sh.B, H = sh.H, Hkv = sh.Hkv, T = sh.T, S = sh.S, D = sh.D;
  if (T == S) {
    const int64_t W = (H + 2 * Hkv) * D;
    p.q = {0, {T * W, D, W}};
    p.k = {H * D, {T * W, D, W}};
    p.v = {(H + Hkv) * D, {T * W, D, W}};
    p.inputElems = B * T * W;
  } else {
    const int64_t wq = H * D + 8, wk = Hkv * D + 8;
    p.q = {0, {T * wq, D, wq}};
    p.k = {B * T * wq, {S * wk, D, wk}};
    p.v = {B * T * wq + B * S * wk, {S * wk, D, wk}};
    p.inputElems = B * T * wq + 2 * B * S * wk;
  }
  p.o = {0, {T * H * D, D, H * D}};
  p.outElems = B * T * H * D;
  return p;
}
tcc_cuda::AttnLayout layoutOf(const StridedPlan &p) {
  return tcc_cuda::AttnLayout{p.q.st, p.k.st, p.v.st, p.o.st,
                              p.o.st, p.q.st, p.k.st, p.v.st};
}

#endif
