#include "runtime/trun/data/VocabLookup.h"

#include "runtime/trun/io/AtomicFile.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <filesystem>
#include <system_error>

namespace tcc::trun {

std::optional<std::string> VocabBesideShards(const std::string &shards) {
  for (const char *suffix : {"_train.bin", "_val.bin", ".bin"}) {
    if (absl::EndsWith(shards, suffix)) {
      std::string prefix = shards.substr(0, shards.size() - strlen(suffix));
      // A glob over shard numbers (PREFIX_train_*.bin) is not a prefix.
      if (prefix.find_first_of("*?[") != std::string::npos)
        return std::nullopt;
      return prefix + "_vocab.json";
    }
  }
  return std::nullopt;
}

std::string VocabInCheckpointDir(const std::string &dir) {
  return dir + "/vocab.json";
}

std::string VocabBesideWeights(const std::string &weights) {
  std::filesystem::path p(weights);
  if (p.has_extension())
    p.replace_extension();
  return p.string() + ".vocab.json";
}

absl::StatusOr<std::optional<FoundVocab>>
FindVocab(const std::vector<VocabCandidate> &candidates, int64_t logits_width,
          const std::string &model_name) {
  for (const VocabCandidate &c : candidates) {
    std::error_code ec;
    if (!std::filesystem::exists(c.path, ec)) {
      if (c.required)
        return absl::NotFoundError(
            absl::StrCat(c.origin, ": ", c.path, " does not exist"));
      continue;
    }
    absl::StatusOr<Vocab> vocab = Vocab::Read(c.path);
    if (!vocab.ok())
      return vocab.status();
    if (logits_width > 0 && vocab->size() > logits_width)
      return absl::FailedPreconditionError(absl::StrCat(
          c.path, " (", c.origin, "): ", vocab->size(),
          " tokens, more than step '", model_name, "' has logits for (",
          logits_width, ")"));
    return std::optional<FoundVocab>(
        FoundVocab{std::move(*vocab), c.path, c.origin});
  }
  return std::optional<FoundVocab>();
}

absl::StatusOr<Vocab> VocabForText(const std::optional<FoundVocab> &found,
                                   int64_t logits_width,
                                   const std::string &model_name) {
  if (found)
    return found->vocab;
  if (logits_width == 256 || logits_width <= 0)
    return Vocab::Bytes();
  return absl::FailedPreconditionError(absl::StrCat(
      "no vocabulary for step '", model_name, "' (logits ", logits_width,
      " wide; bytes need 256), so its tokens cannot be shown as text: pass "
      "--vocab PREFIX_vocab.json (tcc-data writes it beside the shards; "
      "trun keeps a copy in --ckpt-dir and beside --save-weights)"));
}

absl::Status StoreVocab(const FoundVocab &found, const std::string &path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) &&
      std::filesystem::equivalent(path, found.path, ec))
    return absl::OkStatus();
  std::string json = found.vocab.ToJson();
  return WriteFileAtomically(path, {json});
}

} // namespace tcc::trun
