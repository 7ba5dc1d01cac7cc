#include "runtime/trun/data/TokenBatches.h"

#include "tcc/counter_rng.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace tcc::trun {
namespace {

using testing::TempDir;

// Shards of consecutive ids starting at `first` (so a window that crossed a
// shard boundary, or a target not shifted by one, breaks the +1 pattern).
class TokenBatchesTest : public ::testing::Test {
protected:
  void Shard(const std::string &name, uint16_t first, int count) {
    std::vector<uint16_t> tokens(count);
    std::iota(tokens.begin(), tokens.end(), first);
    ASSERT_TRUE(WriteTokenShard(dir_.File(name), tokens).ok());
  }
  TokenDataset Open(const std::string &pattern) {
    absl::StatusOr<TokenDataset> data = TokenDataset::Open(dir_.File(pattern));
    EXPECT_TRUE(data.ok()) << data.status();
    return std::move(*data);
  }
  // Row r of a batch: its tokens and targets.
  static std::vector<int32_t> Row(const BatchBuffer &buffer, int64_t row,
                                  int64_t T) {
    const int32_t *p = buffer.as<int32_t>() + row * T;
    return std::vector<int32_t>(p, p + T);
  }
  // Window w (aligned) or at offset g, read as T+1 tokens.
  static std::vector<uint16_t> Aligned(const TokenWindows &windows, int64_t w) {
    std::vector<uint16_t> window(windows.context() + 1);
    EXPECT_TRUE(windows.ReadAligned(w, window.data()).ok());
    return window;
  }
  static std::vector<uint16_t> AtOffset(const TokenWindows &windows,
                                        int64_t g) {
    std::vector<uint16_t> window(windows.context() + 1);
    EXPECT_TRUE(windows.ReadAtOffset(g, window.data()).ok());
    return window;
  }
  TempDir dir_;
};

TEST_F(TokenBatchesTest, CountsWindowsPerShard) {
  Shard("a.bin", 0, 50);    // T=4: aligned (50-1)/4 = 12, offsets 46
  Shard("b.bin", 1000, 4);  // too short for a window of 5
  Shard("c.bin", 2000, 9);  // aligned 2, offsets 5
  TokenDataset data = Open("*.bin");
  TokenWindows windows(data, 4);
  EXPECT_EQ(windows.aligned_count(), 14);
  EXPECT_EQ(windows.offset_count(), 51);
  EXPECT_EQ(Aligned(windows, 0)[0], 0);
  EXPECT_EQ(Aligned(windows, 11)[0], 44);
  EXPECT_EQ(Aligned(windows, 12)[0], 2000);
  EXPECT_EQ(Aligned(windows, 13)[4], 2008); // the last token of c.bin
  EXPECT_EQ(AtOffset(windows, 45)[0], 45);
  EXPECT_EQ(AtOffset(windows, 46)[0], 2000);
  EXPECT_EQ(AtOffset(windows, 50)[4], 2008);
}

TEST_F(TokenBatchesTest, SequentialTakesConsecutiveWindowsAndRestartsEpochs) {
  Shard("a.bin", 0, 30); // T=4: 7 windows; B=3: 2 batches per epoch
  TokenDataset data = Open("a.bin");
  TokenWindows windows(data, 4);
  SequentialTokenBatches batches(windows, 3, /*max_batches=*/5);
  EXPECT_EQ(batches.batches_per_epoch(), 2);
  HostBatch batch(3, 4, 4);
  std::vector<int32_t> firsts;
  while (batches.Next(batch)) {
    EXPECT_EQ(batch.real_rows, 3);
    for (int64_t r = 0; r < 3; ++r) {
      std::vector<int32_t> tokens = Row(batch.data, r, 4);
      std::vector<int32_t> targets = Row(batch.targets, r, 4);
      firsts.push_back(tokens[0]);
      for (int t = 0; t < 4; ++t) {
        EXPECT_EQ(tokens[t], tokens[0] + t);
        EXPECT_EQ(targets[t], tokens[t] + 1);
      }
    }
  }
  // Windows 0..5 (window 6 is the leftover), then again from window 0.
  EXPECT_EQ(firsts, (std::vector<int32_t>{0, 4, 8, 12, 16, 20, 0, 4, 8, 12,
                                          16, 20, 0, 4, 8}));
}

TEST_F(TokenBatchesTest, RandomWindowsFollowTheCounterRng) {
  Shard("a.bin", 0, 40);
  Shard("b.bin", 1000, 20);
  TokenDataset data = Open("*.bin");
  TokenWindows windows(data, 8); // offsets: 32 + 12 = 44
  RandomTokenBatches batches(windows, 4, /*seed=*/7);
  HostBatch batch(4, 8, 8);
  std::set<int32_t> starts;
  for (int64_t k = 0; k < 200; ++k) {
    ASSERT_TRUE(batches.Next(batch));
    uint64_t key = tcc_rng_stream_key(7, TCC_RNG_DOMAIN_TOKEN_WINDOW, k);
    for (int64_t r = 0; r < 4; ++r) {
      int64_t g = static_cast<int64_t>(tcc_rng_key_bits(key, r) % 44);
      int32_t expected = g < 32 ? g : 1000 + (g - 32);
      std::vector<int32_t> tokens = Row(batch.data, r, 8);
      std::vector<int32_t> targets = Row(batch.targets, r, 8);
      ASSERT_EQ(tokens[0], expected) << "batch " << k << " row " << r;
      for (int t = 0; t < 8; ++t) {
        ASSERT_EQ(tokens[t], tokens[0] + t); // never crosses a shard
        ASSERT_EQ(targets[t], tokens[t] + 1);
      }
      starts.insert(tokens[0]);
    }
  }
  EXPECT_EQ(starts.size(), 44u); // 800 draws reach every offset
  EXPECT_TRUE(starts.count(31) && starts.count(1011));
}

TEST_F(TokenBatchesTest, SameSeedSameBatchesOtherSeedDiffers) {
  Shard("a.bin", 0, 500);
  TokenDataset data = Open("a.bin");
  TokenWindows windows(data, 16);
  RandomTokenBatches a(windows, 4, 3), b(windows, 4, 3), c(windows, 4, 4);
  HostBatch ba(4, 16, 16), bb(4, 16, 16), bc(4, 16, 16);
  bool all_equal_c = true;
  for (int k = 0; k < 10; ++k) {
    a.Next(ba);
    b.Next(bb);
    c.Next(bc);
    for (int64_t r = 0; r < 4; ++r) {
      EXPECT_EQ(Row(ba.data, r, 16), Row(bb.data, r, 16));
      EXPECT_EQ(Row(ba.targets, r, 16), Row(bb.targets, r, 16));
      all_equal_c &= Row(ba.data, r, 16) == Row(bc.data, r, 16);
    }
  }
  EXPECT_FALSE(all_equal_c);
}

// Tokens and targets of every row, with the real rows.
std::pair<std::vector<int32_t>, std::vector<int32_t>>
Contents(const HostBatch &batch) {
  int64_t n = batch.batch_size * batch.values_per_sample;
  const int32_t *tokens = batch.data.as<int32_t>();
  const int32_t *targets = batch.targets.as<int32_t>();
  return {std::vector<int32_t>(tokens, tokens + n),
          std::vector<int32_t>(targets, targets + n)};
}

// 7 windows, B = 3: 2 batches per epoch (batches 2, 4, ... start epochs).
TEST_F(TokenBatchesTest, SequentialSeekToMatchesAFreshSource) {
  Shard("a.bin", 0, 30);
  TokenDataset data = Open("a.bin");
  TokenWindows windows(data, 4);
  SequentialTokenBatches reference(windows, 3);
  HostBatch batch(3, 4, 4);
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> fed;
  for (int64_t k = 0; k < 9; ++k) {
    EXPECT_EQ(reference.position(), k);
    ASSERT_TRUE(reference.Next(batch));
    fed.push_back(Contents(batch));
  }
  ASSERT_NE(fed[0], fed[1]);
  // Inside epoch 0, at the epoch 1 boundary, inside and at later epochs.
  for (int64_t k : {0, 1, 2, 3, 6, 7}) {
    SequentialTokenBatches seeked(windows, 3);
    seeked.SeekTo(k);
    EXPECT_EQ(seeked.position(), k);
    ASSERT_TRUE(seeked.Next(batch));
    EXPECT_EQ(Contents(batch), fed[k]) << "batch " << k;
    ASSERT_TRUE(seeked.Next(batch));
    EXPECT_EQ(Contents(batch), fed[k + 1]) << "batch " << k + 1;
    EXPECT_EQ(seeked.position(), k + 2);
  }
  // With a limit: seeking past it stops at the end.
  SequentialTokenBatches limited(windows, 3, /*max_batches=*/5);
  limited.SeekTo(4);
  ASSERT_TRUE(limited.Next(batch));
  EXPECT_EQ(Contents(batch), fed[4]);
  EXPECT_FALSE(limited.Next(batch));
  EXPECT_EQ(limited.position(), 5);
  limited.SeekTo(9);
  EXPECT_EQ(limited.position(), 5);
  EXPECT_FALSE(limited.Next(batch));
  limited.SeekTo(-2);
  EXPECT_EQ(limited.position(), 0);
  ASSERT_TRUE(limited.Next(batch));
  EXPECT_EQ(Contents(batch), fed[0]);
}

TEST_F(TokenBatchesTest, RandomSeekToMatchesAFreshSource) {
  Shard("a.bin", 0, 300);
  TokenDataset data = Open("a.bin");
  TokenWindows windows(data, 8);
  RandomTokenBatches reference(windows, 4, /*seed=*/5);
  HostBatch batch(4, 8, 8);
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> fed;
  for (int64_t k = 0; k < 60; ++k) {
    EXPECT_EQ(reference.position(), k);
    ASSERT_TRUE(reference.Next(batch));
    fed.push_back(Contents(batch));
  }
  ASSERT_NE(fed[0], fed[1]);
  for (int64_t k : {0, 1, 3, 17, 58}) {
    RandomTokenBatches seeked(windows, 4, 5);
    seeked.SeekTo(k);
    EXPECT_EQ(seeked.position(), k);
    ASSERT_TRUE(seeked.Next(batch));
    EXPECT_EQ(Contents(batch), fed[k]) << "batch " << k;
    ASSERT_TRUE(seeked.Next(batch));
    EXPECT_EQ(Contents(batch), fed[k + 1]) << "batch " << k + 1;
    EXPECT_EQ(seeked.position(), k + 2);
  }
  RandomTokenBatches used(windows, 4, 5);
  for (int i = 0; i < 30; ++i)
    used.Next(batch);
  used.SeekTo(2); // backwards
  ASSERT_TRUE(used.Next(batch));
  EXPECT_EQ(Contents(batch), fed[2]);
  used.SeekTo(-1);
  EXPECT_EQ(used.position(), 0);
}

} // namespace
} // namespace tcc::trun

