#include "runtime/trun/data/BatchSource.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace tcc::trun {
namespace {

// count samples of 1x2 images; sample i has pixels {i, 255 - i} and label i.
LabeledImages Tiny(int64_t count) {
  LabeledImages set;
  set.count = count;
  set.rows = 1;
  set.cols = 2;
  for (int64_t i = 0; i < count; ++i) {
    set.pixels.push_back(static_cast<uint8_t>(i));
    set.pixels.push_back(static_cast<uint8_t>(255 - i));
    set.labels.push_back(static_cast<uint8_t>(i));
  }
  return set;
}

TEST(EpochPermutationTest, IsAPermutationThatChangesPerEpochAndSeed) {
  std::vector<int64_t> p0 = EpochPermutation(1000, 5, 0);
  std::vector<int64_t> sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p0, EpochPermutation(1000, 5, 0));
  EXPECT_NE(p0, EpochPermutation(1000, 5, 1));
  EXPECT_NE(p0, EpochPermutation(1000, 6, 0));
  std::vector<int64_t> identity(1000);
  for (int64_t i = 0; i < 1000; ++i)
    identity[i] = i;
  EXPECT_NE(p0, identity);
}

TEST(PixelNormalizerTest, StandardizesTrainingPixels) {
  LabeledImages set = Tiny(10);
  set.pixels[0] = 7; // break the symmetry: mean is no longer exactly 0.5
  PixelNormalizer n = PixelNormalizer::FromTrainingImages(set);
  double sum = 0, squares = 0;
  for (uint8_t p : set.pixels) {
    EXPECT_FLOAT_EQ(n.table[p], (p / 255.0 - n.mean) / n.stddev);
    sum += n.table[p];
    squares += n.table[p] * n.table[p];
  }
  double count = static_cast<double>(set.pixels.size());
  EXPECT_NEAR(sum / count, 0.0, 1e-6);
  EXPECT_NEAR(squares / count, 1.0, 1e-5);
}

TEST(PixelNormalizerTest, ConstantImagesOnlyLoseTheMean) {
  LabeledImages set = Tiny(1);
  set.pixels = {51, 51};
  PixelNormalizer n = PixelNormalizer::FromTrainingImages(set);
  EXPECT_EQ(n.stddev, 0.0);
  EXPECT_FLOAT_EQ(n.table[51], 0.0f);
  EXPECT_FLOAT_EQ(n.table[255], 0.8f);
}

TEST(ShuffledBatchesTest, EachEpochVisitsFullBatchesOfDistinctSamples) {
  LabeledImages set = Tiny(10);
  PixelNormalizer n = PixelNormalizer::FromTrainingImages(set);
  ShuffledBatches batches(set, n, 3, /*seed=*/1);
  EXPECT_EQ(batches.batches_per_epoch(), 3);
  HostBatch batch(3, 2);
  std::vector<std::set<int32_t>> epochs(2);
  for (int epoch = 0; epoch < 2; ++epoch)
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(batches.Next(batch));
      EXPECT_EQ(batch.real_rows, 3);
      for (int row = 0; row < 3; ++row) {
        int32_t label = batch.targets.as<int32_t>()[row];
        EXPECT_TRUE(epochs[epoch].insert(label).second) << "repeated sample";
        // The image row belongs to the labelled sample, normalized.
        EXPECT_EQ(batch.data.as<float>()[2 * row], n.table[label]);
        EXPECT_EQ(batch.data.as<float>()[2 * row + 1], n.table[255 - label]);
      }
    }
  EXPECT_EQ(epochs[0].size(), 9u);
  EXPECT_EQ(epochs[1].size(), 9u);
}

// Epoch e feeds the first n - n mod B entries of EpochPermutation(n, seed, e).
TEST(ShuffledBatchesTest, FollowsTheEpochPermutations) {
  LabeledImages set = Tiny(32);
  PixelNormalizer n = PixelNormalizer::FromTrainingImages(set);
  ShuffledBatches batches(set, n, 10, /*seed=*/3);
  HostBatch batch(10, 2);
  std::vector<std::vector<int64_t>> fed(3);
  for (int epoch = 0; epoch < 3; ++epoch)
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(batches.Next(batch));
      for (int row = 0; row < 10; ++row)
        fed[epoch].push_back(batch.targets.as<int32_t>()[row]);
    }
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> expected = EpochPermutation(32, 3, epoch);
    expected.resize(30);
    EXPECT_EQ(fed[epoch], expected) << "epoch " << epoch;
  }
  EXPECT_NE(fed[0], fed[1]);
}

TEST(ShuffledBatchesTest, SameSeedSameBatches) {
  LabeledImages set = Tiny(50);
  PixelNormalizer n = PixelNormalizer::FromTrainingImages(set);
  ShuffledBatches a(set, n, 5, 9), b(set, n, 5, 9), c(set, n, 5, 10);
  HostBatch ba(5, 2), bb(5, 2), bc(5, 2);
  bool all_same_as_c = true;
  for (int i = 0; i < 20; ++i) {
    a.Next(ba);
    b.Next(bb);
    c.Next(bc);
    for (int r = 0; r < 5; ++r) {
      EXPECT_EQ(ba.targets.as<int32_t>()[r], bb.targets.as<int32_t>()[r]);
      all_same_as_c &= ba.targets.as<int32_t>()[r] == bc.targets.as<int32_t>()[r];
    }
  }
  EXPECT_FALSE(all_same_as_c);
}

