#include "runtime/trun/dist/RankGroup.h"

#include "runtime/trun/io/FileChecksum.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "absl/strings/numbers.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace tcc::trun {
namespace {

RankGroup *&ActiveSlot() {
  static RankGroup *group = nullptr;
  return group;
}

struct LibraryFingerprint {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
  uint32_t padding = 0;
};

} // namespace

struct RankGroup::Watchdog {
  std::atomic<int64_t> last_beat_ns{0};
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

namespace {
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
} // namespace

RankGroup::RankGroup(RankInfo info) : info_(std::move(info)) {}
RankGroup::~RankGroup() { StopWatchdog(); }

absl::StatusOr<std::vector<std::string>> RankGroup::AllGather(const std::string &mine) {
  const size_t world = static_cast<size_t>(world_size());
  std::vector<std::string> pieces(world, std::string(mine.size(), '\0'));
  // In parts the back end's exchange holds (a ZeRO-1 checkpoint gathers
  // whole optimizer state tensors: hundreds of MB).
  const size_t part = std::max<size_t>(1, MaxExchangeBytes() / world);
  std::string all;
  size_t offset = 0;
  do { // at least one exchange, even of nothing: every rank takes part
    const size_t bytes = std::min(part, mine.size() - offset);
    all.resize(bytes * world);
    if (absl::Status s = GatherBytes(mine.data() + offset, bytes, all.data()); !s.ok())
      return s;
    for (size_t r = 0; r < world; ++r)
      std::memcpy(pieces[r].data() + offset, all.data() + r * bytes, bytes);
    offset += bytes;
  } while (offset < mine.size());
  if (watchdog_) // the ranks progress
    watchdog_->last_beat_ns = NowNs();
  return pieces;
}

absl::Status RankGroup::SumOnHost(std::vector<double> &values) {
  if (absl::Status s = SumDoubles(values.data(), values.size()); !s.ok())
    return s;
  if (watchdog_)
    watchdog_->last_beat_ns = NowNs();
  return absl::OkStatus();
}

void RankGroup::StartWatchdog(double timeout_seconds) {
  StopWatchdog();
  watchdog_ = std::make_unique<Watchdog>();
  watchdog_->last_beat_ns = NowNs();
  Watchdog *w = watchdog_.get();
  w->thread = std::thread([this, w, timeout_seconds] {
    const int64_t limit = static_cast<int64_t>(timeout_seconds * 1e9);
    std::unique_lock<std::mutex> lock(w->mutex);
    while (!w->stop) {
      w->wake.wait_for(lock, std::chrono::milliseconds(250));
      if (w->stop || NowNs() - w->last_beat_ns < limit)
        continue;
      std::fflush(stdout);
      std::fprintf(stderr,
                   "trun: error: rank %d of %d: no exchange with the other ranks finished for "
                   "%g s (TCC_DIST_TIMEOUT): another rank stopped responding (it died, hung or "
                   "was stopped); ending this rank\n",
                   info_.rank, info_.world_size, timeout_seconds);
      std::fflush(stderr);
      AbortFromWatchdog();
      std::_Exit(1);
    }
  });
}

void RankGroup::StopWatchdog() {
  if (!watchdog_)
    return;
  {
    std::lock_guard<std::mutex> lock(watchdog_->mutex);
    watchdog_->stop = true;
  }
  watchdog_->wake.notify_all();
  if (watchdog_->thread.joinable())
    watchdog_->thread.join();
  watchdog_.reset();
}

absl::StatusOr<double> DistTimeoutSeconds() {
  double seconds = 300;
  if (const char *t = std::getenv("TCC_DIST_TIMEOUT"); t && *t)
    if (!absl::SimpleAtod(t, &seconds) || !(seconds > 0))
      return absl::InvalidArgumentError(
          absl::StrCat("TCC_DIST_TIMEOUT is '", t, "', not a positive number of seconds"));
  return seconds;
}

namespace {
std::mutex &CollectiveErrorMutex() {
  static std::mutex m;
  return m;
}
std::string &CollectiveErrorText() {
  static std::string text;
  return text;
}
} // namespace

std::string LastCollectiveError() {
  std::lock_guard<std::mutex> lock(CollectiveErrorMutex());
  return CollectiveErrorText();
}

void RecordCollectiveError(std::string error) {
  std::lock_guard<std::mutex> lock(CollectiveErrorMutex());
  CollectiveErrorText() = std::move(error);
}

RankGroup *ActiveRankGroup() { return ActiveSlot(); }
void SetActiveRankGroup(RankGroup *group) { ActiveSlot() = group; }

absl::Status CheckSameStepLibrary(RankGroup &group, const std::string &step_path) {
  absl::StatusOr<FileChecksum> sum = ChecksumOfFile(step_path);
  if (!sum.ok())
    return sum.status();
  LibraryFingerprint mine;
  mine.bytes = sum->bytes;
  mine.crc32 = sum->crc32;
  std::string bytes(sizeof mine, '\0');
  std::memcpy(bytes.data(), &mine, sizeof mine);
  absl::StatusOr<std::vector<std::string>> all = group.AllGather(bytes);
  if (!all.ok())
    return all.status();
  auto fingerprint = [&](int rank) {
    LibraryFingerprint f;
    std::memcpy(&f, (*all)[rank].data(), sizeof f);
    return f;
  };
  LibraryFingerprint lead = fingerprint(0);
  std::vector<std::string> differ;
  for (int r = 1; r < group.world_size(); ++r) {
    LibraryFingerprint f = fingerprint(r);
    if (f.bytes != lead.bytes || f.crc32 != lead.crc32)
      differ.push_back(absl::StrFormat("rank %d: %d bytes, crc32 %08x", r, f.bytes, f.crc32));
  }
  if (differ.empty())
    return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the ranks loaded different step libraries (rank 0: ", lead.bytes, " bytes, crc32 ",
      absl::StrFormat("%08x", lead.crc32), "; ", absl::StrJoin(differ, "; "),
      "; this rank's is ", step_path,
      "): every rank must run the same step.so, or their gradients would not match"));
}

} // namespace tcc::trun
