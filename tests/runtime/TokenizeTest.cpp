// tcc-data tokenize: the library (Tokenize.h) and the command line.
#include "runtime/tools/Tokenize.h"

#include "runtime/trun/data/TokenShards.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>


#include <filesystem>
#include <fstream>
#include <sstream>

namespace tcc::data {
namespace {

using trun::testing::CliResult;
using trun::testing::RunCommand;
using trun::testing::TempDir;
using Level = trun::Vocab::Level;

void WriteText(const std::string &path, const std::string &text) {
  trun::testing::WriteFile(path,
                           std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<uint16_t> ShardTokens(const std::string &path) {
  absl::StatusOr<trun::TokenShard> shard = trun::TokenShard::Open(path);
  EXPECT_TRUE(shard.ok()) << shard.status();
  if (!shard.ok())
    return {};
  std::vector<uint16_t> tokens(shard->num_tokens());
  EXPECT_TRUE(shard->ReadTokens(0, shard->num_tokens(), tokens.data()).ok());
  return tokens;
}

TEST(TokenizeTest, CharLevelUsesSortedDistinctCharacters) {
  absl::StatusOr<Tokenized> t = Tokenize("ba\xC3\xA9 a\n", Level::kChar);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab.characters(),
            (std::vector<std::string>{"\n", " ", "a", "b", "\xC3\xA9"}));
  EXPECT_EQ(t->tokens, (std::vector<uint16_t>{3, 2, 4, 1, 2, 0}));
}

TEST(TokenizeTest, ByteLevelIsTheBytes) {
  absl::StatusOr<Tokenized> t = Tokenize("A\xC3\xA9", Level::kByte);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab.size(), 256);
  EXPECT_EQ(t->tokens, (std::vector<uint16_t>{65, 0xC3, 0xA9}));
}

TEST(TokenizeTest, MoreThan65536CharactersIsAnError) {
  std::string text;
  int distinct = 0;
  // U+0100 .. beyond U+10000, skipping surrogates: 65537+ characters.
  for (uint32_t code = 0x100; distinct <= 65536; ++code) {
    if (code >= 0xD800 && code <= 0xDFFF)
      continue;
    if (code < 0x800) {
      text += static_cast<char>(0xC0 | (code >> 6));
    } else if (code < 0x10000) {
      text += static_cast<char>(0xE0 | (code >> 12));
      text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    } else {
      text += static_cast<char>(0xF0 | (code >> 18));
      text += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    }
    text += static_cast<char>(0x80 | (code & 0x3F));
    ++distinct;
  }
  EXPECT_EQ(Tokenize(text, Level::kChar).status().message(),
            "the text has 65537 distinct characters; token shards hold at "
            "most 65536 ids (uint16); use --level byte");
}

class RunTokenizeTest : public ::testing::Test {
protected:
  TokenizeOptions Options(Level level, std::vector<std::string> inputs) {
    TokenizeOptions o;
    o.level = level;
    o.out_prefix = dir_.File("out");
    o.inputs = std::move(inputs);
    return o;
  }
  std::string Error(const TokenizeOptions &o) {
    absl::StatusOr<TokenizeReport> report = RunTokenize(o);
    EXPECT_FALSE(report.ok());
    return std::string(report.status().message());
  }
  TempDir dir_;
};

TEST_F(RunTokenizeTest, SplitsWritesAndIsDeterministic) {
  std::filesystem::create_directories(dir_.File("in/sub"));
  // Created out of order: the walk sorts by path.
  WriteText(dir_.File("in/sub/c.txt"), "cc");
  WriteText(dir_.File("in/b.txt"), "bbbb");
  WriteText(dir_.File("in/a.txt"), "aaaa");
  trun::testing::WriteFile(dir_.File("in/a.dat"), {1, 0, 2}); // binary: skipped
  std::filesystem::create_symlink(dir_.File("in/a.txt"), dir_.File("in/link"));
  TokenizeOptions o = Options(Level::kChar, {dir_.File("in")});
  o.val_fraction = 0.25;
  absl::StatusOr<TokenizeReport> report = RunTokenize(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->corpus.files,
            (std::vector<std::string>{dir_.File("in/a.txt"),
                                      dir_.File("in/b.txt"),
                                      dir_.File("in/sub/c.txt")}));
  EXPECT_EQ(report->corpus.skipped,
            std::vector<std::string>{dir_.File("in/a.dat")});
  // "aaaabbbbcc": 10 tokens, floor(2.5) = 2 to val.
  EXPECT_EQ(report->train_tokens, 8);
  EXPECT_EQ(report->val_tokens, 2);
  EXPECT_EQ(ShardTokens(dir_.File("out_train.bin")),
            (std::vector<uint16_t>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(ShardTokens(dir_.File("out_val.bin")),
            (std::vector<uint16_t>{2, 2}));
  absl::StatusOr<trun::Vocab> vocab =
      trun::Vocab::Read(dir_.File("out_vocab.json"));
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->characters(), (std::vector<std::string>{"a", "b", "c"}));

  std::vector<uint8_t> first = trun::testing::ReadFileBytes(dir_.File("out_train.bin"));
  ASSERT_TRUE(RunTokenize(o).ok());
  EXPECT_EQ(trun::testing::ReadFileBytes(dir_.File("out_train.bin")), first);
}

TEST_F(RunTokenizeTest, ReportsBadInputs) {
  EXPECT_EQ(Error(Options(Level::kByte, {dir_.File("none.txt")})),
            "cannot read " + dir_.File("none.txt") +
                ": No such file or directory");
  WriteText(dir_.File("empty.txt"), "");
  EXPECT_EQ(Error(Options(Level::kByte, {dir_.File("empty.txt")})),
            "no text to tokenize: the 1 files read hold 0 bytes");
  std::filesystem::create_directory(dir_.File("bin"));
  trun::testing::WriteFile(dir_.File("bin/x"), {0, 0});
  EXPECT_EQ(Error(Options(Level::kByte, {dir_.File("bin")})),
            "no text to tokenize: the 0 files read hold 0 bytes (1 binary "
            "files skipped)");
  WriteText(dir_.File("latin1.txt"), "caf\xE9!");
  EXPECT_EQ(Error(Options(Level::kChar, {dir_.File("latin1.txt")})),
            dir_.File("latin1.txt") +
                ": invalid UTF-8 at byte 3 (char level needs UTF-8 text; use "
                "--level byte)");
  TokenizeOptions bytes = Options(Level::kByte, {dir_.File("latin1.txt")});
  bytes.val_fraction = 0; // 5 tokens: nothing for validation, as asked
  EXPECT_TRUE(RunTokenize(bytes).ok());
  WriteText(dir_.File("tiny.txt"), "abc");
  EXPECT_EQ(Error(Options(Level::kChar, {dir_.File("tiny.txt")})),
            "the text has 3 tokens; --val-fraction 0.1 leaves no validation "
            "tokens");
  // A missing output folder is made (TccDataCliTest.CreatesTheOutputFolder);
  // one that cannot be (under a file) is the error.
  TokenizeOptions no_dir = bytes;
  no_dir.out_prefix = dir_.File("tiny.txt/out");
  EXPECT_EQ(Error(no_dir), "cannot create the output folder " + dir_.File("tiny.txt") +
                               ": Not a directory");
}

// Fine-tuning on new text with a base model's ids: text B tokenized with
// --vocab of text A keeps A's id for every character, and A's vocabulary
// is written unchanged beside B's shards.
TEST_F(RunTokenizeTest, ReusesAGivenVocabulary) {
  WriteText(dir_.File("a.txt"), "hello world\n");
  TokenizeOptions a = Options(Level::kChar, {dir_.File("a.txt")});
  a.val_fraction = 0;
  ASSERT_TRUE(RunTokenize(a).ok());
  absl::StatusOr<trun::Vocab> vocab_a = trun::Vocab::Read(dir_.File("out_vocab.json"));
  ASSERT_TRUE(vocab_a.ok()) << vocab_a.status();

  // B alone would number its characters " ", "e", "h", "l", "o", "r", "w"
  // from 0; A's ids are "\n" 0, " " 1, "d" 2, "e" 3, "h" 4, ...
  WriteText(dir_.File("b.txt"), "hello row");
  TokenizeOptions b = Options(Level::kChar, {dir_.File("b.txt")});
  b.level.reset(); // the vocabulary's level
  b.vocab_path = dir_.File("out_vocab.json");
  b.out_prefix = dir_.File("b");
  b.val_fraction = 0;
  absl::StatusOr<TokenizeReport> report = RunTokenize(b);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->level, Level::kChar);
  EXPECT_EQ(report->vocab_size, vocab_a->size());
  absl::StatusOr<std::vector<int64_t>> expected = vocab_a->Encode("hello row");
  ASSERT_TRUE(expected.ok()) << expected.status();
  std::vector<uint16_t> b_tokens = ShardTokens(dir_.File("b_train.bin"));
  EXPECT_EQ(std::vector<int64_t>(b_tokens.begin(), b_tokens.end()), *expected);
  // Without --vocab, 'h' would be id 2 in B's own vocabulary, not A's 4.
  ASSERT_FALSE(b_tokens.empty());
  EXPECT_EQ(b_tokens[0], 4);
  EXPECT_EQ(trun::testing::ReadFileBytes(dir_.File("b_vocab.json")),
            trun::testing::ReadFileBytes(dir_.File("out_vocab.json")));

  // A level from --level must be the vocabulary's.
  b.level = Level::kByte;
  EXPECT_EQ(Error(b), "--level byte but the vocabulary " + dir_.File("out_vocab.json") +
                          " is char level (drop --level to use the vocabulary's)");
  b.level = Level::kChar;
  EXPECT_TRUE(RunTokenize(b).ok());
}

// A character the given vocabulary lacks is an error that names it, the
// file and the byte offset in that file, and lists every missing one.
TEST_F(RunTokenizeTest, AVocabularyLackingACharacterIsAnError) {
  WriteText(dir_.File("a.txt"), "hello world\n");
  TokenizeOptions a = Options(Level::kChar, {dir_.File("a.txt")});
  a.val_fraction = 0;
  ASSERT_TRUE(RunTokenize(a).ok());
  WriteText(dir_.File("b1.txt"), "hello\n");
  WriteText(dir_.File("b2.txt"), "w\xC3\xA9ird\tw\xC3\xA9\n"); // é and a tab
  TokenizeOptions b = Options(Level::kChar, {dir_.File("b1.txt"), dir_.File("b2.txt")});
  b.level.reset();
  b.vocab_path = dir_.File("out_vocab.json");
  b.out_prefix = dir_.File("b");
  EXPECT_EQ(Error(b), dir_.File("b2.txt") + ": character '\xC3\xA9' (U+00E9) at byte 1 is "
                          "not in the vocabulary " + dir_.File("out_vocab.json") +
                          " (char level, 9 tokens); missing from it: "
                          "U+0009 1 time, 'i' (U+0069) 1 time, '\xC3\xA9' (U+00E9) "
                          "2 times (remove them from the text, or tokenize without "
                          "--vocab for a new vocabulary with other ids)");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("b_train.bin")));

