// trun --diagnose: what this machine offers a step before a run starts —
// host memory, the NVIDIA driver and GPUs (if any), and whether the step's
// buffers fit where its target runs.
#ifndef TCC_RUNTIME_TRUN_STEP_DIAGNOSE_H
#define TCC_RUNTIME_TRUN_STEP_DIAGNOSE_H

#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace tcc::trun {

struct GpuInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0; // e.g. 9.0 for H100 / H200
  int multiprocessors = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = -1; // -1: could not be read
};

struct MachineInfo {
  int64_t host_total_bytes = -1;     // MemTotal, -1: unknown
  int64_t host_available_bytes = -1; // MemAvailable
  // The NVIDIA driver, loaded with dlopen("libcuda.so.1") so that trun runs
  // on machines without one; `driver_error` says why there is none.
  bool has_driver = false;
  std::string driver_error;
  int driver_version = 0; // e.g. 13000 for CUDA 13.0
  std::vector<GpuInfo> gpus;
};

// Reads /proc/meminfo and queries the driver (never fails: what could not
// be read is reported as such). The free memory of a GPU needs a context
// on it: with `free_of` >= 0 only that GPU's is read (the others' stay
// unknown), as the start of a run needs.
MachineInfo ProbeMachine(int free_of = -1);

// Bytes the step needs where it runs: params, optimizer state, workspace,
// inputs, outputs and train outputs (trun allocates exactly these). A cuda
// step's eval outputs are allocated only by an evaluation (by the step,
// on its first eval call without output buffers): TrainingBytes leaves
// them out, EvalOutputBytes is what they add.
int64_t StepBytes(const tcc_step_descriptor &descriptor);
int64_t TrainingBytes(const tcc_step_descriptor &descriptor);
int64_t EvalOutputBytes(const tcc_step_descriptor &descriptor);

// The start of a cuda run: the step's TrainingBytes against the free
// memory of GPU `gpu`, one line on `out` ("memory: the step needs ...");
// FailedPrecondition when it is known not to fit (before any allocation
// fails half way), naming --memory-budget. OK when the free memory cannot
// be read.
absl::Status CheckGpuMemory(const MachineInfo &machine, const tcc_step_descriptor &descriptor,
                            int gpu, std::ostream &out);

// Prints the report; with a descriptor also whether it fits: a "cpu" step
// against available host memory, a "cuda" step against GPU `gpu` — that it
// exists, that its compute capability runs the step's code (the step's
// sm_XY exactly, or a newer GPU through the embedded PTX; not an older one,
// and sm_XYa only on XY), and its free memory. Returns false if the step is
// known not to run there.
bool PrintDiagnosis(const MachineInfo &machine,
                    const tcc_step_descriptor *descriptor, std::ostream &out,
                    int gpu = 0);

// Whether code built for `arch` ("sm_90", "sm_90a", "sm_80") runs on a GPU of
// compute capability major.minor; `why` says how or why not.
bool ArchRunsOn(const std::string &arch, int major, int minor, std::string &why);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_DIAGNOSE_H
