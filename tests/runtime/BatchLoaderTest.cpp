#include "runtime/trun/data/BatchLoader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace tcc::trun {
namespace {

using Clock = std::chrono::steady_clock;

StepBinding Binding(int64_t batch, int64_t values, int64_t targets = 1) {
  StepBinding binding;
  binding.batch_size = batch;
  binding.values_per_sample = values;
  binding.targets_per_sample = targets;
  return binding;
}

// Batch n has the value n in every data and target element; Next() calls
// are counted (from the loader thread, read by the test). Ends after
// `limit` batches (-1: never); each Next() first sleeps `delay`.
class CountingSource : public BatchSource {
public:
  explicit CountingSource(int64_t limit = -1,
                          std::chrono::milliseconds delay = {})
      : limit_(limit), delay_(delay) {}

  bool Next(HostBatch &batch) override {
    ++calls_;
    if (delay_.count() > 0)
      std::this_thread::sleep_for(delay_);
    if (limit_ >= 0 && next_ >= limit_)
      return false;
    int32_t n = static_cast<int32_t>(next_++);
    int32_t *data = batch.data.as<int32_t>();
    for (int64_t i = 0; i < batch.batch_size * batch.values_per_sample; ++i)
      data[i] = n;
    int32_t *targets = batch.targets.as<int32_t>();
    for (int64_t i = 0; i < batch.batch_size * batch.targets_per_sample; ++i)
      targets[i] = n;
    batch.real_rows = batch.batch_size;
    return true;
  }
  int64_t position() const override { return next_; }
  void SeekTo(int64_t batches) override { next_ = batches; }

