#include "runtime/trun/data/DataFiles.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

namespace tcc::trun {
namespace {

using testing::TempDir;

void Touch(const std::string &path) { testing::WriteFile(path, {0}); }

void TouchAll(const TempDir &dir, const std::string &suffix) {
  for (const char *name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    Touch(dir.File(name + suffix));
}

TEST(DataFilesTest, FindsGzippedFilesInDirectory) {
  TempDir dir;
  TouchAll(dir, ".gz");
  absl::StatusOr<DataFiles> files = ResolveDataFiles(dir.path(), std::nullopt);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->train.images, dir.File("train-images-idx3-ubyte.gz"));
  EXPECT_EQ(files->train.labels, dir.File("train-labels-idx1-ubyte.gz"));
  ASSERT_TRUE(files->test.has_value());
  EXPECT_EQ(files->test->images, dir.File("t10k-images-idx3-ubyte.gz"));
  EXPECT_EQ(files->test->labels, dir.File("t10k-labels-idx1-ubyte.gz"));
}

TEST(DataFilesTest, PrefersUncompressedFile) {
  TempDir dir;
  TouchAll(dir, ".gz");
  Touch(dir.File("train-images-idx3-ubyte"));
  absl::StatusOr<DataFiles> files = ResolveDataFiles(dir.path(), std::nullopt);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->train.images, dir.File("train-images-idx3-ubyte"));
  EXPECT_EQ(files->train.labels, dir.File("train-labels-idx1-ubyte.gz"));
}

TEST(DataFilesTest, NamesTheMissingFile) {
  TempDir dir;
  TouchAll(dir, "");
  std::remove(dir.File("t10k-labels-idx1-ubyte").c_str());
  absl::StatusOr<DataFiles> files = ResolveDataFiles(dir.path(), std::nullopt);
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().message(),
            "data directory '" + dir.path() +
                "' has no t10k-labels-idx1-ubyte[.gz]");
}

TEST(DataFilesTest, TestFlagReplacesDirectoryTestSplit) {
  TempDir dir;
  TouchAll(dir, "");
  std::remove(dir.File("t10k-images-idx3-ubyte").c_str());
  absl::StatusOr<DataFiles> files =
      ResolveDataFiles(dir.path(), std::string("a,b"));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->test->images, "a");
  EXPECT_EQ(files->test->labels, "b");
}

TEST(DataFilesTest, AcceptsFilePairsWithOptionalTest) {
  absl::StatusOr<DataFiles> files =
      ResolveDataFiles("x/imgs.gz,x/lbls.gz", std::nullopt);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->train.images, "x/imgs.gz");
  EXPECT_EQ(files->train.labels, "x/lbls.gz");
  EXPECT_FALSE(files->test.has_value());
  files = ResolveDataFiles("a,b", std::string("c,d"));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->test->labels, "d");
}

TEST(DataFilesTest, RejectsMalformedPairsAndMissingDirectory) {
  absl::StatusOr<DataFiles> files = ResolveDataFiles("a,b,c", std::nullopt);
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().message(),
            "--data expects IMAGES,LABELS (two files), got 'a,b,c'");
  EXPECT_FALSE(ResolveDataFiles("a,", std::nullopt).ok());
  EXPECT_FALSE(ResolveDataFiles("a,b", std::string("c")).ok());
  files = ResolveDataFiles("/nonexistent/fashion", std::nullopt);
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().message(),
            "data directory '/nonexistent/fashion' not found");
}

} // namespace
} // namespace tcc::trun
