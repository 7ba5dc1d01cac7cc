// A background loader thread with a bounded queue of ready batches, so the
// step never waits on I/O (shard reads, IDX decoding, window
// copies) unless the loader falls behind; the time the consumer spent
// blocked is measured and reported.
//
//   loader thread:  source.Next(slot) for slot in a ring of `depth` batches
//   consumer:       Take() -> batch k (blocks only if not ready yet)
//                   Peek() -> batch k+1, still held by the ring (GPU steps)
//
// The source is touched by the loader thread only, in order, so the batch
// sequence is exactly the source's (deterministic for a seeded source).
// For a GPU step the ring's buffers are pinned host memory: the trainer
// queues the upload of batch k+1 (Peek) while step k runs, and the slot
// goes back to the loader only when that batch has been taken and the
// Take() after it runs (Trainer.cpp).
#ifndef TCC_RUNTIME_TRUN_DATA_BATCHLOADER_H
#define TCC_RUNTIME_TRUN_DATA_BATCHLOADER_H

#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"

#include "absl/status/status.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace tcc::trun {

class BatchLoader {
public:
  // Starts the thread. `source` must outlive the loader and must not be
  // used by anyone else until the loader is destroyed. depth >= 2: batches
  // in the ring (one held by the consumer, depth-1 prepared ahead); a
  // smaller depth is raised to 2. If a slot's buffers cannot be allocated
  // the source is never read and Take() returns nullptr. `pinned`: a GPU
  // step's device API, to allocate the slots with alloc_pinned (it must
  // outlive the loader); null for ordinary host memory.
  BatchLoader(BatchSource &source, const StepBinding &binding, int depth = 4,
              const tcc_device_api *pinned = nullptr);
  // Stops the thread (it may be blocked on a full queue) and joins it.
  ~BatchLoader();
  BatchLoader(const BatchLoader &) = delete;
  BatchLoader &operator=(const BatchLoader &) = delete;

  // The next batch in source order; blocks until it is ready. nullptr when
  // the source ran out. The batch stays valid and unchanged until the next
  // Take() (the previous batch's slot is handed back to the loader then).
  HostBatch *Take();
  // The batch the next Take() will return, without taking it: blocks like
  // Take() (the time counts as data wait), nullptr when the source ran out.
  // It stays valid and unchanged until the Take() after the one that
  // returns it, while the consumer still holds its current batch; taken()
  // does not count it. A GPU step uploads batch k+1 this way while step k
  // runs, so a checkpoint's cursor still counts only trained batches.
  HostBatch *Peek();

  // Why Take() or Peek() returned nullptr when the source could not read
  // its data (BatchSource::error()); OK otherwise.
  absl::Status error();

  // Batches returned by Take() so far (not counting nullptr).
  int64_t taken() const { return taken_; }
  // Seconds Take() spent blocked waiting for the loader since the last call
  // of this function; resets the count.
  double ConsumeWaitSeconds();
  // False when the ring's buffers could not be allocated (then Take()
  // returns nullptr at once and the source is never read).
  bool slots_allocated() const { return slots_allocated_; }
  // Total seconds blocked since construction.
  double total_wait_seconds() const { return total_wait_seconds_; }

private:
  void Produce(); // the loader thread
  // Blocks until batch taken_ is produced or the source ended; counts the
  // wait. Returns false when there is no such batch.
  bool WaitForNext(std::unique_lock<std::mutex> &lock);

  BatchSource &source_;
  const int64_t depth_;
  // Batch n lives in slots_[n % depth_]; a deque never moves its elements.
  std::deque<HostBatch> slots_;

  // Guarded by mutex_. The loader fills batch produced_ while produced_ <
  // taken_ + depth_ - 1, so it never touches the slot of the batch the
  // consumer holds (taken_ - 1) or of one still queued (a peeked one,
  // taken_, included); slot contents are handed over by the produced_ /
  // taken_ updates under the mutex.
  std::mutex mutex_;
  std::condition_variable ready_; // produced_ grew, or the source ended
  std::condition_variable space_; // taken_ grew, or stop_
  int64_t produced_ = 0;
  int64_t taken_ = 0;  // written by the consumer only, under mutex_
  bool ended_ = false; // the source returned false (or no slots)
  absl::Status source_error_; // the source's error() when it ended
  bool stop_ = false;  // the destructor runs

  // The consumer's own: no lock.
  double wait_seconds_ = 0; // since the last ConsumeWaitSeconds()
  double total_wait_seconds_ = 0;

  bool slots_allocated_ = true; // set before the thread starts
  std::thread thread_; // last: started once everything above exists
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_BATCHLOADER_H
