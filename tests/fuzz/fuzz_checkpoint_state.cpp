// state.json of a checkpoint (runtime/trun/checkpoint/CheckpointState.h),
// read by trun --resume. ReadState takes the checkpoint directory and the
// step it expects; the seeds (make_corpus.py) are written for step 3.
#include "FuzzInput.h"

#include "runtime/trun/checkpoint/CheckpointState.h"

using namespace tcc::trun::checkpoint;

namespace {
constexpr int64_t kStep = 3; // the step of the seed files
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tcc_fuzz::WriteInput(kStateFile, data, size);
  RecordedState recorded;
  absl::Status s = ReadState(tcc_fuzz::ScratchDir(), kStep, recorded);
  tcc_fuzz::Note("ReadState", s);
  if (s.ok()) {
    for (const TensorSpec &spec : recorded.params)
      (void)SpecText(spec.dtype, spec.shape);
    for (const TensorSpec &spec : recorded.optimizer_state)
      (void)SpecText(spec.dtype, spec.shape);
  }
  return 0;
}
