// `tcc-data tokenize`: raw text -> token shards (TokenShards.h) and a
// vocabulary file (Vocab.h), deterministically (same input, same bytes).
#ifndef TCC_RUNTIME_TOOLS_TOKENIZE_H
#define TCC_RUNTIME_TOOLS_TOKENIZE_H

#include "runtime/trun/data/Vocab.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tcc::data {

// The text of the inputs, concatenated in order. A directory contributes
// every regular file below it, in sorted path order; symbolic links and
// binary files (holding a NUL byte) found in a directory are skipped. Files
// named on the command line are always read.
struct Corpus {
  std::string text;
  std::vector<std::string> files;   // read, in order
  std::vector<size_t> file_starts;  // where each of `files` begins in text
  std::vector<std::string> skipped; // binary files skipped in directories
};

// Reads the inputs; with `require_utf8`, each file must be valid UTF-8
// (the error names the file and the byte offset).
absl::StatusOr<Corpus> ReadCorpus(const std::vector<std::string> &inputs,
                                  bool require_utf8);

// Char level: the vocabulary is the text's distinct characters in code point
// order (at most 65536, the ids a uint16 shard can hold). Byte level: 256
// ids, id = byte value.
struct Tokenized {
  trun::Vocab vocab;
  std::vector<uint16_t> tokens;
};
absl::StatusOr<Tokenized> Tokenize(const std::string &text,
                                   trun::Vocab::Level level);

// The corpus in the ids of an existing vocabulary (`vocab_path`, read into
// `vocab`), for fine-tuning a model on new text with its own ids. A
// character the vocabulary lacks is an error naming it, the file and the
// byte offset in that file, and every missing character with its count:
// ids never shift silently.
absl::StatusOr<std::vector<uint16_t>>
EncodeWithVocab(const Corpus &corpus, const trun::Vocab &vocab,
                const std::string &vocab_path);

struct TokenizeOptions {
  // Unset: the level of `vocab_path` (which must then be given).
  std::optional<trun::Vocab::Level> level = trun::Vocab::Level::kChar;
  // An existing vocab.json (tcc-data's, or a checkpoint's): tokenize with
  // its ids and write the same ids as OUT_PREFIX_vocab.json. Empty: build
  // the vocabulary from the text.
  std::string vocab_path;
  double val_fraction = 0.1; // the last floor(N * F) tokens go to val
  std::string out_prefix;
  std::vector<std::string> inputs;
};

struct TokenizeReport {
  Corpus corpus; // text cleared after tokenizing
  trun::Vocab::Level level = trun::Vocab::Level::kChar;
  int64_t vocab_size = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  std::string train_path, val_path, vocab_path;
};

// Reads, tokenizes, splits and writes OUT_PREFIX_train.bin,
// OUT_PREFIX_val.bin and OUT_PREFIX_vocab.json (each atomically).
absl::StatusOr<TokenizeReport> RunTokenize(const TokenizeOptions &options);

} // namespace tcc::data

#endif // TCC_RUNTIME_TOOLS_TOKENIZE_H
