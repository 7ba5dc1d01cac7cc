#include "runtime/trun/step/DeviceMemory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>

namespace tcc::trun {

std::string WithDeviceError(const tcc_device_api &device,
                            absl::string_view message) {
  const char *cause = device.last_error();
  if (!cause || !*cause)
    return std::string(message);
  return absl::StrCat(message, ": ", cause);
}

absl::Status DeviceCallStatus(const tcc_device_api &device, int32_t status,
                              absl::string_view what) {
  if (status == TCC_STATUS_OK)
    return absl::OkStatus();
  return absl::InternalError(
      WithDeviceError(device, absl::StrCat(what, " failed")));
}

absl::StatusOr<std::unique_ptr<DeviceArena>>
DeviceArena::Create(const tcc_device_api &device, absl::string_view category,
                    const std::vector<int64_t> &sizes) {
  std::unique_ptr<DeviceArena> arena(new DeviceArena(device));
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (int64_t size : sizes) {
    offsets.push_back(total);
    uint64_t rounded = 0;
    if (size < 0 ||
        __builtin_add_overflow(static_cast<uint64_t>(size),
                               kDeviceAlignment - 1, &rounded) ||
        __builtin_add_overflow(
            total, rounded / kDeviceAlignment * kDeviceAlignment, &total))
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate the ", category, ": more than 2^64 bytes"));
  }
  arena->bytes_ = std::max(total, kDeviceAlignment);
  arena->base_ = device.alloc(arena->bytes_);
  if (!arena->base_)
    return absl::ResourceExhaustedError(WithDeviceError(
        device, absl::StrCat("cannot allocate ", arena->bytes_,
                             " bytes of GPU memory for the ", category)));
  // trun hands out zero-filled buffers on every target.
  if (absl::Status s = DeviceCallStatus(
          device, device.fill_zero(arena->base_, arena->bytes_),
          absl::StrCat("clearing the ", category));
      !s.ok())
    return s;
  for (uint64_t offset : offsets)
    arena->tensors_.push_back(static_cast<char *>(arena->base_) + offset);
  return arena;
}

DeviceArena::~DeviceArena() {
  if (base_)
    device_.release(base_);
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < (uint64_t{1} << 30))
    return absl::StrFormat("%.1f MiB", bytes / (1024.0 * 1024.0));
  return absl::StrFormat("%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
}

} // namespace tcc::trun
