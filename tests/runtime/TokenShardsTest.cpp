#include "runtime/trun/data/TokenShards.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tcc::trun {
namespace {

using testing::TempDir;

// A shard's bytes with a chosen header, independent of TokenShardHeader.
std::vector<uint8_t> ShardBytes(int32_t magic, int32_t version, int32_t count,
                                const std::vector<uint16_t> &tokens) {
  std::vector<uint8_t> bytes(1024, 0);
  int32_t fields[3] = {magic, version, count};
  std::memcpy(bytes.data(), fields, sizeof(fields));
  for (uint16_t t : tokens) {
    bytes.push_back(static_cast<uint8_t>(t & 0xFF));
    bytes.push_back(static_cast<uint8_t>(t >> 8));
  }
  return bytes;
}

std::string OpenError(const std::string &path) {
  absl::StatusOr<TokenShard> shard = TokenShard::Open(path);
  EXPECT_FALSE(shard.ok());
  return std::string(shard.status().message());
}

TEST(TokenShardTest, WriteThenOpenRoundTrips) {
  TempDir dir;
  std::vector<uint16_t> tokens = {0, 1, 65535, 300, 7};
  ASSERT_TRUE(WriteTokenShard(dir.File("a.bin"), tokens).ok());
  // The exact bytes of the format: little-endian header, then uint16 ids.
  EXPECT_EQ(testing::ReadFileBytes(dir.File("a.bin")),
            ShardBytes(20240520, 1, 5, tokens));
  absl::StatusOr<TokenShard> shard = TokenShard::Open(dir.File("a.bin"));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_EQ(shard->num_tokens(), 5);
  std::vector<uint16_t> read(5);
  ASSERT_TRUE(shard->ReadTokens(0, 5, read.data()).ok());
  EXPECT_EQ(read, tokens);
}

TEST(TokenShardTest, EmptyShardIsValid) {
  TempDir dir;
  ASSERT_TRUE(WriteTokenShard(dir.File("e.bin"), {}).ok());
  absl::StatusOr<TokenShard> shard = TokenShard::Open(dir.File("e.bin"));
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->num_tokens(), 0);
}

TEST(TokenShardTest, ReportsMissingTruncatedAndCorruptShards) {
  TempDir dir;
  EXPECT_EQ(OpenError(dir.File("none.bin")),
            "cannot open " + dir.File("none.bin") +
                ": No such file or directory");

  std::string path = dir.File("s.bin");
  testing::WriteFile(path, std::vector<uint8_t>(100, 0));
  EXPECT_EQ(OpenError(path), path +
                                 ": 100 bytes, shorter than the 1024-byte "
                                 "token shard header (truncated or not a "
                                 "token shard)");

  std::vector<uint8_t> good = ShardBytes(20240520, 1, 4, {1, 2, 3, 4});
  std::vector<uint8_t> cut(good.begin(), good.end() - 3);
  testing::WriteFile(path, cut);
  EXPECT_EQ(OpenError(path), path +
                                 ": header says 4 tokens (1032 bytes) but the "
                                 "file has 1029 bytes (truncated)");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  testing::WriteFile(path, longer);
  EXPECT_EQ(OpenError(path), path +
                                 ": header says 4 tokens (1032 bytes) but the "
                                 "file has 1033 bytes (trailing data)");

  testing::WriteFile(path, ShardBytes(12345, 1, 1, {1}));
  EXPECT_EQ(OpenError(path),
            path + ": bad magic 12345, expected 20240520 (not a token shard)");
  testing::WriteFile(path, ShardBytes(20240801, 7, 1, {1}));
  EXPECT_NE(OpenError(path).find("llm.c's uint32 token format"),
            std::string::npos);
  testing::WriteFile(path, ShardBytes(20240520, 2, 1, {1}));
  EXPECT_EQ(OpenError(path),
            path + ": token shard version 2, trun reads version 1");
  testing::WriteFile(path, ShardBytes(20240520, 1, -3, {}));
  EXPECT_EQ(OpenError(path),
            path + ": header token count -3 is negative (corrupt header)");
  EXPECT_NE(OpenError(dir.path()).find("is a directory"), std::string::npos);
}

TEST(TokenDatasetTest, GlobOpensMatchesInSortedOrder) {
  TempDir dir;
  ASSERT_TRUE(WriteTokenShard(dir.File("train_01.bin"), {3, 4}).ok());
  ASSERT_TRUE(WriteTokenShard(dir.File("train_00.bin"), {1, 2}).ok());
  ASSERT_TRUE(WriteTokenShard(dir.File("val_00.bin"), {9}).ok());
  absl::StatusOr<TokenDataset> data =
      TokenDataset::Open(dir.File("train_*.bin"));
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->shards().size(), 2u);
  EXPECT_EQ(data->shards()[0].path(), dir.File("train_00.bin"));
  uint16_t first = 0;
  ASSERT_TRUE(data->shards()[1].ReadTokens(0, 1, &first).ok());
  EXPECT_EQ(first, 3);
  EXPECT_EQ(data->total_tokens(), 4);
  EXPECT_EQ(data->Describe(),
            "2 shards matching '" + dir.File("train_*.bin") + "'");

  absl::StatusOr<TokenDataset> none = TokenDataset::Open(dir.File("x*.bin"));
  EXPECT_EQ(none.status().message(),
            "no token shards match '" + dir.File("x*.bin") + "'");

  // One bad shard among the matches fails the whole set, naming it.
  testing::WriteFile(dir.File("train_02.bin"), {1, 2, 3});
  absl::StatusOr<TokenDataset> bad = TokenDataset::Open(dir.File("train_*"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(dir.File("train_02.bin")),
            std::string::npos)
      << bad.status();
}

TEST(TokenDatasetTest, ChecksTokenRange) {
  TempDir dir;
  ASSERT_TRUE(WriteTokenShard(dir.File("a.bin"), {1, 2, 64, 3, 65, 2}).ok());
  absl::StatusOr<TokenDataset> data = TokenDataset::Open(dir.File("a.bin"));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(data->CheckTokensBelow(66, "width 66").ok());
  EXPECT_EQ(data->CheckTokensBelow(65, "'logits' width 65").message(),
            dir.File("a.bin") +
                ": token 65 at position 4 is out of range for 'logits' "
                "width 65");
  EXPECT_EQ(data->CheckTokensBelow(64, "w").message(),
            dir.File("a.bin") + ": token 64 at position 2 is out of range for w");
}

} // namespace
} // namespace tcc::trun
