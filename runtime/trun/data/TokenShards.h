// Token shards: the format nanoGPT-style and llm.c prepare scripts write.
//
//   header: 256 little-endian int32: [0] magic 20240520, [1] version 1,
//           [2] token count N, the rest 0
//   body:   N little-endian uint16 token ids
// The file is exactly 1024 + 2N bytes. trun keeps shards open and reads
// each window when a batch is assembled (pread, not a memory mapping: a
// shard cut short while trun runs is then an error, not a SIGBUS).
#ifndef TCC_RUNTIME_TRUN_DATA_TOKENSHARDS_H
#define TCC_RUNTIME_TRUN_DATA_TOKENSHARDS_H

#include "runtime/trun/io/ReadOnlyFile.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::trun {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr int64_t kTokenShardHeaderInts = 256;
inline constexpr int64_t kTokenShardHeaderBytes = kTokenShardHeaderInts * 4;
// Token ids are uint16: at most 65536 distinct ids.
inline constexpr int64_t kMaxTokenShardVocab = 65536;

// The 1024 header bytes of a shard holding `num_tokens` tokens.
std::string TokenShardHeader(int64_t num_tokens);

// Writes a shard atomically (AtomicFile.h).
absl::Status WriteTokenShard(const std::string &path,
                             absl::Span<const uint16_t> tokens);

// One open shard, checked on open: header magic and version, a
// non-negative token count, and a file size of exactly 1024 + 2N bytes.
class TokenShard {
public:
  static absl::StatusOr<TokenShard> Open(const std::string &path);

  // Copies tokens [first, first + count) to `out`; 0 <= first and
  // first + count <= num_tokens(). Error: the shard shrank since it was
  // opened (ReadOnlyFile::ReadAt names the file and the bytes).
  absl::Status ReadTokens(int64_t first, int64_t count, uint16_t *out) const;
  int64_t num_tokens() const { return num_tokens_; }
  const std::string &path() const { return file_.path(); }

private:
  ReadOnlyFile file_;
  int64_t num_tokens_ = 0;
};

// The shards named by one --data / --val argument: a file, or a glob
// pattern (`dir/train_*.bin`) whose matches are taken in sorted order.
class TokenDataset {
public:
  // Opens and checks every shard. Errors: no match for a glob, and any
  // shard error (which names the file).
  static absl::StatusOr<TokenDataset> Open(const std::string &pattern);

  const std::vector<TokenShard> &shards() const { return shards_; }
  const std::string &pattern() const { return pattern_; }
  int64_t total_tokens() const { return total_tokens_; }
  // "PATH" for one shard, "N shards matching 'PATTERN'" for several.
  std::string Describe() const;

  // Checks that every token id is below `vocab_size`; the error names the
  // shard, the position and `limit_name` (e.g. "'logits' width 65").
  absl::Status CheckTokensBelow(int64_t vocab_size,
                                absl::string_view limit_name) const;

private:
  std::string pattern_;
  std::vector<TokenShard> shards_;
  int64_t total_tokens_ = 0;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_TOKENSHARDS_H
