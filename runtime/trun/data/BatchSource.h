// Host batches for the step: normalized f32 images and i32 labels (token
// batches: TokenBatches.h; named arrays: NamedArrays.h).
//
// A BatchSource is what the Trainer pulls from, usually through a
// background loader thread (BatchLoader) that fills the batches; for a GPU
// step those batches live in pinned (page-locked) host memory.
#ifndef TCC_RUNTIME_TRUN_DATA_BATCHSOURCE_H
#define TCC_RUNTIME_TRUN_DATA_BATCHSOURCE_H

#include "runtime/trun/base/AlignedBuffer.h"
#include "runtime/trun/data/IdxDataset.h"
#include "runtime/trun/data/StepBinding.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace tcc::trun {

// Pixel p (0..255) becomes (p / 255 - mean) / stddev, with mean and stddev
// (population) of p / 255 over every pixel of the training images. The same
// table is used for the test images. A constant image set (stddev 0) only
// gets the mean removed. float32 images (.npy) are fed as stored: their
// normalizer is mean 0, stddev 1 and is not applied.
struct PixelNormalizer {
  static PixelNormalizer FromTrainingImages(const LabeledImages &train);

  double mean = 0;
  double stddev = 1;
  std::array<float, 256> table{};
};

// Zero-filled host memory of one batch buffer: 64-byte aligned
// (AlignedBuffer), or page-locked from a GPU step's device->alloc_pinned
// (256-byte aligned), so the copy to the GPU can run asynchronously.
class BatchBuffer {
public:
  // `pinned`: the device API to allocate (and release) through; null for
  // ordinary host memory.
  BatchBuffer(size_t size_bytes, const tcc_device_api *pinned);

  // False when the allocation failed.
  bool ok() const { return data_ != nullptr; }
  bool pinned() const { return pinned_ != nullptr; }
  void *data() { return data_; }
  const void *data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T> T *as() { return static_cast<T *>(data_); }
  template <typename T> const T *as() const {
    return static_cast<const T *>(data_);
  }

private:
  struct ReleasePinned {
    const tcc_device_api *device;
    void operator()(void *p) const { device->release_pinned(p); }
  };
  AlignedBuffer host_;
  std::unique_ptr<void, ReleasePinned> pinned_{nullptr, {nullptr}};
  void *data_ = nullptr;
  size_t size_ = 0;
};

// One batch for the step's fed inputs (StepBinding).
struct HostBatch {
  // Sized for `binding`: `data` holds batch_size * values_per_sample 4-byte
  // values, `targets` batch_size * targets_per_sample i32; named arrays:
  // `arrays` holds one buffer per step input instead. `pinned`: a GPU
  // step's device API, to allocate them in pinned memory (null: ordinary
  // 64-byte aligned host memory).
  explicit HostBatch(const StepBinding &binding,
                     const tcc_device_api *pinned = nullptr);
  // An image batch: data f32 (batch_size, values_per_sample), targets i32
  // (batch_size).
  HostBatch(int64_t batch_size, int64_t values_per_sample,
            int64_t targets_per_sample = 1,
            const tcc_device_api *pinned = nullptr);

  // False when a buffer could not be allocated.
  bool ok() const;
  // The step input each buffer feeds: {input index, host data}, for every
  // input the binding feeds.
  std::vector<std::pair<int32_t, const void *>>
  Inputs(const StepBinding &binding) const;
  // Named arrays with accuracy: label `row` of the labels input (i32 or
  // i64; binding.target_input).
  int64_t ArrayLabel(const StepBinding &binding, int32_t dtype,
                     int64_t row) const;

  int64_t batch_size;
  int64_t values_per_sample;
  int64_t targets_per_sample;
  BatchBuffer data;      // images f32 (B, values)  | tokens i32 (B, T)
  BatchBuffer targets;   // labels i32 (B)          | targets i32 (B, T)
  // Named arrays: input i's whole batch (binding.array_batch_bytes[i]),
  // descriptor order; empty for the other kinds. Never resized (the
  // buffers must not move).
  std::vector<BatchBuffer> arrays;
  int64_t real_rows = 0; // leading rows from the data; the rest are padding
  // Training batches (ShuffledBatches): the data-set index of the sample in
  // each row (trun's encode cache keys its rows by it); empty otherwise.
  std::vector<int64_t> samples;
};

// Copies sample `sample` of a data set into row `row` of a batch.
using SampleCopier =
    std::function<void(int64_t sample, int64_t row, HostBatch &batch)>;

