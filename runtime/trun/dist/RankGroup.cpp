#include "runtime/trun/dist/RankGroup.h"

#include "runtime/trun/io/FileChecksum.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <cstring>

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
