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

CliResult RunTccData(const std::string &args) {
  return RunCommand(TRUN_TEST_TCC_DATA_BINARY, args);
}

TEST(TccDataCliTest, UsageErrorsExitWithTwo) {
  struct Case {
    std::string args, message;
  } cases[] = {
      {"", "missing command (see tcc-data --help)"},
      {"frob", "unknown command 'frob' (see tcc-data --help)"},
      {"tokenize -o x f", "missing --level char|byte"},
      {"tokenize --level word -o x f",
       "--level expects char or byte, got 'word'"},
      {"tokenize --level char f", "missing -o OUT_PREFIX"},
      {"tokenize --level char -o x", "no input FILES"},
      {"tokenize --level char --val-fraction 1 -o x f",
       "--val-fraction expects a number in [0, 1), got '1'"},
      {"tokenize --level char --bogus -o x f", "unknown flag '--bogus'"},
      {"tokenize --levl char -o x f", "unknown flag '--levl' (did you mean --level?)"},
      {"tokenize --level char --level byte -o x f", "--level given twice"},
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
