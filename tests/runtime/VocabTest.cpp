#include "runtime/trun/data/Vocab.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

namespace tcc::trun {
namespace {

using testing::TempDir;

void WriteText(const std::string &path, const std::string &text) {
  testing::WriteFile(path, std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(Utf8Test, AcceptsValidAndRejectsInvalidCharacters) {
  EXPECT_EQ(Utf8CharLength("a", 0), 1u);
  EXPECT_EQ(Utf8CharLength("\xC3\xA9", 0), 2u);         // é
  EXPECT_EQ(Utf8CharLength("\xE2\x82\xAC", 0), 3u);     // €
  EXPECT_EQ(Utf8CharLength("\xF0\x9F\x98\x80", 0), 4u); // 😀
  EXPECT_EQ(Utf8CharLength("\x80", 0), 0u);             // continuation
  EXPECT_EQ(Utf8CharLength("\xC0\xAF", 0), 0u);         // overlong
  EXPECT_EQ(Utf8CharLength("\xE0\x80\xAF", 0), 0u);     // overlong
  EXPECT_EQ(Utf8CharLength("\xED\xA0\x80", 0), 0u);     // surrogate
  EXPECT_EQ(Utf8CharLength("\xF4\x90\x80\x80", 0), 0u); // > U+10FFFF
  EXPECT_EQ(Utf8CharLength("\xE2\x82", 0), 0u);         // cut off
  EXPECT_EQ(Utf8CharLength("\xC3(", 0), 0u);            // bad continuation
}

TEST(VocabTest, CharLevelEncodesDecodesAndRoundTripsThroughJson) {
  absl::StatusOr<Vocab> vocab = Vocab::Chars({"\n", " ", "a", "b", "\xC3\xA9"});
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  absl::StatusOr<std::vector<int64_t>> ids = vocab->Encode("ab \xC3\xA9\n");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int64_t>{2, 3, 1, 4, 0}));
  EXPECT_EQ(vocab->Decode(*ids), "ab \xC3\xA9\n");
  EXPECT_EQ(vocab->Encode("abc").status().message(),
            "character 'c' at byte 2 is not in the vocabulary");
  EXPECT_EQ(vocab->Encode("a\xFF").status().message(),
            "text is not valid UTF-8 at byte 1");

  TempDir dir;
  WriteText(dir.File("v.json"), vocab->ToJson());
  absl::StatusOr<Vocab> read = Vocab::Read(dir.File("v.json"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->characters(), vocab->characters());
  EXPECT_EQ(read->ToJson(), vocab->ToJson());
}

TEST(VocabTest, ByteLevelIsTheIdentity) {
  Vocab bytes = Vocab::Bytes();
  EXPECT_EQ(bytes.size(), 256);
  absl::StatusOr<std::vector<int64_t>> ids = bytes.Encode("A\xFF");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int64_t>{65, 255}));
  EXPECT_EQ(bytes.Decode(*ids), "A\xFF");
  EXPECT_EQ(bytes.ToJson(), "{\"format\":\"tcc-vocab\",\"level\":\"byte\","
                            "\"version\":1,\"vocab_size\":256}\n");
}

TEST(VocabTest, RejectsBadCharacterLists) {
  EXPECT_EQ(Vocab::Chars({"a", "a"}).status().message(),
            "token 1 repeats character 'a'");
  EXPECT_EQ(Vocab::Chars({"ab"}).status().message(),
            "token 0 is not one UTF-8 character: 'ab'");
  EXPECT_EQ(Vocab::Chars({"\xFF"}).status().message(),
            "token 0 is not one UTF-8 character: byte(s) 0xff");
}

TEST(VocabTest, ReportsBadFiles) {
  TempDir dir;
  std::string path = dir.File("v.json");
  EXPECT_EQ(Vocab::Read(dir.File("none.json")).status().message(),
            "cannot open vocabulary " + dir.File("none.json"));
  const std::string suffix = " (expected a vocab.json from tcc-data tokenize)";
  struct Case {
    std::string json, message;
  } cases[] = {
      {"[1,", "not valid JSON"},
      {"{\"level\":\"char\"}", "no \"format\": \"tcc-vocab\""},
      {R"({"format":"tcc-vocab","version":2})",
       "unsupported version, this trun reads version 1"},
      {R"({"format":"tcc-vocab","version":1,"level":"char"})",
       "no positive integer \"vocab_size\""},
      {R"({"format":"tcc-vocab","version":1,"level":"char","vocab_size":0,)"
       R"("tokens":[]})",
       "no positive integer \"vocab_size\""},
      {R"({"format":"tcc-vocab","version":1,"level":"word","vocab_size":3})",
       "\"level\" is neither \"byte\" nor \"char\""},
      {R"({"format":"tcc-vocab","version":1,"level":"char","vocab_size":3,)"
       R"("tokens":["a","b"]})",
       "vocab_size 3 but 2 tokens"},
      {R"({"format":"tcc-vocab","version":1,"level":"char","vocab_size":2,)"
       R"("tokens":["a",7]})",
       "token 1 is not a string"},
      {R"({"format":"tcc-vocab","version":1,"level":"byte","vocab_size":255})",
       "byte level with a vocab_size other than 256"},
      // Fields of the wrong JSON type (aborted trun with nlohmann's
      // type_error before issue 36).
      {R"({"format":7,"version":1})", "no \"format\": \"tcc-vocab\""},
      {R"({"format":null,"version":1})", "no \"format\": \"tcc-vocab\""},
      {R"({"format":["tcc-vocab"],"version":1})", "no \"format\": \"tcc-vocab\""},
      {R"({"format":"tcc-vocab","version":1,"level":3,"vocab_size":256})",
       "\"level\" is not a string"},
  };
  for (const Case &c : cases) {
    WriteText(path, c.json);
    EXPECT_EQ(Vocab::Read(path).status().message(),
              path + ": " + c.message + suffix)
        << c.json;
  }
  // An endless file stops at 64 MiB instead of filling memory.
  EXPECT_EQ(Vocab::Read("/dev/zero").status().message(),
            "/dev/zero: more than 64 MiB: not a vocabulary" + suffix);
}

} // namespace
} // namespace tcc::trun