  // A byte vocabulary has every byte: any text fits.
  TokenizeOptions bytes = Options(Level::kByte, {dir_.File("a.txt")});
  bytes.out_prefix = dir_.File("bytes");
  bytes.val_fraction = 0;
  ASSERT_TRUE(RunTokenize(bytes).ok());
  WriteText(dir_.File("latin1.txt"), "caf\xE9");
  TokenizeOptions with_bytes = Options(Level::kByte, {dir_.File("latin1.txt")});
  with_bytes.level.reset();
  with_bytes.vocab_path = dir_.File("bytes_vocab.json");
  with_bytes.out_prefix = dir_.File("c");
  with_bytes.val_fraction = 0;
  ASSERT_TRUE(RunTokenize(with_bytes).ok());
  EXPECT_EQ(ShardTokens(dir_.File("c_train.bin")),
            (std::vector<uint16_t>{'c', 'a', 'f', 0xE9}));
  // A vocabulary that is no vocabulary: Vocab::Read's error.
  with_bytes.vocab_path = dir_.File("a.txt");
  EXPECT_EQ(Error(with_bytes), dir_.File("a.txt") + ": not valid JSON (expected a "
                                                    "vocab.json from tcc-data tokenize)");
}

CliResult RunTccData(const std::string &args) {
  return RunCommand(TRUN_TEST_TCC_DATA_BINARY, args);
}

