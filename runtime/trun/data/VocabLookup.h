// Which vocabulary a token model's text goes through, so that --sample and
// --prompt never decode with the wrong one silently.
//
// Looked up in order (the first that exists wins):
//   1. --vocab FILE (must exist);
//   2. beside the token shards: tcc-data writes PREFIX_vocab.json next to
//      PREFIX_train.bin and PREFIX_val.bin;
//   3. beside the checkpoints: --ckpt-dir D holds D/vocab.json, written when
//      a run with a vocabulary checkpoints there;
//   4. beside the weights: --init-from W.safetensors reads W.vocab.json,
//      written by --save-weights W.safetensors.
// With none, a step whose logits are 256 wide decodes bytes; any other width
// is an error that says where a vocabulary comes from.
#ifndef TCC_RUNTIME_TRUN_DATA_VOCABLOOKUP_H
#define TCC_RUNTIME_TRUN_DATA_VOCABLOOKUP_H

#include "runtime/trun/data/Vocab.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <optional>
#include <string>
#include <vector>

namespace tcc::trun {

// PREFIX_vocab.json for a shard path or glob ending in _train.bin,
// _val.bin or .bin (PREFIX_train.bin -> PREFIX_vocab.json); nullopt for
// other names.
std::optional<std::string> VocabBesideShards(const std::string &shards);
// D/vocab.json.
std::string VocabInCheckpointDir(const std::string &dir);
// W.vocab.json for W.safetensors (W.EXT -> W.vocab.json; no extension:
// W.vocab.json).
std::string VocabBesideWeights(const std::string &weights);

struct FoundVocab {
  Vocab vocab;
  std::string path;   // where it was read
  std::string origin; // "--vocab", "beside the shards", ...
};

struct VocabCandidate {
  std::string path;
  std::string origin;
  bool required = false; // --vocab: a missing file is an error
};

// The first candidate whose file exists, read and checked against the step's
// logits width (a vocabulary larger than the logits is an error; a smaller
// one is padding, as GPT-2's 50257 tokens in 50304 logits). nullopt when
// none exists.
absl::StatusOr<std::optional<FoundVocab>>
FindVocab(const std::vector<VocabCandidate> &candidates, int64_t logits_width,
          const std::string &model_name);

// The vocabulary to decode with: `found`, else bytes when the logits are 256
// wide, else an error naming where a vocabulary comes from.
absl::StatusOr<Vocab> VocabForText(const std::optional<FoundVocab> &found,
                                   int64_t logits_width,
                                   const std::string &model_name);

// Writes `found` to `path` (atomically) unless `path` is where it was read.
absl::Status StoreVocab(const FoundVocab &found, const std::string &path);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_VOCABLOOKUP_H
