#include "runtime/trun/step/Diagnose.h"

#include "runtime/trun/step/DeviceMemory.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

#include <dlfcn.h>

#include <fstream>
#include <sstream>

namespace tcc::trun {
namespace {

// The few driver-API entry points --diagnose uses (cuda.h signatures; the
// header is not needed to build trun).
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
constexpr int kAttrMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_...
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

struct DriverApi {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemGetInfo)(size_t *, size_t *);
};

template <typename F> bool Load(void *library, const char *name, F &f) {
  f = reinterpret_cast<F>(dlsym(library, name));
  return f != nullptr;
}

int64_t MeminfoBytes(const std::string &text, const std::string &key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + ":", 0) != 0)
      continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kib = -1;
    fields >> kib;
    return kib < 0 ? -1 : kib * 1024;
  }
  return -1;
}

std::string Bytes(int64_t bytes) {
  return bytes < 0 ? "unknown" : FormatBytes(static_cast<uint64_t>(bytes));
}

void ProbeDriver(MachineInfo &info, int free_of) {
  // The versioned name: libcuda.so (unversioned) only exists with the
  // toolkit's stubs, which would "load" and then fail every call.
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    info.driver_error = "libcuda.so.1 not found: no NVIDIA driver";
    return;
  }
  DriverApi api{};
  bool loaded = Load(library, "cuInit", api.cuInit) &&
                Load(library, "cuDriverGetVersion", api.cuDriverGetVersion) &&
                Load(library, "cuDeviceGetCount", api.cuDeviceGetCount) &&
                Load(library, "cuDeviceGet", api.cuDeviceGet) &&
                Load(library, "cuDeviceGetName", api.cuDeviceGetName) &&
                Load(library, "cuDeviceTotalMem_v2", api.cuDeviceTotalMem) &&
                Load(library, "cuDeviceGetAttribute",
                     api.cuDeviceGetAttribute) &&
                Load(library, "cuDevicePrimaryCtxRetain",
                     api.cuDevicePrimaryCtxRetain) &&
                Load(library, "cuDevicePrimaryCtxRelease_v2",
                     api.cuDevicePrimaryCtxRelease) &&
                Load(library, "cuCtxSetCurrent", api.cuCtxSetCurrent) &&
                Load(library, "cuMemGetInfo_v2", api.cuMemGetInfo);
  if (!loaded) {
    info.driver_error = "libcuda.so.1 lacks driver API entry points";
    return;
  }
  if (CUresult r = api.cuInit(0); r != 0) {
    info.driver_error = absl::StrFormat("cuInit failed with CUresult %d", r);
    return;
  }
  info.has_driver = true;
  api.cuDriverGetVersion(&info.driver_version);
  int count = 0;
  api.cuDeviceGetCount(&count);
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    if (api.cuDeviceGet(&device, i) != 0)
      continue;
    GpuInfo gpu;
    gpu.index = i;
    char name[256] = {};
    api.cuDeviceGetName(name, sizeof(name), device);
    gpu.name = name;
    size_t total = 0;
    api.cuDeviceTotalMem(&total, device);
    gpu.total_bytes = static_cast<int64_t>(total);
    api.cuDeviceGetAttribute(&gpu.compute_major, kAttrComputeCapabilityMajor,
                             device);
    api.cuDeviceGetAttribute(&gpu.compute_minor, kAttrComputeCapabilityMinor,
                             device);
    api.cuDeviceGetAttribute(&gpu.multiprocessors, kAttrMultiprocessorCount,
                             device);
    // Free memory needs a context: the primary one, released right after
    // (only on GPU `free_of` when one is named: a context costs time).
    CUcontext context = nullptr;
    if ((free_of < 0 || free_of == i) && api.cuDevicePrimaryCtxRetain(&context, device) == 0) {
      size_t free_bytes = 0, total_bytes = 0;
      if (api.cuCtxSetCurrent(context) == 0 &&
          api.cuMemGetInfo(&free_bytes, &total_bytes) == 0)
        gpu.free_bytes = static_cast<int64_t>(free_bytes);
      api.cuCtxSetCurrent(nullptr);
      api.cuDevicePrimaryCtxRelease(device);
    }
    info.gpus.push_back(gpu);
  }
  // The library stays loaded: unloading the driver mid-process is unsafe.
}

} // namespace

MachineInfo ProbeMachine(int free_of) {
  MachineInfo info;
  std::ifstream meminfo("/proc/meminfo");
  std::stringstream text;
  text << meminfo.rdbuf();
  info.host_total_bytes = MeminfoBytes(text.str(), "MemTotal");
  info.host_available_bytes = MeminfoBytes(text.str(), "MemAvailable");
  ProbeDriver(info, free_of);
  return info;
}

int64_t StepBytes(const tcc_step_descriptor &d) {
  int64_t bytes = d.workspace_bytes;
  auto add = [&](int32_t count, const tcc_tensor_desc *tensors) {
    for (int32_t i = 0; i < count; ++i)
      bytes += tensors[i].size_bytes;
  };
  add(d.num_params, d.params);
  add(d.num_optimizer_state, d.optimizer_state);
  add(d.num_outputs, d.outputs);
  add(d.num_train_outputs, d.train_outputs);
  add(d.num_inputs, d.inputs);
  return bytes;
}

int64_t EvalOutputBytes(const tcc_step_descriptor &d) {
  if (std::string(d.target) != "cuda")
    return 0;
  int64_t bytes = 0;
  for (int32_t i = 0; i < d.num_outputs; ++i)
    bytes += d.outputs[i].size_bytes;
  return bytes;
}

