// Shared by the tests that run cuDNN attention (cudnn_attention_test.cu,
// attention_sm90_test.cu's --bench): the tcc_cudnn::Site of a case in its
// strided plan. Included inside the test's anonymous namespace, after
// attention_reference.cuh and attention_layouts.cuh.
#ifndef TCC_TESTS_CUDA_CUDNN_SITE_CUH
#define TCC_TESTS_CUDA_CUDNN_SITE_CUH

tcc_cudnn::Strides cudnnStrides(const Placement &p) { return {p.st.b, p.st.h, p.st.r}; }

tcc_cudnn::Site siteOf(const Shape &sh, const StridedPlan &p, bool f16, bool backward,
                       float scale, bool deterministic = true) {
  tcc_cudnn::Site s{};
  s.deterministic = deterministic;
  s.backward = backward;
  s.f16 = f16;
  s.causal = sh.causal;
  s.B = sh.B, s.H = sh.H, s.Hkv = sh.Hkv, s.T = sh.T, s.S = sh.S, s.D = sh.D;
  s.scale = scale;
  s.q = cudnnStrides(p.q), s.k = cudnnStrides(p.k), s.v = cudnnStrides(p.v);
  s.o = cudnnStrides(p.o), s.dout = cudnnStrides(p.o);
  s.dq = cudnnStrides(p.q), s.dk = cudnnStrides(p.k), s.dv = cudnnStrides(p.v);
  return s;
}

#endif
