// trun's encode cache: for a step compiled with tcc compile --cache-frozen
// (entries "encode" and "train_cached", tg-cache-frozen), each training
// sample's encoder values are computed once (@encode, at the sample's
// first batch) and kept by sample index; a batch whose samples are all
// cached trains through @train_cached on values assembled from the cache,
// so epochs after the first skip the frozen encoder. Kept in memory up to
// a byte limit (beyond it: said once, the rest encoded every time: never
// wrong results), optionally in a file under --encode-cache DIR keyed by a
// fingerprint of the data files, the frozen parameters and the encode
// signature (another run's file is ignored and rebuilt, a corrupt one too,
// each said in one line).
#ifndef TCC_RUNTIME_TRUN_TRAIN_ENCODECACHE_H
#define TCC_RUNTIME_TRUN_TRAIN_ENCODECACHE_H

#include "runtime/trun/base/AlignedBuffer.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/step/DeviceMemory.h"
#include "runtime/trun/train/Trainer.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

namespace tcc::trun {

struct EncodeCacheOptions {
  std::optional<std::string> dir;           // --encode-cache DIR
  int64_t limit_bytes = int64_t{4} << 30;   // --encode-cache-limit
  std::vector<std::string> data_files;      // fingerprinted with the weights
};

class EncodeCache {
public:
  // Null (and OK) when the step has no "encode" / "train_cached" entries.
  // Errors: entries that do not fit together (train_cached reading an
  // input that is neither an encode output nor a step input), a cache
  // directory that cannot be created or written. Reads the frozen
  // parameters from `trainer` (call after --init-from and resume) and,
  // with a directory, loads a matching cache file.
  static absl::StatusOr<std::unique_ptr<EncodeCache>>
  Create(const tcc_step_descriptor &d, const StepBinding &binding, Trainer &trainer,
         const EncodeCacheOptions &options, std::ostream &out);

  // Makes trainer's train calls go through encode / train_cached.
  void Attach(Trainer &trainer);
  // Writes the cache file (with a directory) and the report lines:
  // "encode cache: H hits, M misses (samples), encode X s over N batches,
  // about Y s saved".
  absl::Status Finish(std::ostream &out);

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

private:
  EncodeCache(const tcc_step_descriptor &d) : d_(d) {}
  int32_t Train(HostBatch &batch, const tcc_step_args &args);
  void Load(std::ostream &out);

  const tcc_step_descriptor &d_;
  const tcc_device_api *device_ = nullptr;
  const tcc_step_entry *encode_ = nullptr, *train_cached_ = nullptr;
  int64_t batch_ = 0;
  // Per encode output k: bytes of one sample's rows, offset in a sample's
  // record; the batch buffers (host; device copies on a GPU step).
  std::vector<int64_t> row_bytes_, row_offset_;
  int64_t sample_bytes_ = 0;
  std::vector<AlignedBuffer> host_cut_;
  std::unique_ptr<DeviceArena> device_cut_;
  std::vector<void *> cut_ptrs_; // where encode writes, train_cached reads
  // encode's and train_cached's inputs: -1 - k for encode output k, else
  // the descriptor input index.
  std::vector<int32_t> encode_from_, train_from_;
  // The store: sample -> offset of its record in store_.
  std::unordered_map<int64_t, int64_t> index_;
  std::vector<char> store_;
  int64_t limit_bytes_ = 0;
  bool full_said_ = false;
  std::ostream *out_ = nullptr;
  std::optional<std::string> file_;
  uint64_t fingerprint_ = 0;
  int64_t hits_ = 0, misses_ = 0, hit_batches_ = 0, encode_batches_ = 0, loaded_ = 0;
  double encode_seconds_ = 0;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_ENCODECACHE_H
