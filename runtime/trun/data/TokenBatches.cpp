#include "runtime/trun/data/TokenBatches.h"

#include "tcc/counter_rng.h"

#include <algorithm>
#include <string>

namespace tcc::trun {
namespace {

// Which shard holds global index `g`, given prefix counts; and the local index.
std::pair<size_t, int64_t> Locate(const std::vector<int64_t> &prefix,
                                  int64_t g) {
  // The last shard whose prefix is <= g (shards with no windows share their
  // prefix with the next shard, so upper_bound skips them).
  size_t shard = static_cast<size_t>(
      std::upper_bound(prefix.begin(), prefix.end(), g) - prefix.begin() - 1);
  return {shard, g - prefix[shard]};
}

} // namespace

TokenWindows::TokenWindows(const TokenDataset &dataset, int64_t context)
    : dataset_(dataset), context_(context) {
  aligned_prefix_.push_back(0);
  offset_prefix_.push_back(0);
  for (const TokenShard &shard : dataset.shards()) {
    int64_t n = shard.num_tokens();
    int64_t aligned = n > context ? (n - 1) / context : 0;
    int64_t offsets = n > context ? n - context : 0;
    aligned_prefix_.push_back(aligned_prefix_.back() + aligned);
    offset_prefix_.push_back(offset_prefix_.back() + offsets);
  }
}

absl::Status TokenWindows::ReadAligned(int64_t w, uint16_t *window) const {
  auto [shard, local] = Locate(aligned_prefix_, w);
  return dataset_.shards()[shard].ReadTokens(local * context_, context_ + 1,
                                             window);
}

absl::Status TokenWindows::ReadAtOffset(int64_t g, uint16_t *window) const {
  auto [shard, local] = Locate(offset_prefix_, g);
  return dataset_.shards()[shard].ReadTokens(local, context_ + 1, window);
}

void FillTokenRow(const uint16_t *window, int64_t row, HostBatch &batch) {
  int64_t T = batch.values_per_sample;
  int32_t *tokens = batch.data.as<int32_t>() + row * T;     // (T)
  int32_t *targets = batch.targets.as<int32_t>() + row * T; // (T)
  for (int64_t t = 0; t < T; ++t) {
    tokens[t] = window[t];
    targets[t] = window[t + 1];
  }
}

RandomTokenBatches::RandomTokenBatches(const TokenWindows &windows,
                                       int64_t batch_size, uint64_t seed, RowSlice rows)
    : windows_(windows), batch_size_(batch_size), seed_(seed),
      rows_(WholeBatch(rows, batch_size)),
      window_(static_cast<size_t>(windows.context() + 1)) {}

bool RandomTokenBatches::Next(HostBatch &batch) {
  uint64_t key = tcc_rng_stream_key(seed_, TCC_RNG_DOMAIN_TOKEN_WINDOW, next_batch_++);
  uint64_t offsets = static_cast<uint64_t>(windows_.offset_count());
  for (int64_t row = 0; row < rows_.count; ++row) {
    // The modulo bias is below P / 2^64.
    int64_t g = static_cast<int64_t>(
        tcc_rng_key_bits(key, static_cast<uint64_t>(rows_.first + row)) % offsets);
    error_ = windows_.ReadAtOffset(g, window_.data());
    if (!error_.ok())
      return false;
    FillTokenRow(window_.data(), row, batch);
  }
  batch.real_rows = rows_.count;
  return true;
}

void RandomTokenBatches::SeekTo(int64_t batches) {
  next_batch_ = std::max<int64_t>(batches, 0); // batch k depends on k only
}

SequentialTokenBatches::SequentialTokenBatches(const TokenWindows &windows,
                                               int64_t batch_size,
                                               int64_t max_batches, RowSlice rows)
    : windows_(windows), batch_size_(batch_size), max_batches_(max_batches),
      rows_(WholeBatch(rows, batch_size)),
      window_(static_cast<size_t>(windows.context() + 1)) {}

bool SequentialTokenBatches::Next(HostBatch &batch) {
  if (max_batches_ >= 0 && next_batch_ >= max_batches_)
    return false;
  int64_t first = (next_batch_++ % batches_per_epoch()) * batch_size_ + rows_.first;
  for (int64_t row = 0; row < rows_.count; ++row) {
    error_ = windows_.ReadAligned(first + row, window_.data());
    if (!error_.ok())
      return false;
    FillTokenRow(window_.data(), row, batch);
  }
  batch.real_rows = rows_.count;
  return true;
}

void SequentialTokenBatches::SeekTo(int64_t batches) {
  // Batch n is a function of n alone (batch n mod batches_per_epoch()).
  next_batch_ = std::max<int64_t>(batches, 0);
  if (max_batches_ >= 0)
    next_batch_ = std::min(next_batch_, max_batches_);
}

} // namespace tcc::trun
