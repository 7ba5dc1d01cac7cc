// What the standalone device tests of the fused norm launchers share
// (norm_kernels_test, batch_norm_kernels_test): CUDA_CHECK (cuda_check.cuh: a failed CUDA
// call ends the test naming it), Host<T> (make a T from a double, read it
// back exactly, its name) for f32, f64 and bf16, and DeviceBuffer<T>, n
// T's on the device, `offset` elements past a 256-byte aligned base (an
// offset of 1 misaligns it for the scalar paths). Include after the CUDA
// prelude.
#ifndef TCC_TESTS_CUDA_DEVICE_BUFFER_CUH
#define TCC_TESTS_CUDA_DEVICE_BUFFER_CUH

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tests/cuda/cuda_check.cuh"

namespace tcc_cuda_test {

template <class T> struct Host;
template <> struct Host<float> {
  static float make(double v) { return static_cast<float>(v); }
  static double get(float v) { return v; }
  static const char *name() { return "f32"; }
};
template <> struct Host<double> {
  static double make(double v) { return v; }
  static double get(double v) { return v; }
  static const char *name() { return "f64"; }
};
template <> struct Host<tcc_cuda::bf16> {
  static tcc_cuda::bf16 make(double v) {
    return tcc_cuda::bf16{tcc_cuda::float_to_bf16(static_cast<float>(v))};
  }
  static double get(tcc_cuda::bf16 v) { return tcc_cuda::bf16_to_float(v.bits); }
  static const char *name() { return "bf16"; }
};

template <class T> struct DeviceBuffer {
  void *base = nullptr;
  T *p = nullptr;
  size_t n = 0;
  DeviceBuffer(size_t count, int offset = 0) : n(count) {
    CUDA_CHECK(cudaMalloc(&base, (count + 8) * sizeof(T)));
    p = reinterpret_cast<T *>(base) + offset;
  }
  ~DeviceBuffer() { cudaFree(base); }
  void upload(const std::vector<T> &h) {
    CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  void poison() { CUDA_CHECK(cudaMemset(p, 0xFF, n * sizeof(T))); }
  std::vector<T> download() const {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

} // namespace tcc_cuda_test

#endif
