// Where a token model's vocabulary comes from (VocabLookup.h): beside the
// shards, the checkpoints or the weights, and never bytes for a step whose
// logits are not 256 wide.
#include "runtime/trun/data/VocabLookup.h"

#include "tests/runtime/TestData.h"

#include <fstream>

#include <gtest/gtest.h>

namespace tcc::trun {
namespace {

using testing::TempDir;

void Write(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
}

TEST(VocabLookupTest, NamesBesideShardsCheckpointsAndWeights) {
  EXPECT_EQ(VocabBesideShards("d/fort_train.bin"), "d/fort_vocab.json");
  EXPECT_EQ(VocabBesideShards("d/fort_val.bin"), "d/fort_vocab.json");
  EXPECT_EQ(VocabBesideShards("d/fort.bin"), "d/fort_vocab.json");
  EXPECT_EQ(VocabBesideShards("d/fort_train_*.bin"), std::nullopt);
  EXPECT_EQ(VocabBesideShards("d/tokens.dat"), std::nullopt);
  EXPECT_EQ(VocabInCheckpointDir("ck"), "ck/vocab.json");
  EXPECT_EQ(VocabBesideWeights("out/w.safetensors"), "out/w.vocab.json");
  EXPECT_EQ(VocabBesideWeights("out/w"), "out/w.vocab.json");
}

TEST(VocabLookupTest, FirstExistingCandidateWinsAndIsChecked) {
  TempDir dir;
  absl::StatusOr<Vocab> abc = Vocab::Chars({"a", "b", "c"});
  ASSERT_TRUE(abc.ok());
  Write(dir.File("abc.json"), abc->ToJson());
  std::vector<VocabCandidate> candidates = {
      {dir.File("missing.json"), "beside the shards"},
      {dir.File("abc.json"), "beside the checkpoints"}};
  absl::StatusOr<std::optional<FoundVocab>> found =
      FindVocab(candidates, 3, "m");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->origin, "beside the checkpoints");
  EXPECT_EQ((*found)->vocab.characters(), abc->characters());

  // More tokens than logits: an error naming the file.
  found = FindVocab(candidates, 2, "m");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().message(),
            dir.File("abc.json") + " (beside the checkpoints): 3 tokens, more "
                                   "than step 'm' has logits for (2)");

  // --vocab must exist.
  found = FindVocab({{dir.File("nope.json"), "--vocab", true}}, 3, "m");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().message(),
            "--vocab: " + dir.File("nope.json") + " does not exist");

  // Nothing found: no vocabulary, no error.
  found = FindVocab({{dir.File("missing.json"), "beside the shards"}}, 3, "m");
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
}

TEST(VocabLookupTest, BytesOnlyFor256Logits) {
  absl::StatusOr<Vocab> bytes = VocabForText(std::nullopt, 256, "m");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->level(), Vocab::Level::kByte);
  absl::StatusOr<Vocab> none = VocabForText(std::nullopt, 79, "gpt");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(
                "no vocabulary for step 'gpt' (logits 79 wide; bytes need 256)"),
            std::string::npos)
      << none.status();
}

TEST(VocabLookupTest, StoreCopiesUnlessItIsTheSameFile) {
  TempDir dir;
  absl::StatusOr<Vocab> abc = Vocab::Chars({"a", "b", "c"});
  ASSERT_TRUE(abc.ok());
  Write(dir.File("abc.json"), abc->ToJson());
  FoundVocab found{*abc, dir.File("abc.json"), "--vocab"};
  ASSERT_TRUE(StoreVocab(found, dir.File("abc.json")).ok());
  ASSERT_TRUE(StoreVocab(found, dir.File("copy.json")).ok());
  absl::StatusOr<Vocab> copy = Vocab::Read(dir.File("copy.json"));
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->ToJson(), abc->ToJson());
  EXPECT_FALSE(StoreVocab(found, dir.File("no/such/dir/v.json")).ok());
}

} // namespace
} // namespace tcc::trun