TEST(TccDataCliTest, UsageErrorsExitWithTwo) {
  struct Case {
    std::string args, message;
  } cases[] = {
      {"", "missing command (see tcc-data --help)"},
      {"frob", "unknown command 'frob' (see tcc-data --help)"},
      {"tokenize -o x f", "missing --level char|byte (or --vocab FILE)"},
      {"tokenize --level word -o x f",
       "--level expects char or byte, got 'word'"},
      {"tokenize --level char f", "missing -o OUT_PREFIX"},
      {"tokenize --level char -o x", "no input FILES"},
      {"tokenize --level char --val-fraction 1 -o x f",
       "--val-fraction expects a number in [0, 1), got '1'"},
      {"tokenize --level char --bogus -o x f", "unknown flag '--bogus'"},
      {"tokenize --levl char -o x f", "unknown flag '--levl' (did you mean --level?)"},
      {"tokenize --level char --level byte -o x f", "--level given twice"},
      {"tokenize --vocab a --vocab b -o x f", "--vocab given twice"},
      {"tokenize -o x f --vocab", "--vocab needs a value"},
  };
  for (const Case &c : cases) {
    CliResult r = RunTccData(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_EQ(r.err, "tcc-data: error: " + c.message + "\n") << c.args;
  }
  CliResult help = RunTccData("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.out.rfind("usage: tcc-data tokenize", 0), 0u);
}

TEST(TccDataCliTest, TokenizesFortunesDeterministically) {
  if (!std::filesystem::is_directory(TRUN_TEST_FORTUNES))
    GTEST_SKIP() << "no " << TRUN_TEST_FORTUNES << " (Debian package fortunes)";
  TempDir a, b;
  CliResult ra = RunTccData(std::string("tokenize --level char -o ") +
                            a.File("f") + " " + TRUN_TEST_FORTUNES);
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_NE(ra.out.find("binary files"), std::string::npos) << ra.out;
  CliResult rb = RunTccData(std::string("tokenize --level char -o ") +
                            b.File("f") + " " + TRUN_TEST_FORTUNES);
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  for (const char *name : {"f_train.bin", "f_val.bin", "f_vocab.json"})
    EXPECT_EQ(trun::testing::ReadFileBytes(a.File(name)),
              trun::testing::ReadFileBytes(b.File(name)))
        << name;
  absl::StatusOr<trun::TokenShard> train =
      trun::TokenShard::Open(a.File("f_train.bin"));
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_GT(train->num_tokens(), 2'000'000); // ~2.5 MB of English
  CliResult bad = RunTccData("tokenize --level char -o " + a.File("g") +
                             " /nonexistent/text");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "tcc-data: error: cannot read /nonexistent/text: No such "
                     "file or directory\n");
}

} // namespace
} // namespace tcc::data

