#include "runtime/trun/data/BatchSource.h"

#include "tcc/counter_rng.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

namespace tcc::trun {
namespace {

// Copies sample `sample` of `data` into row `row` of `batch`: u8 pixels
// through the normalizer, float32 images as stored.
void CopySample(const LabeledImages &data, const PixelNormalizer &normalizer,
                int64_t sample, int64_t row, HostBatch &batch) {
  int64_t values = data.pixels_per_image();
  float *image = batch.data.as<float>() + row * values; // (values)
  if (!data.float_pixels.empty()) {
    std::copy_n(data.float_pixels.data() + sample * values, values, image);
  } else {
    const uint8_t *pixels = data.pixels.data() + sample * values;
    for (int64_t k = 0; k < values; ++k)
      image[k] = normalizer.table[pixels[k]];
  }
  batch.targets.as<int32_t>()[row] = data.labels[sample];
}

} // namespace

PixelNormalizer
PixelNormalizer::FromTrainingImages(const LabeledImages &train) {
  PixelNormalizer n;
  // float32 training images are fed as stored and have no u8 pixels to
  // measure: mean 0, std 1 (the table is then plain p/255).
  if (!train.float_pixels.empty()) {
    for (int v = 0; v < 256; ++v)
      n.table[v] = static_cast<float>(v / 255.0);
    return n;
  }
  // A histogram makes the statistics exact and cheap for 47M pixels.
  std::array<int64_t, 256> counts{};
  for (uint8_t p : train.pixels)
    ++counts[p];
  double total = static_cast<double>(train.pixels.size());
  if (total == 0)
    total = 1;
  double sum = 0;
  for (int v = 0; v < 256; ++v)
    sum += counts[v] * (v / 255.0);
  n.mean = sum / total;
  double squares = 0;
  for (int v = 0; v < 256; ++v)
    squares += counts[v] * (v / 255.0 - n.mean) * (v / 255.0 - n.mean);
  n.stddev = std::sqrt(squares / total);
  double divisor = n.stddev > 0 ? n.stddev : 1.0;
  for (int v = 0; v < 256; ++v)
    n.table[v] = static_cast<float>((v / 255.0 - n.mean) / divisor);
  return n;
}

BatchBuffer::BatchBuffer(size_t size_bytes, const tcc_device_api *pinned)
    : size_(size_bytes) {
  if (!pinned) {
    host_ = AlignedBuffer(size_bytes);
    data_ = host_.data();
    return;
  }
  // Never null for an empty buffer, as AlignedBuffer.
  size_t bytes = size_bytes ? size_bytes : kBufferAlignment;
  pinned_ = std::unique_ptr<void, ReleasePinned>(pinned->alloc_pinned(bytes),
                                                 ReleasePinned{pinned});
  data_ = pinned_.get();
  if (data_)
    std::memset(data_, 0, bytes);
}

HostBatch::HostBatch(const StepBinding &binding, const tcc_device_api *pinned)
    : HostBatch(binding.batch_size, binding.values_per_sample,
                binding.targets_per_sample, pinned) {
  arrays.reserve(binding.array_batch_bytes.size()); // no moves below
  for (int64_t bytes : binding.array_batch_bytes)
    arrays.emplace_back(static_cast<size_t>(bytes), pinned);
}

bool HostBatch::ok() const {
  bool all = data.ok() && targets.ok();
  for (const BatchBuffer &array : arrays)
    all &= array.ok();
  return all;
}

std::vector<std::pair<int32_t, const void *>>
HostBatch::Inputs(const StepBinding &binding) const {
  if (!binding.is_named_arrays())
    return {{binding.data_input, data.data()},
            {binding.target_input, targets.data()}};
  std::vector<std::pair<int32_t, const void *>> inputs;
  for (size_t i = 0; i < arrays.size(); ++i)
    inputs.emplace_back(static_cast<int32_t>(i), arrays[i].data());
  return inputs;
}

int64_t HostBatch::ArrayLabel(const StepBinding &binding, int32_t dtype,
                              int64_t row) const {
  const BatchBuffer &labels = arrays[binding.target_input];
  if (dtype == TCC_DTYPE_I64)
    return labels.as<int64_t>()[row];
  return labels.as<int32_t>()[row];
}

HostBatch::HostBatch(int64_t batch_size, int64_t values_per_sample,
                     int64_t targets_per_sample, const tcc_device_api *pinned)
    : batch_size(batch_size), values_per_sample(values_per_sample),
      targets_per_sample(targets_per_sample),
      data(batch_size * values_per_sample * sizeof(float), pinned),
      targets(batch_size * targets_per_sample * sizeof(int32_t), pinned) {}

std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  uint64_t key = tcc_rng_stream_key(seed, TCC_RNG_DOMAIN_SHUFFLE, epoch);
  for (int64_t i = n - 1; i >= 1; --i) {
    uint64_t j = tcc_rng_key_bits(key, n - 1 - i) % static_cast<uint64_t>(i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

RowSlice WholeBatch(RowSlice rows, int64_t batch_size) {
  if (rows.count < 0)
    rows = {0, batch_size};
  return rows;
}

absl::StatusOr<RowSlice> RowsOfRank(int64_t global, int64_t rank, int64_t world) {
  if (world < 1 || rank < 0 || rank >= world)
    return absl::InvalidArgumentError("rank " + std::to_string(rank) + " of " +
                                      std::to_string(world) + " ranks");
  if (global % world != 0)
    return absl::InvalidArgumentError(
        "the global batch of " + std::to_string(global) + " rows does not split into " +
        std::to_string(world) +
        " equal shares (one per rank): use a world size that divides it, or compile "
        "another batch (tcc compile --batch)");
  return RowSlice{rank * (global / world), global / world};
}

namespace {

// Copies `data` through `normalizer`, both of which must outlive the
// batches.
SampleCopier ImageCopier(const LabeledImages &data,
                         const PixelNormalizer &normalizer) {
  return [&data, &normalizer](int64_t sample, int64_t row, HostBatch &batch) {
    CopySample(data, normalizer, sample, row, batch);
  };
}

} // namespace

ShuffledBatches::ShuffledBatches(const LabeledImages &data,
                                 const PixelNormalizer &normalizer,
                                 int64_t batch_size, uint64_t seed, RowSlice rows)
    : ShuffledBatches(data.count, ImageCopier(data, normalizer), batch_size,
                      seed, rows) {}

ShuffledBatches::ShuffledBatches(int64_t count, SampleCopier copy,
                                 int64_t batch_size, uint64_t seed,
                                 RowSlice rows)
    : count_(count), copy_(std::move(copy)), batch_size_(batch_size),
      seed_(seed), rows_(WholeBatch(rows, batch_size)) {}

bool ShuffledBatches::Next(HostBatch &batch) {
  if (epoch_ < 0 || sample_ + batch_size_ > count_) {
    order_ = EpochPermutation(count_, seed_, ++epoch_);
    sample_ = 0;
  }
  batch.samples.resize(rows_.count);
  for (int64_t row = 0; row < rows_.count; ++row) {
    batch.samples[row] = order_[sample_ + rows_.first + row];
    copy_(batch.samples[row], row, batch);
  }
  sample_ += batch_size_;
  ++batches_;
  batch.real_rows = rows_.count;
  return true;
}

void ShuffledBatches::SeekTo(int64_t batches) {
  batches = std::max<int64_t>(batches, 0);
  // max(1, ...) only guards the division; the constructor's precondition
  // (count >= batch_size) makes batches_per_epoch() >= 1.
  int64_t per_epoch = std::max<int64_t>(batches_per_epoch(), 1);
  int64_t epoch = batches / per_epoch;
  if (epoch != epoch_) {
    order_ = EpochPermutation(count_, seed_, epoch);
    epoch_ = epoch;
  }
  sample_ = (batches % per_epoch) * batch_size_;
  batches_ = batches;
}

SequentialBatches::SequentialBatches(const LabeledImages &data,
                                     const PixelNormalizer &normalizer,
                                     int64_t batch_size, int64_t max_samples)
    : SequentialBatches(max_samples >= 0 ? std::min<int64_t>(data.count, max_samples)
                                         : data.count,
                        ImageCopier(data, normalizer), batch_size) {}

SequentialBatches::SequentialBatches(int64_t count, SampleCopier copy,
                                     int64_t batch_size)
    : count_(count), copy_(std::move(copy)), batch_size_(batch_size) {}

bool SequentialBatches::Next(HostBatch &batch) {
  if (sample_ >= count_)
    return false;
  int64_t real = std::min(batch_size_, count_ - sample_);
  for (int64_t row = 0; row < batch_size_; ++row) {
    int64_t sample = sample_ + std::min(row, real - 1); // pad: repeat last
    copy_(sample, row, batch);
  }
  sample_ += real;
  ++batches_;
  batch.real_rows = real;
  return true;
}

void SequentialBatches::SeekTo(int64_t batches) {
  // Clamped before multiplying, so a huge count cannot overflow.
  batches_ = std::clamp<int64_t>(batches, 0, total_batches());
  sample_ = std::min(batches_ * batch_size_, count_);
}

} // namespace tcc::trun