  int64_t calls() const { return calls_.load(); }

private:
  int64_t limit_;
  std::chrono::milliseconds delay_;
  int64_t next_ = 0;
  std::atomic<int64_t> calls_{0};
};

// True when every element of `batch` holds n.
bool Holds(const HostBatch &batch, int32_t n) {
  const int32_t *data = batch.data.as<int32_t>();
  for (int64_t i = 0; i < batch.batch_size * batch.values_per_sample; ++i)
    if (data[i] != n)
      return false;
  const int32_t *targets = batch.targets.as<int32_t>();
  for (int64_t i = 0; i < batch.batch_size * batch.targets_per_sample; ++i)
    if (targets[i] != n)
      return false;
  return true;
}

// Polls `done` every millisecond for up to 5 s (the loader thread runs on
// its own; this only observes it).
bool Eventually(const std::function<bool()> &done) {
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (Clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool SameBatch(const HostBatch &a, const HostBatch &b) {
  return a.real_rows == b.real_rows && a.data.size() == b.data.size() &&
         a.targets.size() == b.targets.size() &&
         std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0 &&
         std::memcmp(a.targets.data(), b.targets.data(), a.targets.size()) == 0;
}

// `count` samples of 1x3 images; sample i has pixels {i, 2i, 255 - i}.
LabeledImages Tiny(int64_t count) {
  LabeledImages set;
  set.count = count;
  set.rows = 1;
  set.cols = 3;
  for (int64_t i = 0; i < count; ++i) {
    set.pixels.push_back(static_cast<uint8_t>(i));
    set.pixels.push_back(static_cast<uint8_t>(2 * i));
    set.pixels.push_back(static_cast<uint8_t>(255 - i));
    set.labels.push_back(static_cast<uint8_t>(i % 10));
  }
  return set;
}

TEST(BatchLoaderTest, YieldsExactlyTheSourceSequence) {
  LabeledImages set = Tiny(23);
  PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(set);
  StepBinding binding = Binding(4, 3);
  for (int depth : {2, 3, 4, 8}) {
    SCOPED_TRACE(depth);
    ShuffledBatches loaded(set, normalizer, 4, /*seed=*/11);
    ShuffledBatches fresh(set, normalizer, 4, /*seed=*/11);
    BatchLoader loader(loaded, binding, depth);
    HostBatch expected(binding);
    // 30 batches: 6 epochs of 5, so the permutation changes under the loader.
    for (int k = 0; k < 30; ++k) {
      HostBatch *batch = loader.Take();
      ASSERT_NE(batch, nullptr);
      ASSERT_TRUE(fresh.Next(expected));
      ASSERT_TRUE(SameBatch(*batch, expected)) << "batch " << k;
      // A slow consumer gives the loader time to fill every free slot; the
      // batch held must still be the same afterwards.
      if (k % 7 == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ASSERT_TRUE(SameBatch(*batch, expected)) << "overwritten " << k;
      }
    }
    EXPECT_EQ(loader.taken(), 30);
  }
}

TEST(BatchLoaderTest, YieldsAFiniteSourceThenNullptr) {
  LabeledImages set = Tiny(10);
  PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(set);
  StepBinding binding = Binding(4, 3);
  for (int depth : {2, 5}) {
    SCOPED_TRACE(depth);
    SequentialBatches loaded(set, normalizer, 4); // 4 + 4 + 2 (padded)
    SequentialBatches fresh(set, normalizer, 4);
    BatchLoader loader(loaded, binding, depth);
    HostBatch expected(binding);
    for (int k = 0; k < 3; ++k) {
      HostBatch *batch = loader.Take();
      ASSERT_NE(batch, nullptr) << "batch " << k;
      ASSERT_TRUE(fresh.Next(expected));
      EXPECT_TRUE(SameBatch(*batch, expected)) << "batch " << k;
    }
    EXPECT_EQ(loader.Take(), nullptr);
    EXPECT_EQ(loader.Take(), nullptr); // and stays so
    EXPECT_EQ(loader.taken(), 3);
  }
}

TEST(BatchLoaderTest, EndingSourceGivesNullptrForever) {
  StepBinding binding = Binding(2, 3);
  CountingSource source(/*limit=*/3);
  BatchLoader loader(source, binding, 4);
  for (int32_t n = 0; n < 3; ++n) {
    HostBatch *batch = loader.Take();
    ASSERT_NE(batch, nullptr);
    EXPECT_TRUE(Holds(*batch, n));
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(loader.Take(), nullptr);
  EXPECT_EQ(loader.taken(), 3);
  EXPECT_EQ(source.calls(), 4); // the 4th returned false; never asked again
}

TEST(BatchLoaderTest, EmptySourceGivesNullptrAtOnce) {
  CountingSource source(/*limit=*/0);
  BatchLoader loader(source, Binding(2, 3), 2);
  EXPECT_EQ(loader.Take(), nullptr);
  EXPECT_EQ(loader.Take(), nullptr);
  EXPECT_EQ(loader.taken(), 0);
}

// The loader fills exactly depth-1 batches ahead of the one the consumer
// holds, and never the held one.
TEST(BatchLoaderTest, ProducerStaysAtMostDepthMinusOneAhead) {
  StepBinding binding = Binding(3, 5, 2);
  for (int depth : {2, 3, 6}) {
    SCOPED_TRACE(depth);
    CountingSource source;
    BatchLoader loader(source, binding, depth);
    // Before the first Take(): depth-1 batches, then the loader blocks.
    ASSERT_TRUE(Eventually([&] { return source.calls() >= depth - 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(source.calls(), depth - 1);
    for (int64_t taken = 1; taken <= 8; ++taken) {
      HostBatch *batch = loader.Take();
      ASSERT_NE(batch, nullptr);
      ASSERT_TRUE(Holds(*batch, static_cast<int32_t>(taken - 1)));
      int64_t limit = taken + depth - 1; // held batch + depth-1 ahead
      ASSERT_TRUE(Eventually([&] { return source.calls() >= limit; }))
          << "the loader stopped short of " << limit << " batches";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_EQ(source.calls(), limit) << "ran ahead after Take " << taken;
      EXPECT_TRUE(Holds(*batch, static_cast<int32_t>(taken - 1)))
          << "the held batch was overwritten";
    }
  }
}

// A GPU step holds batch k and peeks batch k+1 to queue its upload: the
// peeked batch is not taken, stays unchanged while the loader fills the
// rest of the ring, and is exactly what the next Take() returns.
TEST(BatchLoaderTest, PeekShowsTheNextBatchWithoutTakingIt) {
  StepBinding binding = Binding(3, 5, 2);
  for (int depth : {2, 3, 6}) {
    SCOPED_TRACE(depth);
    CountingSource source;
    BatchLoader loader(source, binding, depth);
    HostBatch *held = loader.Take();
    ASSERT_NE(held, nullptr);
    for (int32_t n = 1; n <= 8; ++n) {
      HostBatch *peeked = loader.Peek();
      ASSERT_NE(peeked, nullptr);
      ASSERT_TRUE(Holds(*peeked, n));
      EXPECT_EQ(loader.Peek(), peeked) << "a second Peek moved on";
      EXPECT_EQ(loader.taken(), n) << "the peeked batch counts as taken";
      // The loader still fills up to depth-1 batches past the held one.
      int64_t limit = n + depth - 1;
      ASSERT_TRUE(Eventually([&] { return source.calls() >= limit; }));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_EQ(source.calls(), limit);
      EXPECT_TRUE(Holds(*held, n - 1)) << "the held batch was overwritten";
      EXPECT_TRUE(Holds(*peeked, n)) << "the peeked batch was overwritten";
      HostBatch *taken = loader.Take();
      EXPECT_EQ(taken, peeked);
      held = taken;
    }
  }
}

TEST(BatchLoaderTest, PeekAtTheEndGivesNullptr) {
  CountingSource source(2);
  BatchLoader loader(source, Binding(1, 1), 3);
  ASSERT_NE(loader.Take(), nullptr);
  ASSERT_NE(loader.Peek(), nullptr);
  ASSERT_NE(loader.Take(), nullptr);
  EXPECT_EQ(loader.Peek(), nullptr);
  EXPECT_EQ(loader.Take(), nullptr);
  EXPECT_EQ(loader.taken(), 2);
}

// Waiting in Peek() is data wait like waiting in Take(); the Take() of the
// peeked batch then does not wait.
TEST(BatchLoaderTest, PeekCountsItsWait) {
  CountingSource source(-1, std::chrono::milliseconds(20));
  BatchLoader loader(source, Binding(2, 3), 2);
  ASSERT_NE(loader.Take(), nullptr);
  loader.ConsumeWaitSeconds();
  // Depth 2: batch 1 is only started once batch 0 is taken.
  ASSERT_NE(loader.Peek(), nullptr);
  double waited = loader.ConsumeWaitSeconds();
  EXPECT_GE(waited, 0.01);
  ASSERT_NE(loader.Take(), nullptr);
  EXPECT_EQ(loader.ConsumeWaitSeconds(), 0.0);
}

TEST(BatchLoaderTest, DepthBelowTwoIsRaisedToTwo) {
  CountingSource source;
  BatchLoader loader(source, Binding(1, 1), /*depth=*/1);
  for (int32_t n = 0; n < 4; ++n) {
    HostBatch *batch = loader.Take();
    ASSERT_NE(batch, nullptr);
    EXPECT_TRUE(Holds(*batch, n));
    // Depth 2: the next batch is prepared while this one is held.
    ASSERT_TRUE(Eventually([&] { return source.calls() >= n + 2; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(source.calls(), n + 2);
    EXPECT_TRUE(Holds(*batch, n));
  }
}

// 2^20 rows of 2^34 f32: 2^56 bytes, more than any address space.
TEST(BatchLoaderTest, UnallocatableSlotsNeverReadTheSource) {
  CountingSource source;
  BatchLoader loader(source, Binding(int64_t{1} << 20, int64_t{1} << 34), 2);
  EXPECT_EQ(loader.Take(), nullptr);
  EXPECT_EQ(loader.Take(), nullptr);
  EXPECT_EQ(source.calls(), 0);
  EXPECT_FALSE(loader.slots_allocated());
}

// ~20 ms per batch and a consumer that does nothing else: nearly all of
// its time is spent blocked in Take().
TEST(BatchLoaderTest, MeasuresTheWaitForASlowSource) {
  CountingSource source(-1, std::chrono::milliseconds(20));
  Clock::time_point start = Clock::now();
  BatchLoader loader(source, Binding(2, 3), 2);
  EXPECT_EQ(loader.ConsumeWaitSeconds(), 0.0);
  for (int32_t n = 0; n < 8; ++n) {
    HostBatch *batch = loader.Take();
    ASSERT_NE(batch, nullptr);
    EXPECT_TRUE(Holds(*batch, n));
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  double waited = loader.ConsumeWaitSeconds();
  // 8 batches take >= 160 ms to produce; allow half of that for scheduling.
  EXPECT_GE(waited, 0.08);
  EXPECT_LE(waited, elapsed); // seconds, not milliseconds
  EXPECT_EQ(loader.total_wait_seconds(), waited);
  EXPECT_EQ(loader.ConsumeWaitSeconds(), 0.0); // consumed
  ASSERT_NE(loader.Take(), nullptr);
  double more = loader.ConsumeWaitSeconds();
  EXPECT_DOUBLE_EQ(loader.total_wait_seconds(), waited + more);
}

// A fast source and a consumer that spends 20 ms per step: every batch is
// ready when asked for, so no wait is counted.
TEST(BatchLoaderTest, NoWaitWhenTheLoaderKeepsUp) {
  CountingSource source;
  BatchLoader loader(source, Binding(2, 3), 4);
  ASSERT_NE(loader.Take(), nullptr); // may wait for the thread to start
  loader.ConsumeWaitSeconds();
  double before = loader.total_wait_seconds();
  for (int64_t n = 1; n <= 5; ++n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // the step
    // On a loaded machine 20 ms may not be enough for the loader thread to
    // run: the loader has started batch n+1, so batch n is ready.
    ASSERT_TRUE(Eventually([&] { return source.calls() >= n + 2; }));
    HostBatch *batch = loader.Take();
    ASSERT_NE(batch, nullptr);
    EXPECT_TRUE(Holds(*batch, static_cast<int32_t>(n)));
  }
  EXPECT_EQ(loader.ConsumeWaitSeconds(), 0.0);
  EXPECT_EQ(loader.total_wait_seconds(), before);
}

// Destroys `loader` on another thread; false if that takes over 5 s (the
// thread is then left running, with the loader and source leaked).
bool DestroysPromptly(std::unique_ptr<BatchLoader> loader,
                      std::unique_ptr<CountingSource> source) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread destroyer(
      [done, loader = loader.release(), source = source.release()] {
        delete loader;
        delete source;
        done->set_value();
      });
  if (finished.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    destroyer.detach();
    return false;
  }
  destroyer.join();
  return true;
}

TEST(BatchLoaderTest, DestroyingStopsAProducerBlockedOnAFullQueue) {
  for (int taken : {0, 2}) {
    SCOPED_TRACE(taken);
    auto source = std::make_unique<CountingSource>();
    CountingSource *counts = source.get();
    auto loader = std::make_unique<BatchLoader>(*source, Binding(2, 3), 3);
    for (int i = 0; i < taken; ++i)
      ASSERT_NE(loader->Take(), nullptr);
    // Full: depth-1 = 2 batches ahead of the held one; the loader waits.
    ASSERT_TRUE(Eventually([&] { return counts->calls() >= taken + 2; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    Clock::time_point start = Clock::now();
    ASSERT_TRUE(DestroysPromptly(std::move(loader), std::move(source)));
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
  }
}

TEST(BatchLoaderTest, DestroyingWaitsForABatchBeingFilled) {
  auto source =
      std::make_unique<CountingSource>(-1, std::chrono::milliseconds(50));
  CountingSource *counts = source.get();
  auto loader = std::make_unique<BatchLoader>(*source, Binding(2, 3), 4);
  ASSERT_TRUE(Eventually([&] { return counts->calls() >= 1; }));
  Clock::time_point start = Clock::now();
  ASSERT_TRUE(DestroysPromptly(std::move(loader), std::move(source)));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
}

} // namespace
} // namespace tcc::trun
