#include "runtime/trun/data/IdxDataset.h"

#include "runtime/trun/data/DataFiles.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

namespace tcc::trun {
namespace {

using testing::IdxBytes;
using testing::TempDir;

std::vector<uint8_t> Iota(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

std::string ErrorOf(const std::string &path, uint32_t magic) {
  absl::StatusOr<IdxArray> array = ReadIdxFile(path, magic);
  EXPECT_FALSE(array.ok());
  return std::string(array.status().message());
}

TEST(IdxDatasetTest, ReadsRawAndGzipFilesAlike) {
  TempDir dir;
  std::vector<uint8_t> bytes = IdxBytes(0x803, {3, 4, 5}, Iota(60));
  testing::WriteFile(dir.File("raw"), bytes);
  testing::WriteGzipFile(dir.File("packed.gz"), bytes);
  for (const char *name : {"raw", "packed.gz"}) {
    absl::StatusOr<IdxArray> array =
        ReadIdxFile(dir.File(name), kIdxImagesMagic);
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_EQ(array->dims, (std::vector<int64_t>{3, 4, 5}));
    EXPECT_EQ(array->values, Iota(60));
  }
}

// A gzip file is recognized by content, whatever its name.
TEST(IdxDatasetTest, DetectsGzipByMagicNotName) {
  TempDir dir;
  testing::WriteGzipFile(dir.File("labels"), IdxBytes(0x801, {4}, Iota(4)));
  absl::StatusOr<IdxArray> array =
      ReadIdxFile(dir.File("labels"), kIdxLabelsMagic);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->values, Iota(4));
}

TEST(IdxDatasetTest, ReportsTruncatedData) {
  TempDir dir;
  std::vector<uint8_t> bytes = IdxBytes(0x803, {3, 4, 5}, Iota(59));
  testing::WriteFile(dir.File("short"), bytes);
  EXPECT_EQ(ErrorOf(dir.File("short"), kIdxImagesMagic),
            dir.File("short") +
                ": header says 3x4x5 = 60 bytes of data but the file has 59 "
                "(truncated)");
  testing::WriteGzipFile(dir.File("short.gz"), bytes);
  EXPECT_NE(ErrorOf(dir.File("short.gz"), kIdxImagesMagic).find("(truncated)"),
            std::string::npos);
}

TEST(IdxDatasetTest, ReportsTrailingBytes) {
  TempDir dir;
  testing::WriteFile(dir.File("long"), IdxBytes(0x801, {3}, Iota(4)));
  EXPECT_NE(ErrorOf(dir.File("long"), kIdxLabelsMagic).find("trailing bytes"),
            std::string::npos);
}

// No data with a 0 count, but rows x cols would overflow int64 (found by
// fuzzing: tests/fuzz/crashes/fuzz_idx/).
TEST(IdxDatasetTest, ReportsDimensionsOverflowWithZeroCount) {
  TempDir dir;
  testing::WriteFile(dir.File("huge"),
                     IdxBytes(0x803, {0, 0xffffffffu, 0xffffffffu}, {}));
  EXPECT_EQ(ErrorOf(dir.File("huge"), kIdxImagesMagic),
            dir.File("huge") + ": IDX dimensions overflow");
}

TEST(IdxDatasetTest, ReportsTruncatedHeaderAndEmptyFile) {
  TempDir dir;
  testing::WriteFile(dir.File("empty"), {});
  EXPECT_EQ(ErrorOf(dir.File("empty"), kIdxLabelsMagic),
            dir.File("empty") +
                ": not an IDX file (0 bytes, shorter than the header)");
  std::vector<uint8_t> header = IdxBytes(0x803, {3, 4, 5}, {});
  header.resize(9);
  testing::WriteFile(dir.File("header"), header);
  EXPECT_NE(
      ErrorOf(dir.File("header"), kIdxImagesMagic).find("truncated IDX header"),
      std::string::npos);
}

TEST(IdxDatasetTest, ReportsWrongMagic) {
  TempDir dir;
  testing::WriteFile(dir.File("labels"), IdxBytes(0x801, {2}, Iota(2)));
  EXPECT_EQ(ErrorOf(dir.File("labels"), kIdxImagesMagic),
            dir.File("labels") +
                ": bad magic 0x00000801, expected 0x00000803 (IDX images "
                "file)");
  testing::WriteFile(dir.File("text"), {'h', 'e', 'l', 'l', 'o', '\n'});
  EXPECT_NE(ErrorOf(dir.File("text"), kIdxLabelsMagic).find("bad magic"),
            std::string::npos);
}

TEST(IdxDatasetTest, ReportsMissingFile) {
  absl::StatusOr<IdxArray> array =
      ReadIdxFile("/nonexistent/t10k-labels-idx1-ubyte", kIdxLabelsMagic);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(array.status().message(),
            "cannot open /nonexistent/t10k-labels-idx1-ubyte: No such file or "
            "directory");
}

TEST(IdxDatasetTest, ReportsCutOffAndCorruptGzip) {
  TempDir dir;
  testing::WriteGzipFile(dir.File("full.gz"),
                         IdxBytes(0x803, {10, 28, 28}, Iota(7840)));
  std::vector<uint8_t> packed = testing::ReadFileBytes(dir.File("full.gz"));
  ASSERT_GT(packed.size(), 40u);

  std::vector<uint8_t> cut(packed.begin(), packed.begin() + packed.size() / 2);
  testing::WriteFile(dir.File("cut.gz"), cut);
  EXPECT_EQ(ErrorOf(dir.File("cut.gz"), kIdxImagesMagic),
            dir.File("cut.gz") +
                ": truncated gzip data (unexpected end of file)");

  std::vector<uint8_t> corrupt = packed;
  corrupt[corrupt.size() - 6] ^= 0xff; // inside the CRC32 trailer
  testing::WriteFile(dir.File("corrupt.gz"), corrupt);
  std::string error = ErrorOf(dir.File("corrupt.gz"), kIdxImagesMagic);
  EXPECT_EQ(error.rfind(dir.File("corrupt.gz") + ": corrupt gzip data", 0), 0u)
      << error;
}

TEST(IdxDatasetTest, LoadsLabeledImages) {
  TempDir dir;
  testing::SyntheticSplit split = testing::MakeSyntheticSplit(7, 5, 6, 1);
  std::string images = testing::WriteSplit(dir.path(), "train", split, true);
  absl::StatusOr<LabeledImages> set =
      ReadSplit({images, dir.File("train-labels-idx1-ubyte.gz")});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->count, 7);
  EXPECT_EQ(set->rows, 5);
  EXPECT_EQ(set->cols, 6);
  EXPECT_EQ(set->pixels_per_image(), 30);
  EXPECT_EQ(set->pixels, split.pixels);
  EXPECT_EQ(set->labels, split.labels);
}

TEST(IdxDatasetTest, RejectsLabelCountMismatch) {
  TempDir dir;
  testing::WriteFile(dir.File("images"), IdxBytes(0x803, {3, 2, 2}, Iota(12)));
  testing::WriteFile(dir.File("labels"), IdxBytes(0x801, {2}, Iota(2)));
  absl::StatusOr<LabeledImages> set =
      ReadSplit({dir.File("images"), dir.File("labels")});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(), dir.File("labels") + ": 2 labels but " +
                                        dir.File("images") + " has 3 images");
}

} // namespace
} // namespace tcc::trun
