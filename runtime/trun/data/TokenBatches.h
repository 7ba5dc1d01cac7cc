// Batches of token windows for a token model (StepBinding kTokenModel).
//
// A window at offset p of a shard is T+1 consecutive tokens s[p .. p+T]:
// its row of `tokens` is s[p .. p+T-1] and its row of `targets` is
// s[p+1 .. p+T] (the next token at every position). Windows never cross
// shard boundaries. Two ways of choosing them:
//   random:     batch k, row r takes the window at global offset
//                 key_bits(stream_key(seed, TCC_RNG_DOMAIN_TOKEN_WINDOW, k),
//                          r) mod P
//               where P = sum over shards of max(0, N_i - T) counts every
//               offset a window fits at, shards in order (tcc/counter_rng.h).
//               Batch k is a pure function of (seed, k).
//   sequential: aligned windows at offsets 0, T, 2T, ... of each shard
//               (W = sum of floor((N_i - 1) / T) of them, shards in order);
//               batch b of an epoch takes windows bB .. bB+B-1. An epoch is
//               floor(W / B) batches; the W mod B windows left over are
//               skipped, and the next epoch starts again at window 0.
#ifndef TCC_RUNTIME_TRUN_DATA_TOKENBATCHES_H
#define TCC_RUNTIME_TRUN_DATA_TOKENBATCHES_H

#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/TokenShards.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <vector>

namespace tcc::trun {

// Window lookup over a dataset for context length T.
class TokenWindows {
public:
  // `dataset` must outlive this. context > 0.
  TokenWindows(const TokenDataset &dataset, int64_t context);

  int64_t context() const { return context_; }
  // W: windows at offsets 0, T, 2T, ... of every shard.
  int64_t aligned_count() const { return aligned_prefix_.back(); }
  // P: every offset a window fits at.
  int64_t offset_count() const { return offset_prefix_.back(); }
  // Copies the T+1 tokens of aligned window w in [0, W) to `window`.
  absl::Status ReadAligned(int64_t w, uint16_t *window) const;
  // Copies the T+1 tokens of the window at global offset g in [0, P).
  absl::Status ReadAtOffset(int64_t g, uint16_t *window) const;

private:
  const TokenDataset &dataset_;
  int64_t context_;
  // prefix[i]: windows in shards before shard i; prefix.back(): all.
  std::vector<int64_t> aligned_prefix_, offset_prefix_;
};

// Copies the window `tokens` (T+1 ids) into row `row` of `batch`.
void FillTokenRow(const uint16_t *window, int64_t row, HostBatch &batch);

// Random windows; never runs out. Needs offset_count() > 0. `batch_size`
// is the global batch; the batches filled hold `rows` of it.
class RandomTokenBatches : public BatchSource {
public:
  RandomTokenBatches(const TokenWindows &windows, int64_t batch_size,
                     uint64_t seed, RowSlice rows = {});
  // False only when a shard cannot be read (error() says why).
  bool Next(HostBatch &batch) override;
  int64_t position() const override { return next_batch_; }
  void SeekTo(int64_t batches) override;
  absl::Status error() const override { return error_; }

private:
  const TokenWindows &windows_;
  int64_t batch_size_;
  uint64_t seed_;
  RowSlice rows_;
  int64_t next_batch_ = 0; // k
  std::vector<uint16_t> window_; // T+1 tokens read from a shard
  absl::Status error_;
};

// Sequential aligned windows, epoch after epoch; stops after `max_batches`
// batches (-1: never). Needs aligned_count() >= batch_size (the global
// batch; the batches filled hold `rows` of it).
class SequentialTokenBatches : public BatchSource {
public:
  SequentialTokenBatches(const TokenWindows &windows, int64_t batch_size,
                         int64_t max_batches = -1, RowSlice rows = {});
  // False at the end, or when a shard cannot be read (error() says why).
  bool Next(HostBatch &batch) override;
  int64_t position() const override { return next_batch_; }
  void SeekTo(int64_t batches) override;
  absl::Status error() const override { return error_; }

  int64_t batches_per_epoch() const {
    return windows_.aligned_count() / batch_size_;
  }

private:
  const TokenWindows &windows_;
  int64_t batch_size_;
  int64_t max_batches_;
  RowSlice rows_;
  int64_t next_batch_ = 0;
  std::vector<uint16_t> window_; // T+1 tokens read from a shard
  absl::Status error_;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_TOKENBATCHES_H