int64_t TrainingBytes(const tcc_step_descriptor &d) {
  int64_t bytes = StepBytes(d) - EvalOutputBytes(d);
  // A cuda run holds two sets of inputs: the next batch uploads while a
  // step runs.
  if (std::string(d.target) == "cuda")
    for (int32_t i = 0; i < d.num_inputs; ++i)
      bytes += d.inputs[i].size_bytes;
  return bytes;
}

absl::Status CheckGpuMemory(const MachineInfo &m, const tcc_step_descriptor &d, int gpu,
                            std::ostream &out) {
  if (gpu < 0 || gpu >= static_cast<int>(m.gpus.size()) || m.gpus[gpu].free_bytes < 0)
    return absl::OkStatus(); // unknown: the allocations will tell
  const int64_t need = TrainingBytes(d), free = m.gpus[gpu].free_bytes;
  std::string evals = EvalOutputBytes(d)
                          ? absl::StrFormat("; an evaluation adds %s (eval outputs)",
                                            Bytes(EvalOutputBytes(d)))
                          : "";
  out << absl::StrFormat("memory: the step needs %s on gpu %d (its memory plan: parameters, "
                         "optimizer state, workspace, inputs)%s; %s free\n",
                         Bytes(need), gpu, evals, Bytes(free));
  if (need > free)
    return absl::FailedPreconditionError(absl::StrFormat(
        "step '%s' needs %s but gpu %d has %s free: compile it with tcc compile "
        "--memory-budget (tg-remat recomputes activations to fit), or a smaller batch",
        d.model_name, Bytes(need), gpu, Bytes(free)));
  return absl::OkStatus();
}

bool PrintDiagnosis(const MachineInfo &m, const tcc_step_descriptor *d,
                    std::ostream &out, int gpu) {
  out << "host memory: " << Bytes(m.host_total_bytes) << " total, "
      << Bytes(m.host_available_bytes) << " available\n";
  if (!m.has_driver) {
    out << "gpu: none (" << m.driver_error << ")\n";
  } else {
    out << absl::StrFormat("nvidia driver: CUDA %d.%d, %d GPU(s)\n",
                           m.driver_version / 1000,
                           m.driver_version % 1000 / 10, m.gpus.size());
    for (const GpuInfo &g : m.gpus)
      out << absl::StrFormat(
          "gpu %d: %s, compute capability %d.%d (sm_%d%d), %d SMs, %s total, "
          "%s free\n",
          g.index, g.name, g.compute_major, g.compute_minor, g.compute_major,
          g.compute_minor, g.multiprocessors, Bytes(g.total_bytes),
          Bytes(g.free_bytes));
  }
  if (!d)
    return true;
  // A cuda step's eval outputs are allocated by evaluations only.
  int64_t need = TrainingBytes(*d);
  std::string target = d->target;
  int64_t have = -1;
  std::string where;
  if (target == "cuda") {
    if (m.gpus.empty()) {
      out << absl::StrFormat("step '%s' (target cuda): needs a GPU; none is "
                             "usable here\n",
                             d->model_name);
      return false;
    }
    if (gpu < 0 || gpu >= static_cast<int>(m.gpus.size())) {
      out << absl::StrFormat("step '%s' (target cuda): no gpu %d here (gpus "
                             "0..%d)\n",
                             d->model_name, gpu, m.gpus.size() - 1);
      return false;
    }
    const GpuInfo &g = m.gpus[gpu];
    std::string why;
    bool runs = ArchRunsOn(d->arch ? d->arch : "", g.compute_major,
                           g.compute_minor, why);
    out << absl::StrFormat("step '%s' (target cuda): built for %s; gpu %d is "
                           "sm_%d%d: %s\n",
                           d->model_name, d->arch ? d->arch : "?", gpu,
                           g.compute_major, g.compute_minor, why);
    if (!runs)
      return false;
    have = g.free_bytes;
    where = absl::StrFormat("free on gpu %d", gpu);
  } else {
    have = m.host_available_bytes;
    where = "available host memory";
  }
  bool fits = have < 0 || need <= have;
  out << absl::StrFormat(
      "step '%s' (target %s): needs %s (params, optimizer state, workspace, "
      "inputs and outputs%s); %s %s: %s\n",
      d->model_name, target, Bytes(need),
      EvalOutputBytes(*d) ? absl::StrFormat("; an evaluation adds %s of eval outputs",
                                            Bytes(EvalOutputBytes(*d)))
                          : "",
      where, Bytes(have), have < 0 ? "unknown" : (fits ? "fits" : "does NOT fit"));
  return fits;
}

bool ArchRunsOn(const std::string &arch, int major, int minor,
                std::string &why) {
  // sm_XY or sm_XYa (XY: major then one minor digit, e.g. 90, 100, 120).
  std::string digits = arch.rfind("sm_", 0) == 0 ? arch.substr(3) : "";
  bool specific = !digits.empty() && digits.back() == 'a';
  if (specific)
    digits.pop_back();
  int number = 0;
  if (digits.size() < 2 ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(digits, &number)) {
    why = "unknown architecture, cannot tell";
    return true;
  }
  int built = number, have = major * 10 + minor;
  std::string rebuild =
      absl::StrFormat("recompile with tcc compile --arch sm_%d%d", major, minor);
  if (have == built) {
    why = "runs natively";
    return true;
  }
  if (specific) {
    why = absl::StrFormat("does NOT run (%s code runs only on sm_%d; %s)", arch,
                          built, rebuild);
    return false;
  }
  if (have > built) {
    why = absl::StrFormat("runs through the embedded PTX, compiled by the "
                          "driver at start (%s for native code)",
                          rebuild);
    return true;
  }
  why = absl::StrFormat("does NOT run (a GPU older than the code; %s)",
                        rebuild);
  return false;
}

} // namespace tcc::trun
