// The buffers of the further entry points of a step (descriptor.entries):
// what Trainer::CallEntry (TrainerEntries.cpp) keeps per entry between calls.
#ifndef TCC_RUNTIME_TRUN_TRAIN_ENTRYBUFFERS_H
#define TCC_RUNTIME_TRUN_TRAIN_ENTRYBUFFERS_H

#include "runtime/trun/base/AlignedBuffer.h"
#include "runtime/trun/step/DeviceMemory.h"
#include "tcc/step_abi.h"

#include <memory>
#include <vector>

namespace tcc::trun {

struct EntryBuffers {
  // The entry's state tensors (a KV cache): zero-filled host buffers on the
  // CPU, a device arena on the GPU; state_ptrs is args.entry_state.
  std::vector<AlignedBuffer> host_state;
  std::unique_ptr<DeviceArena> device_state;
  std::vector<void *> state_ptrs;
  // GPU steps: the entry's inputs and outputs on the device (one arena
  // each), in its own order.
  std::unique_ptr<DeviceArena> device_inputs, device_outputs;
  std::vector<void *> output_ptrs;
  std::vector<const void *> input_ptrs;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_ENTRYBUFFERS_H
