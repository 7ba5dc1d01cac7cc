// Inputs cut short (an interrupted copy, a full disk) or shrinking while trun
// runs: each must be an error naming the file, never a SIGBUS.
#include "runtime/trun/data/BatchLoader.h"
#include "runtime/trun/data/TokenBatches.h"
#include "runtime/trun/data/TokenShards.h"
#include "runtime/trun/io/Safetensors.h"
#include "runtime/trun/step/ElfCheck.h"
#include "runtime/trun/step/StepLibrary.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <elf.h>

#include <cstring>
#include <filesystem>
#include <numeric>

namespace tcc::trun {
namespace {

using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFile;
namespace fs = std::filesystem;

constexpr absl::string_view kNotAStepLibrary =
    " is truncated or not a step library: ";

// The error of CheckStepLibraryFile on `bytes` written to dir/step.so.
std::string ElfError(const TempDir &dir, const std::vector<uint8_t> &bytes) {
  std::string path = dir.File("step.so");
  WriteFile(path, bytes);
  absl::Status status = CheckStepLibraryFile(path);
  EXPECT_FALSE(status.ok()) << bytes.size() << " bytes";
  std::string message(status.message());
  EXPECT_EQ(message.rfind(path + std::string(kNotAStepLibrary), 0), 0u)
      << message;
  return message;
}

TEST(ElfCheckTest, AcceptsAWholeStepLibrary) {
  EXPECT_TRUE(CheckStepLibraryFile(TRUN_TEST_LINEAR_STEP).ok());
  EXPECT_TRUE(CheckStepLibraryFile(TRUN_TEST_BIGRAM_STEP).ok());
}

// A cut anywhere is caught (the section header table comes last; segments
// and program headers fail earlier cuts): checked at every byte of the first
// 200, every 97th byte after that, and one byte short of the end.
TEST(ElfCheckTest, RefusesTheLibraryCutAtAnyByte) {
  TempDir dir;
  std::vector<uint8_t> whole = ReadFileBytes(TRUN_TEST_LINEAR_STEP);
  ASSERT_GT(whole.size(), 1000u);
  // Every byte of the headers, then a stride through the rest and the end.
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 200; ++n)
    cuts.push_back(n);
  for (size_t n = 200; n < whole.size(); n += 97)
    cuts.push_back(n);
  cuts.push_back(whole.size() - 1);
  for (size_t cut : cuts) {
    std::vector<uint8_t> bytes(whole.begin(), whole.begin() + cut);
    std::string message = ElfError(dir, bytes);
    const char *expected = cut < sizeof(Elf64_Ehdr)
                               ? "shorter than the 64-byte ELF header"
                               : "past the end of the file";
    EXPECT_NE(message.find(expected), std::string::npos)
        << "cut at " << cut << ": " << message;
  }
  // The library itself also refuses it, before dlopen can fault.
  WriteFile(dir.File("step.so"),
            std::vector<uint8_t>(whole.begin(), whole.begin() + whole.size() / 2));
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(dir.File("step.so"));
  ASSERT_FALSE(library.ok());
  EXPECT_NE(library.status().message().find(kNotAStepLibrary),
            std::string::npos)
      << library.status();
}

TEST(ElfCheckTest, NamesWhatIsWrongWithTheHeader) {
  TempDir dir;
  std::vector<uint8_t> whole = ReadFileBytes(TRUN_TEST_LINEAR_STEP);
  EXPECT_NE(ElfError(dir, {'h', 'i'}).find(
                "2 bytes, shorter than the 64-byte ELF header"),
            std::string::npos);
  std::vector<uint8_t> text(100, 'x');
  EXPECT_NE(ElfError(dir, text).find("no ELF magic"), std::string::npos);

  std::vector<uint8_t> bytes = whole;
  bytes[EI_CLASS] = ELFCLASS32;
  EXPECT_NE(ElfError(dir, bytes).find("not a 64-bit ELF file"),
            std::string::npos);

  bytes = whole;
  uint16_t executable = ET_EXEC;
  std::memcpy(bytes.data() + offsetof(Elf64_Ehdr, e_type), &executable, 2);
  EXPECT_NE(ElfError(dir, bytes).find("not a shared library"),
            std::string::npos);

  bytes = whole;
  uint16_t other_machine = EM_RISCV;
  std::memcpy(bytes.data() + offsetof(Elf64_Ehdr, e_machine), &other_machine,
              2);
  EXPECT_NE(ElfError(dir, bytes).find("built for ELF machine 243"),
            std::string::npos);

  // A loadable segment whose file bytes lie past the end (offset moved).
  bytes = whole;
  Elf64_Ehdr header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  bool moved = false;
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    uint8_t *at = bytes.data() + header.e_phoff + i * sizeof(Elf64_Phdr);
    std::memcpy(&segment, at, sizeof(segment));
    if (segment.p_type != PT_LOAD)
      continue;
    segment.p_offset = whole.size();
    std::memcpy(at, &segment, sizeof(segment));
    EXPECT_NE(ElfError(dir, bytes).find("loadable segment " +
                                        std::to_string(i) + " (file bytes "),
              std::string::npos);
    moved = true;
    break;
  }
  EXPECT_TRUE(moved) << "the library has no PT_LOAD segment";
}

