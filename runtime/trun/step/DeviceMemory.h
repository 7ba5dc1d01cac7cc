// Device memory of GPU steps (target "cuda"), through the tcc_device_api the
// step library exports: trun itself links no CUDA.
//
// One allocation per category (parameters, optimizer state, workspace,
// inputs, eval outputs) is an arena; its tensors are carved at 256-byte
// aligned offsets (the alignment cudaMalloc gives, and enough for any
// vector load), so a step needs a handful of allocations, not one per
// tensor.
#ifndef TCC_RUNTIME_TRUN_STEP_DEVICEMEMORY_H
#define TCC_RUNTIME_TRUN_STEP_DEVICEMEMORY_H

#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tcc::trun {

inline constexpr uint64_t kDeviceAlignment = 256;

// `message`, then ": " and device.last_error() when that says anything.
std::string WithDeviceError(const tcc_device_api &device,
                            absl::string_view message);

// OK for TCC_STATUS_OK; otherwise an Internal error "<what> failed:
// <last_error>".
absl::Status DeviceCallStatus(const tcc_device_api &device, int32_t status,
                              absl::string_view what);

class DeviceArena {
public:
  // One device allocation holding tensors of `sizes` bytes (each >= 0) at
  // 256-byte aligned offsets, zero-filled. At least 256 bytes are allocated,
  // so even an empty tensor gets a non-null pointer. `category` (e.g.
  // "parameters") names the arena in errors:
  //   cannot allocate 1048576 bytes of GPU memory for the workspace: <cause>
  // (ResourceExhausted, the cause from device.last_error()).
  static absl::StatusOr<std::unique_ptr<DeviceArena>>
  Create(const tcc_device_api &device, absl::string_view category,
         const std::vector<int64_t> &sizes);
  ~DeviceArena(); // releases the allocation
  DeviceArena(const DeviceArena &) = delete;
  DeviceArena &operator=(const DeviceArena &) = delete;

  // Tensor i (the order of `sizes`).
  void *tensor(size_t i) const { return tensors_[i]; }
  const std::vector<void *> &tensors() const { return tensors_; }
  uint64_t bytes() const { return bytes_; }

private:
  DeviceArena(const tcc_device_api &device) : device_(device) {}

  const tcc_device_api &device_;
  void *base_ = nullptr;
  uint64_t bytes_ = 0;
  std::vector<void *> tensors_;
};

// "0.3 MiB", "2.00 GiB" (as trun --diagnose prints sizes).
std::string FormatBytes(uint64_t bytes);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_DEVICEMEMORY_H
