// The vocabulary file `tcc-data tokenize` writes next to its token shards
// (OUT_PREFIX_vocab.json), used by trun to encode a prompt and decode samples.
//
//   char level: {"format": "tcc-vocab", "version": 1, "level": "char",
//                "vocab_size": V, "tokens": ["\n", " ", "!", ...]}
//               token id i is the UTF-8 string tokens[i] (one character;
//               ids follow the characters' code point order)
//   byte level: {"format": "tcc-vocab", "version": 1, "level": "byte",
//                "vocab_size": 256}
//               token id i is the byte i (no "tokens": most single bytes
//               above 0x7f are not valid JSON strings)
#ifndef TCC_RUNTIME_TRUN_DATA_VOCAB_H
#define TCC_RUNTIME_TRUN_DATA_VOCAB_H

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tcc::trun {

class Vocab {
public:
  enum class Level { kByte, kChar };

  // Byte level: id = byte value, 256 ids.
  static Vocab Bytes();
  // Char level over these characters (UTF-8 strings, one character each,
  // distinct); ids in the given order.
  static absl::StatusOr<Vocab> Chars(std::vector<std::string> characters);
  // Reads a vocab.json; errors name the file and what is wrong.
  static absl::StatusOr<Vocab> Read(const std::string &path);

  // The vocab.json text (deterministic: keys sorted, one line).
  std::string ToJson() const;

  Level level() const { return level_; }
  int64_t size() const {
    return level_ == Level::kByte ? 256
                                  : static_cast<int64_t>(characters_.size());
  }
  const std::vector<std::string> &characters() const { return characters_; }

  // Text -> ids. Char level: the text must be valid UTF-8 and every
  // character in the vocabulary.
  absl::StatusOr<std::vector<int64_t>> Encode(absl::string_view text) const;
  // ids -> text; every id must be below size().
  std::string Decode(const std::vector<int64_t> &ids) const;

private:
  Level level_ = Level::kByte;
  std::vector<std::string> characters_;     // char level: id -> character
  std::map<std::string, int64_t> char_ids_; // char level: character -> id
};

// The length of the UTF-8 character starting at text[i], or 0 when the bytes
// there are not a valid UTF-8 character (bad lead byte, bad continuation,
// overlong form, surrogate, beyond U+10FFFF, or cut off).
size_t Utf8CharLength(absl::string_view text, size_t i);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_VOCAB_H