class BatchSource {
public:
  virtual ~BatchSource() = default;
  // Fills `batch`; returns false when the source has no more batches, or
  // when it could not read its data: error() then says why.
  virtual bool Next(HostBatch &batch) = 0;
  // Why the last Next() returned false, if not the end (a token shard cut
  // short while trun runs); OK otherwise.
  virtual absl::Status error() const { return absl::OkStatus(); }
  // Batches handed out so far: the data cursor a checkpoint stores.
  virtual int64_t position() const = 0;
  // Continues as if `batches` batches had been handed out: the next Next()
  // returns the same batch a fresh source would return as batch number
  // `batches` (0-based). Cheap: no batches are produced to get there.
  // A negative count seeks to 0; a source that ends stops at its end
  // (position() is then its total and Next() returns false).
  virtual void SeekTo(int64_t batches) = 0;
};

// The permutation used for `epoch` (0-based): Fisher-Yates from the identity,
// for i = n-1 down to 1: swap(p[i], p[j]) with
//   j = key_bits(stream_key(seed, TCC_RNG_DOMAIN_SHUFFLE, epoch), n-1-i)
//       mod (i+1)
// (tcc/counter_rng.h; the modulo bias is below n / 2^64).
std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch);

// The rows of each global batch one data-parallel rank reads: rows
// [first, first + count) of `global` (count -1: all of them). Row r of
// global batch k is the same sample (token window, image) whichever rank
// reads it, so N ranks reading their slices see together the batches one
// process would.
struct RowSlice {
  int64_t first = 0;
  int64_t count = -1;
};

// Rank `rank` of `world`'s equal share of a global batch of `global` rows;
// an error saying so when the ranks do not divide it.
absl::StatusOr<RowSlice> RowsOfRank(int64_t global, int64_t rank, int64_t world);

// `rows`, or all `batch_size` rows of a batch when rows.count is -1.
RowSlice WholeBatch(RowSlice rows, int64_t batch_size);

// Training batches: full batches in a fresh permutation each epoch; the
// n mod B samples left at the end of an epoch are skipped in that epoch.
// Never runs out.
class ShuffledBatches : public BatchSource {
public:
  // `data` and `normalizer` must outlive this. data.count >= batch_size.
  // `batch_size`: the global batch; the batches filled hold `rows` of it.
  ShuffledBatches(const LabeledImages &data, const PixelNormalizer &normalizer,
                  int64_t batch_size, uint64_t seed, RowSlice rows = {});
  // Any `count` samples, copied by `copy` (named arrays).
  ShuffledBatches(int64_t count, SampleCopier copy, int64_t batch_size,
                  uint64_t seed, RowSlice rows = {});
  bool Next(HostBatch &batch) override;
  int64_t position() const override { return batches_; }
  // Recomputes the permutation of the epoch batch `batches` falls in.
  void SeekTo(int64_t batches) override;

  int64_t batches_per_epoch() const { return count_ / batch_size_; }

private:
  int64_t count_;
  SampleCopier copy_;
  int64_t batch_size_;
  uint64_t seed_;
  RowSlice rows_;
  int64_t epoch_ = -1;  // whose permutation order_ holds; -1: none yet
  int64_t sample_ = 0;  // next index into order_
  int64_t batches_ = 0; // handed out
  std::vector<int64_t> order_;
};

// Evaluation batches: every sample once, in file order. The last partial
// batch is padded with copies of its last real sample.
class SequentialBatches : public BatchSource {
public:
  // The first `max_samples` images only when >= 0 (trun --test-batches).
  SequentialBatches(const LabeledImages &data,
                    const PixelNormalizer &normalizer, int64_t batch_size,
                    int64_t max_samples = -1);
  // Any `count` samples, copied by `copy` (named arrays).
  SequentialBatches(int64_t count, SampleCopier copy, int64_t batch_size);
  bool Next(HostBatch &batch) override;
  int64_t position() const override { return batches_; }
  void SeekTo(int64_t batches) override;

  // ceil(count / batch_size): every batch this source hands out.
  int64_t total_batches() const {
    return (count_ + batch_size_ - 1) / batch_size_;
  }

private:
  int64_t count_;
  SampleCopier copy_;
  int64_t batch_size_;
  int64_t sample_ = 0;  // first sample of the next batch
  int64_t batches_ = 0; // handed out
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_BATCHSOURCE_H