namespace tcc::trun {
namespace {

// Data parallelism: ranks reading their RowSlice of each global batch see
// together, row for row, the batches of one process reading all of them
// (random and sequential windows, over epochs), so N ranks x B/N rows
// compute the step of one rank x B.
TEST_F(TokenBatchesTest, RankSlicesTogetherAreTheGlobalBatch) {
  Shard("a.bin", 0, 300);
  Shard("b.bin", 1000, 200);
  TokenDataset data = Open("*.bin");
  TokenWindows windows(data, 8);
  const int64_t B = 6, T = 8;
  for (int64_t ranks : {1, 2, 3, 6}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    RandomTokenBatches whole_random(windows, B, /*seed=*/11);
    SequentialTokenBatches whole_sequential(windows, B);
    std::vector<RandomTokenBatches> random;
    std::vector<SequentialTokenBatches> sequential;
    for (int64_t r = 0; r < ranks; ++r) {
      absl::StatusOr<RowSlice> rows = RowsOfRank(B, r, ranks);
      ASSERT_TRUE(rows.ok()) << rows.status();
      EXPECT_EQ(rows->first, r * B / ranks);
      EXPECT_EQ(rows->count, B / ranks);
      random.emplace_back(windows, B, 11, *rows);
      sequential.emplace_back(windows, B, -1, *rows);
    }
    HostBatch whole(B, T, T), part(B / ranks, T, T);
    for (int k = 0; k < 2 * whole_sequential.batches_per_epoch() + 1; ++k) {
      for (bool is_random : {true, false}) {
        ASSERT_TRUE(is_random ? whole_random.Next(whole) : whole_sequential.Next(whole));
        for (int64_t r = 0; r < ranks; ++r) {
          ASSERT_TRUE(is_random ? random[r].Next(part) : sequential[r].Next(part));
          EXPECT_EQ(part.real_rows, B / ranks);
          for (int64_t row = 0; row < B / ranks; ++row) {
            EXPECT_EQ(Row(part.data, row, T), Row(whole.data, r * (B / ranks) + row, T));
            EXPECT_EQ(Row(part.targets, row, T), Row(whole.targets, r * (B / ranks) + row, T));
          }
        }
      }
    }
  }
}

TEST(RowsOfRank, RanksMustDivideTheGlobalBatch) {
  absl::StatusOr<RowSlice> rows = RowsOfRank(16, 1, 3);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().message(),
            "the global batch of 16 rows does not split into 3 equal shares (one per rank): "
            "use a world size that divides it, or compile another batch (tcc compile --batch)");
}

} // namespace
} // namespace tcc::trun
