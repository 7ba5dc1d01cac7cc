// What the standalone device tests of the fused norm launchers share
// (norm_kernels_test, norm_fp8_test, norm_grad_fp8_test,
// batch_norm_kernels_test): CUDA_CHECK (cuda_check.cuh: a failed CUDA
// call ends the test naming it), Host<T> (make a T from a double, read it
// back exactly, its name) for f32, f64 and bf16, and DeviceBuffer<T>, n
// T's on the device, `offset` elements past a 256-byte aligned base (an
// offset of 1 misaligns it for the scalar paths), randomRows and widen
// (the tests' inputs and their exact values), and startTest (the
// command line [--seed N] [--bench] and the GPU check). Include after the
// CUDA prelude.
#ifndef TCC_TESTS_CUDA_DEVICE_BUFFER_CUH
#define TCC_TESTS_CUDA_DEVICE_BUFFER_CUH

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
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

// rows x c random values: uniform in [-1, 1] plus a per-row offset in
// [-2, 2] (so a row's mean matters), times `scale`, rounded to T.
template <class T>
std::vector<T> randomRows(std::mt19937_64 &rng, int64_t rows, int64_t c, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(rows * c);
  for (int64_t r = 0; r < rows; ++r) {
    const double offset = 2.0 * u(rng);
    for (int64_t j = 0; j < c; ++j)
      v[r * c + j] = Host<T>::make(scale * (offset + u(rng)));
  }
  return v;
}

// The values of v, exactly, as doubles.
template <class T> std::vector<double> widen(const std::vector<T> &v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    d[i] = Host<T>::get(v[i]);
  return d;
}

// [--seed N] [--bench] into `seed` (fresh random numbers when not given,
// printed either way) and `bench`, then whether a GPU is visible. Returns
// -1 to go on, else the exit code: 2 after a usage error, 77 (skipped,
// with a SKIP line) without a GPU.
inline int startTest(int argc, char **argv, const char *program, uint64_t &seed, bool &bench) {
  bool haveSeed = false;
  bench = false;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--seed" && a + 1 < argc) {
      seed = std::strtoull(argv[++a], nullptr, 10);
      haveSeed = true;
    } else if (arg == "--bench") {
      bench = true;
    } else {
      std::fprintf(stderr, "usage: %s [--seed N] [--bench]\n", program);
      return 2;
    }
  }
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA GPU (%s): %s needs one\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices", program);
    return 77;
  }
  if (!haveSeed)
    seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  return -1;
}

} // namespace tcc_cuda_test

#endif
