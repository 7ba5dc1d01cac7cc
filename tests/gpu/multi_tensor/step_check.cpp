// Device check of kern-fuse-horizontal (tcc issue 13): loads a CUDA step.so
// through the step ABI, fills parameters, optimizer state and inputs from a
// seed, runs train steps, and writes everything the steps wrote to a file
// (compared between the multi-tensor and the per-tensor build); with
// `profile`, also times the step (CUDA graph, wall clock) and sums the
// profiled launch times of the optimizer tail (labels with adamw /
// grad_clip / sgd / momentum) and of the weight casts.
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tcc/step_abi.h"

#define CHECK(x)                                                                 \
  do {                                                                           \
    if ((x) != TCC_STATUS_OK) {                                                  \
      std::fprintf(stderr, "FAIL %s: %s\n", #x, dev->last_error());              \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: step_check STEP.so OUT.bin STEPS vocab [profile]\n");
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  auto get = reinterpret_cast<tcc_step_get_descriptor_fn>(dlsym(h, TCC_STEP_DESCRIPTOR_SYMBOL));
  const tcc_step_descriptor *d = get();
  const tcc_device_api *dev = d->device;
  int steps = std::atoi(argv[3]);
  int vocab = std::atoi(argv[4]);
  bool profile = argc > 5;
  CHECK(dev->init(0));
  std::mt19937_64 rng(1234);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto upload = [&](const tcc_tensor_desc &t, bool nonNegative, float scale) {
    void *p = dev->alloc(t.size_bytes);
    std::vector<char> host(t.size_bytes);
    for (int64_t i = 0; i < t.num_elements; ++i) {
      if (t.dtype == TCC_DTYPE_I32)
        reinterpret_cast<int32_t *>(host.data())[i] = static_cast<int32_t>(rng() % vocab);
      else if (t.dtype == TCC_DTYPE_I64)
        reinterpret_cast<int64_t *>(host.data())[i] = static_cast<int64_t>(rng() % vocab);
      else {
        float v = scale * normal(rng);
        reinterpret_cast<float *>(host.data())[i] = nonNegative ? v * v : v;
      }
    }
    dev->to_device(p, host.data(), t.size_bytes);
    return p;
  };
  std::vector<void *> params, states;
  std::vector<const void *> inputs;
  for (int i = 0; i < d->num_params; ++i)
    params.push_back(upload(d->params[i], false, 0.02f));
  for (int i = 0; i < d->num_optimizer_state; ++i)
    states.push_back(upload(d->optimizer_state[i],
                            std::strstr(d->optimizer_state[i].name, "adam_v") != nullptr, 0.01f));
  for (int i = 0; i < d->num_inputs; ++i)
    inputs.push_back(upload(d->inputs[i], false, 1.f));
  void *ws = dev->alloc(d->workspace_bytes);
  std::vector<std::vector<char>> trainOut(d->num_train_outputs);
  std::vector<void *> trainOutPtrs;
  for (int i = 0; i < d->num_train_outputs; ++i) {
    trainOut[i].resize(d->train_outputs[i].size_bytes);
    trainOutPtrs.push_back(trainOut[i].data());
  }
  float loss = 0;
  tcc_step_args a{};
  a.params = params.data();
  a.optimizer_state = states.data();
  a.inputs = inputs.data();
  a.workspace = ws;
  a.loss = &loss;
  a.train_outputs = trainOutPtrs.data();
  FILE *out = std::strcmp(argv[2], "-") ? std::fopen(argv[2], "wb") : std::fopen("/dev/null", "wb");
  for (int s = 0; s < steps; ++s) {
    a.step = s;
    a.learning_rate = 1e-3f;
    CHECK(d->train(&a));
    std::fwrite(&loss, sizeof loss, 1, out);
    for (auto &t : trainOut)
      std::fwrite(t.data(), 1, t.size(), out);
    std::printf("step %d loss %.6f", s, loss);
    for (int i = 0; i < d->num_train_outputs; ++i)
      std::printf(" %s %.6g", d->train_outputs[i].name,
                  *reinterpret_cast<float *>(trainOut[i].data()));
    std::printf("\n");
  }
  auto dump = [&](const std::vector<void *> &bufs, const tcc_tensor_desc *descs) {
    for (size_t i = 0; i < bufs.size(); ++i) {
      std::vector<char> host(descs[i].size_bytes);
      dev->to_host(host.data(), bufs[i], host.size());
      std::fwrite(host.data(), 1, host.size(), out);
    }
  };
  dump(params, d->params);
  dump(states, d->optimizer_state);
  std::fclose(out);
  if (!profile)
    return 0;
  // Wall clock with CUDA graphs.
  for (int s = 0; s < 3; ++s)
    CHECK(d->train(&a));
  auto t0 = std::chrono::steady_clock::now();
  const int timed = 10;
  for (int s = 0; s < timed; ++s)
    CHECK(d->train(&a));
  auto t1 = std::chrono::steady_clock::now();
  std::printf("step %.3f ms (graph: %s)\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count() / timed,
              dev->execution_note());
  CHECK(dev->set_profiling(1));
  for (int s = 0; s < 3; ++s)
    CHECK(d->train(&a));
  int n = dev->profile_read(nullptr, 0);
  std::vector<tcc_launch_time> rec(n);
  dev->profile_read(rec.data(), n);
  double total = 0, optim = 0, casts = 0;
  int optimLaunches = 0, trainLaunches = 0, castLaunches = 0;
  bool beforeGather = true; // the weight casts run before the embedding
  for (const tcc_launch_time &r : rec) {
    if (r.entry != 0)
      continue;
    double ms = r.milliseconds / r.calls;
    total += ms;
    ++trainLaunches;
    std::string l = r.label, k = r.kernel;
    if (k.find("gather") != std::string::npos)
      beforeGather = false;
    if (beforeGather) {
      casts += ms;
      ++castLaunches;
    }
    if (l.find("adamw") != std::string::npos || l.find("grad_clip") != std::string::npos ||
        l.find("sgd") != std::string::npos || l.find("momentum") != std::string::npos) {
      optim += ms;
      ++optimLaunches;
    }
  }
  std::printf("profiled train: %d launches %.3f ms; optimizer+clip: %d launches %.3f ms; "
              "casts before the embedding: %d launches %.3f ms\n",
              trainLaunches, total, optimLaunches, optim, castLaunches, casts);
  return 0;
}
