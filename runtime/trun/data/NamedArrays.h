// Named arrays: the data of a step bound as StepKind::kNamedArrays. Every
// step input [B, d1, ..., dk] is fed from the array of its name (files:
// ArrayFiles.h), shaped (N, d1, ..., dk): row i of every array is sample i,
// so a batch takes the same rows from each.
//
// Per-sample shapes must be equal up to dimensions of size 1 ((N,) feeds
// [B, 1] and (N, 1) feeds [B]): the values are then the same, row-major.
//
// dtypes: an array of the input's dtype is copied as stored; otherwise it
// is converted when every value survives exactly, and refused when one
// does not (the error names the file, the value and its index):
//   f32, f64 inputs: float arrays of any width (float64 into f32 rounds to
//     the nearest float32, the one rounding trun does: numpy's default
//     dtype is float64), integer and bool arrays whose values are exact;
//   integer inputs (i32, i64, u8): integer and bool arrays in the input's
//     range, float arrays holding whole numbers in range;
//   f16, bf16 inputs: arrays of that dtype only.
// Float values must be finite. With accuracy (StepBinding::target_input),
// every label must be in [0, classes).
#ifndef TCC_RUNTIME_TRUN_DATA_NAMEDARRAYS_H
#define TCC_RUNTIME_TRUN_DATA_NAMEDARRAYS_H

#include "runtime/trun/data/ArrayFiles.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::trun {

class NamedArrays {
public:
  struct Array {
    int32_t input = -1;   // the step input it feeds (descriptor index)
    std::string source;   // "x.npy" or "train.safetensors:x"
    std::string stored;   // dtype and shape as stored: "float64 (1000, 3)"
    bool converted = false;
    int64_t sample_bytes = 0;  // one sample, in the input's dtype
    std::vector<uint8_t> data; // count() samples, in the input's dtype
  };

  // Reads `value` (ParseArraySpecs, ReadArrays) and binds it to the inputs
  // of `d`, bound as named arrays. `flag` (--data, --test) names the value
  // in errors. Each error is one line: an input with no array, an array
  // that is no input, two arrays for one input, a per-sample shape or a
  // dtype that does not fit, a value that does not convert, sample counts
  // that differ, no samples, or a file that cannot be read.
  static absl::StatusOr<NamedArrays> Load(const std::string &value,
                                          absl::string_view flag,
                                          const tcc_step_descriptor &d,
                                          const StepBinding &binding);
  // The same for arrays already read.
  static absl::StatusOr<NamedArrays> Bind(std::vector<StoredArray> stored,
                                          absl::string_view flag,
                                          const tcc_step_descriptor &d,
                                          const StepBinding &binding);

  int64_t count() const { return count_; }
  // One per step input, descriptor order.
  const std::vector<Array> &arrays() const { return arrays_; }

  // Copies sample `sample` of every array into row `row` of its input's
  // buffer in `batch` (HostBatch::arrays).
  void CopySample(int64_t sample, int64_t row, HostBatch &batch) const;
  // CopySample as a SampleCopier for ShuffledBatches / SequentialBatches;
  // this must outlive them.
  SampleCopier copier() const;

  // One line per input: name, step dtype and shape, the array it comes
  // from (as stored, converted or not) and the samples, e.g.
  //   input 'x' f32 [32, 3] <- x.npy (float64 (1000, 3), converted to f32), 1000 samples
  // Each line starts with `prefix` ("input", "test input").
  std::string BindingLines(const tcc_step_descriptor &d,
                           const StepBinding &binding,
                           absl::string_view prefix = "input") const;

private:
  std::vector<Array> arrays_;
  int64_t count_ = 0;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_NAMEDARRAYS_H