// Every prefix of a weights file is refused with a DataLoss naming it.
TEST(TruncatedSafetensorsTest, EveryPrefixIsRefused) {
  TempDir dir;
  std::vector<float> w(12), b(3);
  std::iota(w.begin(), w.end(), 1.0f);
  std::iota(b.begin(), b.end(), -1.0f);
  std::string path = dir.File("w.safetensors");
  ASSERT_TRUE(WriteSafetensors(
                  path,
                  {{"w", TCC_DTYPE_F32, {3, 4}, w.data(), 48},
                   {"b", TCC_DTYPE_F32, {3}, b.data(), 12}},
                  {{"model", "tiny"}})
                  .ok());
  std::vector<uint8_t> whole = ReadFileBytes(path);
  ASSERT_TRUE(SafetensorsFile::Open(path).ok());
  std::string cut_path = dir.File("cut.safetensors");
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    WriteFile(cut_path,
              std::vector<uint8_t>(whole.begin(), whole.begin() + cut));
    absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(cut_path);
    ASSERT_FALSE(file.ok()) << "cut at " << cut;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss)
        << "cut at " << cut << ": " << file.status();
    EXPECT_EQ(file.status().message().rfind(cut_path + ": ", 0), 0u)
        << file.status();
  }
}

// A shard that shrinks after trun opened it: reads fail with the file and
// the bytes named, and batch sources hand the error on instead of faulting.
class ShrinkingShardTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::vector<uint16_t> tokens(4000);
    std::iota(tokens.begin(), tokens.end(), 0);
    ASSERT_TRUE(WriteTokenShard(path_, tokens).ok());
    absl::StatusOr<TokenDataset> data = TokenDataset::Open(path_);
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = std::move(*data);
    // Cut inside the tokens, after the header was checked on open.
    fs::resize_file(path_, kTokenShardHeaderBytes + 2 * 100);
  }
  void ExpectShrunk(const absl::Status &status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_EQ(status.message().rfind(path_ + ": cannot read bytes ", 0), 0u)
        << status;
    EXPECT_NE(status.message().find("the file is now 1224 bytes, was 9024 "
                                    "when opened (truncated while trun was "
                                    "reading it?)"),
              std::string::npos)
        << status;
  }

  TempDir dir_;
  std::string path_ = dir_.File("train.bin");
  TokenDataset data_;
};

TEST_F(ShrinkingShardTest, ReadsPastTheNewEndFail) {
  const TokenShard &shard = data_.shards()[0];
  std::vector<uint16_t> tokens(10);
  EXPECT_TRUE(shard.ReadTokens(90, 10, tokens.data()).ok());
  EXPECT_EQ(tokens[9], 99);
  ExpectShrunk(shard.ReadTokens(95, 10, tokens.data()));
  ExpectShrunk(data_.CheckTokensBelow(65536, "the vocabulary"));
}

TEST_F(ShrinkingShardTest, BatchSourcesReportTheShortRead) {
  TokenWindows windows(data_, 64);
  SequentialTokenBatches sequential(windows, 4);
  HostBatch batch(4, 64, 64);
  EXPECT_FALSE(sequential.Next(batch)); // window 1 ends past token 100
  ExpectShrunk(sequential.error());

  RandomTokenBatches random(windows, 8, /*seed=*/1);
  EXPECT_FALSE(random.Next(batch));
  ExpectShrunk(random.error());

  // Through the loader thread, as the trainer reads it.
  StepBinding binding;
  binding.batch_size = 8;
  binding.values_per_sample = 64;
  binding.targets_per_sample = 64;
  RandomTokenBatches loaded(windows, 8, /*seed=*/1);
  BatchLoader loader(loaded, binding);
  EXPECT_EQ(loader.Take(), nullptr);
  ExpectShrunk(loader.error());
}

} // namespace
} // namespace tcc::trun
