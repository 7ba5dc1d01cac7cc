#include "runtime/trun/data/TokenShards.h"

#include "runtime/trun/io/AtomicFile.h"

#include "absl/strings/str_cat.h"

#include <glob.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tcc::trun {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token shards are little-endian; this reader copies them as is");

// Tokens CheckTokensBelow reads at a time (1 MiB).
constexpr int64_t kCheckChunkTokens = 1 << 19;

bool HasGlobCharacters(const std::string &pattern) {
  return pattern.find_first_of("*?[") != std::string::npos;
}

} // namespace

std::string TokenShardHeader(int64_t num_tokens) {
  std::string header(kTokenShardHeaderBytes, '\0');
  int32_t fields[3] = {kTokenShardMagic, kTokenShardVersion,
                       static_cast<int32_t>(num_tokens)};
  std::memcpy(header.data(), fields, sizeof(fields));
  return header;
}

absl::Status WriteTokenShard(const std::string &path,
                             absl::Span<const uint16_t> tokens) {
  // The header stores the count as int32.
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": ", tokens.size(),
                     " tokens do not fit one shard (at most 2^31 - 1)"));
  std::string header = TokenShardHeader(static_cast<int64_t>(tokens.size()));
  absl::string_view body(reinterpret_cast<const char *>(tokens.data()),
                         tokens.size() * sizeof(uint16_t));
  return WriteFileAtomically(path, {header, body});
}

absl::StatusOr<TokenShard> TokenShard::Open(const std::string &path) {
  absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open(path);
  if (!file.ok())
    return file.status();
  size_t size = file->size();
  auto corrupt = [&path](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": ", what));
  };
  if (size < static_cast<size_t>(kTokenShardHeaderBytes))
    return corrupt(absl::StrCat(size, " bytes, shorter than the ",
                                kTokenShardHeaderBytes,
                                "-byte token shard header (truncated or not a "
                                "token shard)"));
  int32_t fields[3];
  if (absl::Status s = file->ReadAt(0, sizeof(fields), fields); !s.ok())
    return s;
  int32_t magic = fields[0], version = fields[1], count = fields[2];
  if (magic != kTokenShardMagic)
    return corrupt(absl::StrCat(
        "bad magic ", magic, ", expected ", kTokenShardMagic,
        magic == 20240801 ? " (this is llm.c's uint32 token format; trun reads "
                            "uint16 shards)"
                          : " (not a token shard)"));
  if (version != kTokenShardVersion)
    return corrupt(absl::StrCat("token shard version ", version,
                                ", trun reads version ", kTokenShardVersion));
  if (count < 0)
    return corrupt(absl::StrCat("header token count ", count,
                                " is negative (corrupt header)"));
  size_t expected = kTokenShardHeaderBytes + 2 * static_cast<size_t>(count);
  if (size != expected)
    return corrupt(absl::StrCat(
        "header says ", count, " tokens (", expected, " bytes) but the file has ",
        size, " bytes", size < expected ? " (truncated)" : " (trailing data)"));
  TokenShard shard;
  shard.num_tokens_ = count;
  shard.file_ = std::move(*file);
  return shard;
}

absl::Status TokenShard::ReadTokens(int64_t first, int64_t count,
                                    uint16_t *out) const {
  return file_.ReadAt(kTokenShardHeaderBytes + 2 * static_cast<uint64_t>(first),
                      2 * static_cast<size_t>(count), out);
}

absl::StatusOr<TokenDataset> TokenDataset::Open(const std::string &pattern) {
  std::vector<std::string> paths;
  if (HasGlobCharacters(pattern)) {
    glob_t matches;
    int result = glob(pattern.c_str(), 0, nullptr, &matches); // sorted
    if (result == 0)
      for (size_t i = 0; i < matches.gl_pathc; ++i)
        paths.push_back(matches.gl_pathv[i]);
    globfree(&matches);
    if (result == GLOB_NOMATCH || (result == 0 && paths.empty()))
      return absl::NotFoundError(
          absl::StrCat("no token shards match '", pattern, "'"));
    if (result != 0)
      return absl::InternalError(
          absl::StrCat("cannot expand '", pattern, "' (glob error ", result,
                       ")"));
  } else {
    paths.push_back(pattern);
  }
  TokenDataset dataset;
  dataset.pattern_ = pattern;
  for (const std::string &path : paths) {
    absl::StatusOr<TokenShard> shard = TokenShard::Open(path);
    if (!shard.ok())
      return shard.status();
    dataset.total_tokens_ += shard->num_tokens();
    dataset.shards_.push_back(std::move(*shard));
  }
  return dataset;
}

std::string TokenDataset::Describe() const {
  if (shards_.size() == 1)
    return shards_[0].path();
  return absl::StrCat(shards_.size(), " shards matching '", pattern_, "'");
}

absl::Status TokenDataset::CheckTokensBelow(int64_t vocab_size,
                                            absl::string_view limit_name) const {
  std::vector<uint16_t> tokens;
  for (const TokenShard &shard : shards_) {
    for (int64_t first = 0; first < shard.num_tokens();
         first += kCheckChunkTokens) {
      int64_t count = std::min(kCheckChunkTokens, shard.num_tokens() - first);
      tokens.resize(static_cast<size_t>(count));
      if (absl::Status s = shard.ReadTokens(first, count, tokens.data());
          !s.ok())
        return s;
      // A running max per chunk; the position is found only on failure.
      uint16_t max = 0;
      for (uint16_t token : tokens)
        max = token > max ? token : max;
      if (max < vocab_size)
        continue;
      for (int64_t i = 0; i < count; ++i)
        if (tokens[i] >= vocab_size)
          return absl::FailedPreconditionError(absl::StrCat(
              shard.path(), ": token ", tokens[i], " at position ", first + i,
              " is out of range for ", limit_name));
    }
  }
  return absl::OkStatus();
}

} // namespace tcc::trun
