#include "runtime/trun/data/BatchLoader.h"

#include "runtime/trun/base/Stopwatch.h"

#include <algorithm>

namespace tcc::trun {

BatchLoader::BatchLoader(BatchSource &source, const StepBinding &binding,
                         int depth, const tcc_device_api *pinned)
    : source_(source), depth_(std::max(depth, 2)) {
  bool allocated = true;
  for (int64_t i = 0; i < depth_; ++i) {
    slots_.emplace_back(binding, pinned);
    allocated &= slots_.back().ok();
  }
  // Without every slot the source must not write anywhere: report the end
  // at once (the thread still starts, finds ended_ and exits).
  ended_ = !allocated;
  slots_allocated_ = allocated;
  thread_ = std::thread([this] { Produce(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  thread_.join();
}

void BatchLoader::Produce() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!ended_) {
    // Room for one more while keeping the consumer's batch untouched.
    space_.wait(lock,
                [this] { return stop_ || produced_ < taken_ + depth_ - 1; });
    if (stop_)
      return;
    HostBatch &slot = slots_[produced_ % depth_];
    // The consumer only reads batches below produced_ and its slots: fill
    // this one without the lock so Take() can run meanwhile.
    lock.unlock();
    bool filled = source_.Next(slot);
    lock.lock();
    if (filled) {
      ++produced_;
    } else {
      ended_ = true;
      source_error_ = source_.error();
    }
    ready_.notify_one();
  }
}

bool BatchLoader::WaitForNext(std::unique_lock<std::mutex> &lock) {
  auto ready = [this] { return produced_ > taken_ || ended_; };
  if (!ready()) {
    Clock::time_point start = Clock::now();
    ready_.wait(lock, ready);
    double waited = SecondsSince(start);
    wait_seconds_ += waited;
    total_wait_seconds_ += waited;
  }
  return produced_ > taken_; // else ended, and every filled batch was taken
}

HostBatch *BatchLoader::Peek() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!WaitForNext(lock))
    return nullptr;
  // Produced, so the loader no longer writes it (it only fills batches from
  // produced_ on, in slots other than those of taken_ - 1 and taken_).
  return &slots_[taken_ % depth_];
}

HostBatch *BatchLoader::Take() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!WaitForNext(lock))
    return nullptr;
  // Taking batch n hands back the slot of batch n-1.
  HostBatch *batch = &slots_[taken_ % depth_];
  ++taken_;
  lock.unlock();
  space_.notify_one();
  return batch;
}

absl::Status BatchLoader::error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return source_error_;
}

double BatchLoader::ConsumeWaitSeconds() {
  double seconds = wait_seconds_;
  wait_seconds_ = 0;
  return seconds;
}

} // namespace tcc::trun
