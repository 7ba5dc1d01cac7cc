// Shared by the tests of tcc's Hopper attention (attention_sm90_test.cu,
// attention_sm90_backward_test.cu): the case set and the device check.
// Included inside the test's anonymous namespace, after
// attention_reference.cuh.
#ifndef TCC_TESTS_CUDA_ATTENTION_SM90_CASES_CUH
#define TCC_TESTS_CUDA_ATTENTION_SM90_CASES_CUH

// bf16 or f16 (T), D 64 and 128, causal or not: GPT-style packed, T != S,
// grouped heads, multi-query with T > S (fully masked rows), several key
// tiles with ragged ends.
template <class T, class Run> void sm90Cases(Run &&run) {
  for (int64_t D : {64, 128})
    for (bool causal : {false, true}) {
      run(Shape{2, 4, 4, 256, 256, D, causal, 0.f});  // GPT-style, packed
      run(Shape{2, 4, 4, 100, 333, D, causal, 0.f});  // T != S, padded rows
      run(Shape{1, 8, 2, 129, 129, D, causal, 0.f});  // GQA, packed
      run(Shape{2, 3, 1, 150, 70, D, causal, 0.f});   // MQA, T > S: masked rows
      run(Shape{1, 2, 1, 520, 647, D, causal, 0.f});  // several tiles, ragged ends
    }
}

// Whether GPU 0 can run sm_90a kernels (else prints why: the test exits
// 77); loads cuDNN for --bench (haveCudnn) and prints the device line with
// the seed.
bool sm90Device(const char *program, bool &haveCudnn) {
  if (!haveGpu(program))
    return false;
  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::printf("SKIP: %s is sm_%d%d; the kernel is sm_90a only\n", prop.name, prop.major,
                prop.minor);
    return false;
  }
  char why[512] = "";
  haveCudnn = tcc_cudnn::load(TCC_CUDA_LIB_DIR, why, sizeof why) == 0;
  std::printf("device: %s (sm_%d%d, %d SMs), cuDNN %s\nseed %" PRIu64
              " (reproduce with --seed %" PRIu64 ")\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              haveCudnn ? tcc_cudnn::version() : why, gSeed, gSeed);
  return true;
}

#endif