namespace tcc::data {
namespace {

// -o into a folder that does not exist yet: tcc-data makes it; a folder
// that cannot be made (under a file) is one clear error.
TEST(TccDataCliTest, CreatesTheOutputFolder) {
  TempDir dir;
  trun::testing::WriteFile(dir.File("text.txt"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n'});
  CliResult made = RunTccData("tokenize --level byte -o " + dir.File("new/sub/f") + " " +
                              dir.File("text.txt"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_TRUE(std::filesystem::exists(dir.File("new/sub/f_train.bin")));
  CliResult blocked = RunTccData("tokenize --level byte -o " + dir.File("text.txt/f") + " " +
                                 dir.File("text.txt"));
  EXPECT_EQ(blocked.exit_code, 1);
  EXPECT_NE(blocked.err.find("cannot create the output folder"), std::string::npos) << blocked.err;
}

} // namespace
} // namespace tcc::data

namespace tcc::data {
namespace {

// The command line of --vocab: ids of the given vocabulary, the vocabulary
// copied beside the shards, exit 1 naming a missing character.
TEST(TccDataCliTest, TokenizesWithAGivenVocabulary) {
  TempDir dir;
  WriteText(dir.File("a.txt"), "the cat sat on the mat\n");
  CliResult a = RunTccData("tokenize --level char --val-fraction 0 -o " + dir.File("a") +
                           " " + dir.File("a.txt"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  WriteText(dir.File("b.txt"), "a cat on a hat\n");
  CliResult b = RunTccData("tokenize --vocab " + dir.File("a_vocab.json") +
                           " --val-fraction 0 -o " + dir.File("b") + " " + dir.File("b.txt"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("char level: vocabulary of 11 tokens from " + dir.File("a_vocab.json")),
            std::string::npos)
      << b.out;
  absl::StatusOr<trun::Vocab> vocab = trun::Vocab::Read(dir.File("b_vocab.json"));
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  absl::StatusOr<std::vector<int64_t>> ids = vocab->Encode("a cat on a hat\n");
  ASSERT_TRUE(ids.ok()) << ids.status();
  std::vector<uint16_t> tokens = ShardTokens(dir.File("b_train.bin"));
  EXPECT_EQ(std::vector<int64_t>(tokens.begin(), tokens.end()), *ids);
  EXPECT_EQ(trun::testing::ReadFileBytes(dir.File("b_vocab.json")),
            trun::testing::ReadFileBytes(dir.File("a_vocab.json")));

  WriteText(dir.File("c.txt"), "a dog\n");
  CliResult missing = RunTccData("tokenize --vocab " + dir.File("a_vocab.json") + " -o " +
                                 dir.File("c") + " " + dir.File("c.txt"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err.rfind("tcc-data: error: " + dir.File("c.txt") +
                                  ": character 'd' (U+0064) at byte 2 is not in the "
                                  "vocabulary " + dir.File("a_vocab.json"),
                              0),
            0u)
      << missing.err;
  CliResult level = RunTccData("tokenize --level byte --vocab " + dir.File("a_vocab.json") +
                               " -o " + dir.File("c") + " " + dir.File("b.txt"));
  EXPECT_EQ(level.exit_code, 1);
  EXPECT_EQ(level.err, "tcc-data: error: --level byte but the vocabulary " +
                           dir.File("a_vocab.json") +
                           " is char level (drop --level to use the vocabulary's)\n");
}

} // namespace
} // namespace tcc::data