TEST(SequentialBatchesTest, PadsLastBatchWithItsLastSample) {
  LabeledImages set = Tiny(5);
  PixelNormalizer n = PixelNormalizer::FromTrainingImages(set);
  SequentialBatches batches(set, n, 4);
  HostBatch batch(4, 2);
  ASSERT_TRUE(batches.Next(batch));
  EXPECT_EQ(batch.real_rows, 4);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(batch.targets.as<int32_t>()[r], r);
  ASSERT_TRUE(batches.Next(batch));
  EXPECT_EQ(batch.real_rows, 1);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(batch.targets.as<int32_t>()[r], 4);
    EXPECT_EQ(batch.data.as<float>()[2 * r], n.table[4]);
  }
  EXPECT_FALSE(batches.Next(batch));
}

// The labels and first pixels of a batch, with its real rows.
struct Fed {
  std::vector<int32_t> labels;
  std::vector<float> data;
  int64_t real_rows;
  bool operator==(const Fed &o) const {
    return labels == o.labels && data == o.data && real_rows == o.real_rows;
  }
};
Fed Contents(const HostBatch &batch) {
  const int32_t *labels = batch.targets.as<int32_t>();
  const float *data = batch.data.as<float>();
  return {std::vector<int32_t>(labels, labels + batch.batch_size),
          std::vector<float>(data,
                             data + batch.batch_size * batch.values_per_sample),
          batch.real_rows};
}

// 32 samples, B = 10: 3 batches per epoch (batches 3, 6, 9 start epochs).
TEST(ShuffledBatchesTest, SeekToMatchesAFreshSourceAndPositionCounts) {
  LabeledImages set = Tiny(32);
  PixelNormalizer n = PixelNormalizer::FromTrainingImages(set);
  ShuffledBatches reference(set, n, 10, /*seed=*/4);
  HostBatch batch(10, 2);
  std::vector<Fed> fed;
  for (int64_t k = 0; k < 12; ++k) {
    EXPECT_EQ(reference.position(), k);
    ASSERT_TRUE(reference.Next(batch));
    fed.push_back(Contents(batch));
  }
  EXPECT_EQ(reference.position(), 12);
  // Inside epoch 0, at the epoch 1 and 3 boundaries, inside later epochs.
  for (int64_t k : {0, 1, 2, 3, 4, 7, 9, 10}) {
    ShuffledBatches seeked(set, n, 10, 4);
    seeked.SeekTo(k);
    EXPECT_EQ(seeked.position(), k);
    ASSERT_TRUE(seeked.Next(batch));
    EXPECT_EQ(Contents(batch), fed[k]) << "batch " << k;
    ASSERT_TRUE(seeked.Next(batch)); // and continues from there
    EXPECT_EQ(Contents(batch), fed[k + 1]) << "batch " << k + 1;
    EXPECT_EQ(seeked.position(), k + 2);
  }
  // Seeking a used source, back into an earlier epoch and forward again.
  ShuffledBatches used(set, n, 10, 4);
  for (int i = 0; i < 8; ++i)
    used.Next(batch);
  for (int64_t k : {1, 5, 11, 0}) {
    used.SeekTo(k);
    ASSERT_TRUE(used.Next(batch));
    EXPECT_EQ(Contents(batch), fed[k]) << "batch " << k;
  }
  used.SeekTo(-3);
  EXPECT_EQ(used.position(), 0);
  ASSERT_TRUE(used.Next(batch));
  EXPECT_EQ(Contents(batch), fed[0]);
}

// 10 samples, B = 4: batches of 4, 4 and 2 (padded) real rows.
TEST(SequentialBatchesTest, SeekToMatchesAFreshSourceAndStopsAtTheEnd) {
  LabeledImages set = Tiny(10);
  PixelNormalizer n = PixelNormalizer::FromTrainingImages(set);
  SequentialBatches reference(set, n, 4);
  EXPECT_EQ(reference.total_batches(), 3);
  HostBatch batch(4, 2);
  std::vector<Fed> fed;
  while (reference.Next(batch)) {
    fed.push_back(Contents(batch));
    EXPECT_EQ(reference.position(), static_cast<int64_t>(fed.size()));
  }
  ASSERT_EQ(fed.size(), 3u);
  EXPECT_EQ(reference.position(), 3); // the failed Next() is not counted
  for (int64_t k : {0, 1, 2}) {
    SequentialBatches seeked(set, n, 4);
    seeked.SeekTo(k);
    EXPECT_EQ(seeked.position(), k);
    ASSERT_TRUE(seeked.Next(batch));
    EXPECT_EQ(Contents(batch), fed[k]) << "batch " << k;
    EXPECT_EQ(seeked.position(), k + 1);
  }
  SequentialBatches seeked(set, n, 4);
  seeked.SeekTo(3);
  EXPECT_EQ(seeked.position(), 3);
  EXPECT_FALSE(seeked.Next(batch));
  seeked.SeekTo(int64_t{1} << 62); // clamped, no overflow
  EXPECT_EQ(seeked.position(), 3);
  EXPECT_FALSE(seeked.Next(batch));
  seeked.SeekTo(1); // back from the end
  ASSERT_TRUE(seeked.Next(batch));
  EXPECT_EQ(Contents(batch), fed[1]);
  seeked.SeekTo(-1);
  EXPECT_EQ(seeked.position(), 0);
}

TEST(HostBatchTest, BuffersAre64ByteAligned) {
  HostBatch batch(3, 5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(batch.data.data()) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(batch.targets.data()) % 64, 0u);
  EXPECT_EQ(batch.data.size(), 3u * 5 * sizeof(float));
}

} // namespace
} // namespace tcc::trun
