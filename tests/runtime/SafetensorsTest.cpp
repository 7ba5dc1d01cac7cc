#include "runtime/trun/io/Safetensors.h"
#include "runtime/trun/io/FileChecksum.h"

#include "runtime/trun/io/AtomicFile.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>

namespace tcc::trun {
namespace {

using testing::TempDir;

// A file from a header text and data bytes, written by hand.
std::vector<uint8_t> FileBytes(const std::string &header,
                               const std::vector<uint8_t> &data) {
  std::vector<uint8_t> bytes(8);
  uint64_t size = header.size();
  std::memcpy(bytes.data(), &size, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::string OpenError(const std::string &path) {
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  EXPECT_FALSE(file.ok());
  return std::string(file.status().message());
}

TEST(SafetensorsTest, WritesTheFormatAndReadsItBack) {
  TempDir dir;
  std::string path = dir.File("w.safetensors");
  float a[6] = {1, 2, 3, 4, 5, 6.5f};
  double b[1] = {-0.25};
  ASSERT_TRUE(WriteSafetensors(path,
                               {{"a", TCC_DTYPE_F32, {2, 3}, a, sizeof(a)},
                                {"b", TCC_DTYPE_F64, {}, b, sizeof(b)}},
                               {{"model", "m"}})
                  .ok());
  std::vector<uint8_t> bytes = testing::ReadFileBytes(path);
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  EXPECT_EQ(header_size % 8, 0u); // the data section starts 8-byte aligned
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + header_size);
  // The metadata gains the data section's CRC-32 (read back and checked).
  uint32_t crc = Crc32(absl::string_view(reinterpret_cast<const char *>(a), sizeof(a)));
  crc = Crc32(absl::string_view(reinterpret_cast<const char *>(b), sizeof(b)), crc);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"__metadata__":{"model":"m","tcc_data_crc32":")" + std::to_string(crc) +
                R"("},)"
                R"("a":{"data_offsets":[0,24],"dtype":"F32","shape":[2,3]},)"
                R"("b":{"data_offsets":[24,32],"dtype":"F64","shape":[]}})");
  EXPECT_EQ(bytes.size(), 8 + header_size + 32);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + header_size, a, 24), 0);

  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata().at("model"), "m");
  const SafetensorsFile::Tensor &ta = file->tensors().at("a");
  EXPECT_EQ(ta.dtype, "F32");
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(ta.data, a, sizeof(a)), 0);
  EXPECT_EQ(file->tensors().at("b").size_bytes, 8);
  // Atomic write: no temporary file is left behind.
  int entries = 0;
  for (auto &e : std::filesystem::directory_iterator(dir.path()))
    entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
}

TEST(SafetensorsTest, ReportsBadFiles) {
  TempDir dir;
  std::string path = dir.File("bad.safetensors");
  EXPECT_EQ(OpenError(dir.File("none")),
            "cannot open " + dir.File("none") + ": No such file or directory");
  testing::WriteFile(path, {1, 2, 3});
  EXPECT_EQ(OpenError(path), path + ": 3 bytes, too short for the 8-byte "
                                    "safetensors header size (truncated or "
                                    "not safetensors)");
  testing::WriteFile(path, FileBytes(std::string(64, ' '), {}));
  std::vector<uint8_t> cut = testing::ReadFileBytes(path);
  cut.resize(40);
  testing::WriteFile(path, cut);
  EXPECT_EQ(OpenError(path), path + ": header size 64 runs past the end of "
                                    "the file (40 bytes; truncated)");
  std::vector<uint8_t> huge(16, 0xFF);
  testing::WriteFile(path, huge);
  EXPECT_NE(OpenError(path).find("is implausible"), std::string::npos);
  testing::WriteFile(path, FileBytes("{not json", {}));
  EXPECT_EQ(OpenError(path), path + ": the header is not a JSON object (not "
                                    "safetensors)");

  struct Case {
    std::string header;
    size_t data_bytes;
    std::string message;
  } cases[] = {
      {R"({"w":{"dtype":"F32","shape":[2]}})", 8,
       "tensor 'w' needs dtype, shape and data_offsets"},
      {R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8,
       "tensor 'w' has unknown dtype 'Q4'"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8,
       "tensor 'w' has a shape that is not a list of non-negative integers"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8,
       "tensor 'w' has data_offsets outside the 8-byte data section "
       "(truncated?)"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8,
       "tensor 'w': F32 [3] needs 12 bytes but data_offsets [0, 8] hold 8"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
       "tensor data has a gap at byte 0 of the data section"},
      {R"({"v":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "tensor data overlaps at byte 4 of the data section"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8,
       "4 bytes after the last tensor (corrupt or not safetensors)"},
      {R"({"__metadata__":{"step":3}})", 0,
       "__metadata__ value 'step' is not a string"},
      // A key named twice (issue 36: the last one won, and the first may
      // overlap another tensor's bytes).
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "the header names 'w' twice (a file must name each tensor once)"},
      {R"({"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}})", 0,
       "the header names '__metadata__' twice (a file must name each tensor once)"},
  };
  for (const Case &c : cases) {
    testing::WriteFile(path,
                       FileBytes(c.header, std::vector<uint8_t>(c.data_bytes)));
    EXPECT_EQ(OpenError(path), path + ": " + c.message) << c.header;
  }
}

// SaveWeights and LoadWeights (PyTorch layouts, aliases, errors):
// WeightsTest.cpp.

TEST(AtomicFileTest, FailedWriteKeepsTheOldFileAndNamesThePath) {
  TempDir dir;
  std::string path = dir.File("f");
  ASSERT_TRUE(WriteFileAtomically(path, {"old"}).ok());
  absl::Status status =
      WriteFileAtomically(dir.File("missing/dir/f"), {"new"});
  EXPECT_EQ(status.message(), "cannot write " + dir.File("missing/dir/f") +
                                  ": No such file or directory");
  // A directory in the way of the rename: the write fails, nothing leaks.
  std::filesystem::create_directory(dir.File("d"));
  std::filesystem::create_directory(dir.File("d/inner"));
  EXPECT_FALSE(WriteFileAtomically(dir.File("d"), {"new"}).ok());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            2); // f and d, no temporaries
  std::vector<uint8_t> old = testing::ReadFileBytes(path);
  EXPECT_EQ(std::string(old.begin(), old.end()), "old");
}


// The size and CRC32 a writer gets while writing are those of the file on
// disk (checkpoints record them instead of reading the files back).
TEST(AtomicFileTest, ReportsSizeAndCrcOfWhatItWrote) {
  TempDir dir;
  FileChecksum written;
  ASSERT_TRUE(
      WriteFileAtomically(dir.File("f"), {"abc", "", "defgh"}, &written).ok());
  EXPECT_EQ(written.bytes, 8);
  EXPECT_EQ(written.crc32, Crc32("abcdefgh"));
  EXPECT_EQ(written.crc32, 0xaeef2a50u); // zlib's crc32 of "abcdefgh"
  absl::StatusOr<FileChecksum> read = ChecksumOfFile(dir.File("f"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->bytes, 8);
  EXPECT_EQ(read->crc32, written.crc32);

  float w[3] = {1, 2, 3};
  ASSERT_TRUE(WriteSafetensors(dir.File("w.safetensors"),
                               {{"w", TCC_DTYPE_F32, {3}, w, sizeof(w)}},
                               {{"k", "v"}}, &written)
                  .ok());
  read = ChecksumOfFile(dir.File("w.safetensors"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->bytes, written.bytes);
  EXPECT_EQ(read->crc32, written.crc32);
}

} // namespace
} // namespace tcc::trun
