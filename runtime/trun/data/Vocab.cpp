#include "runtime/trun/data/Vocab.h"

#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace tcc::trun {
namespace {

constexpr char kFormat[] = "tcc-vocab";
constexpr int kVersion = 1;

// "'x'" for printable UTF-8 text, its bytes in hex otherwise.
std::string Quote(absl::string_view text) {
  bool printable = !text.empty();
  for (size_t i = 0; printable && i < text.size();) {
    size_t length = Utf8CharLength(text, i);
    printable = length > 0 && static_cast<unsigned char>(text[i]) >= 0x20 &&
                text[i] != 0x7f;
    i += length;
  }
  if (printable)
    return absl::StrCat("'", text, "'");
  std::string hex = "byte(s)";
  for (unsigned char c : text)
    absl::StrAppend(&hex, " 0x", absl::Hex(c, absl::kZeroPad2));
  return hex;
}

} // namespace

size_t Utf8CharLength(absl::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  size_t length;
  uint32_t code;
  if (lead < 0x80)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0; // continuation byte, overlong lead C0/C1, or F5..FF
  }
  if (i + length > text.size())
    return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80)
      return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if ((length == 3 && code < 0x800) || (length == 4 && code < 0x10000) ||
      (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF)
    return 0;
  return length;
}

Vocab Vocab::Bytes() { return Vocab(); }

absl::StatusOr<Vocab> Vocab::Chars(std::vector<std::string> characters) {
  Vocab vocab;
  vocab.level_ = Level::kChar;
  for (size_t id = 0; id < characters.size(); ++id) {
    const std::string &c = characters[id];
    if (c.empty() || Utf8CharLength(c, 0) != c.size())
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", id, " is not one UTF-8 character: ", Quote(c)));
    if (!vocab.char_ids_.emplace(c, static_cast<int64_t>(id)).second)
      return absl::InvalidArgumentError(
          absl::StrCat("token ", id, " repeats character ", Quote(c)));
  }
  vocab.characters_ = std::move(characters);
  return vocab;
}

absl::StatusOr<Vocab> Vocab::Read(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open vocabulary ", path));
  // A vocabulary is small (a char level one is its characters); reading
  // stops past kMaxBytes, so /dev/zero or a wrong large file is an error,
  // not all of memory.
  constexpr size_t kMaxBytes = size_t(64) << 20;
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxBytes)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": more than 64 MiB: not a vocabulary (expected a vocab.json from "
                "tcc-data tokenize)"));
  }
  auto bad = [&path](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", what, " (expected a vocab.json from "
                                       "tcc-data tokenize)"));
  };
  nlohmann::json json = nlohmann::json::parse(text, nullptr,
                                              /*allow_exceptions=*/false);
  if (json.is_discarded())
    return bad("not valid JSON");
  // Every field's type is checked before it is read (a number where a
  // string belongs is this error, not an exception).
  auto format = json.is_object() ? json.find("format") : json.end();
  if (!json.is_object() || format == json.end() || !format->is_string() ||
      format->get<std::string>() != kFormat)
    return bad(absl::StrCat("no \"format\": \"", kFormat, "\""));
  auto version = json.find("version");
  if (version == json.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kVersion)
    return bad(absl::StrCat("unsupported version, this trun reads version ",
                            kVersion));
  auto level = json.find("level");
  auto size = json.find("vocab_size");
  if (size == json.end() || !size->is_number_integer() ||
      size->get<int64_t>() < 1)
    return bad("no positive integer \"vocab_size\"");
  if (level != json.end() && !level->is_string())
    return bad("\"level\" is not a string");
  if (level != json.end() && *level == "byte") {
    if (size->get<int64_t>() != 256)
      return bad("byte level with a vocab_size other than 256");
    return Bytes();
  }
  if (level == json.end() || *level != "char")
    return bad("\"level\" is neither \"byte\" nor \"char\"");
  auto tokens = json.find("tokens");
  if (tokens == json.end() || !tokens->is_array())
    return bad("char level without a \"tokens\" array");
  if (static_cast<int64_t>(tokens->size()) != size->get<int64_t>())
    return bad(absl::StrCat("vocab_size ", size->get<int64_t>(), " but ",
                            tokens->size(), " tokens"));
  std::vector<std::string> characters;
  for (const nlohmann::json &token : *tokens) {
    if (!token.is_string())
      return bad(absl::StrCat("token ", characters.size(), " is not a string"));
    characters.push_back(token.get<std::string>());
  }
  absl::StatusOr<Vocab> vocab = Chars(std::move(characters));
  if (!vocab.ok())
    return bad(vocab.status().message());
  return vocab;
}

std::string Vocab::ToJson() const {
  nlohmann::json json;
  json["format"] = kFormat;
  json["version"] = kVersion;
  json["level"] = level_ == Level::kByte ? "byte" : "char";
  json["vocab_size"] = size();
  if (level_ == Level::kChar)
    json["tokens"] = characters_;
  return json.dump() + "\n";
}

absl::StatusOr<std::vector<int64_t>>
Vocab::Encode(absl::string_view text) const {
  std::vector<int64_t> ids;
  if (level_ == Level::kByte) {
    for (unsigned char c : text)
      ids.push_back(c);
    return ids;
  }
  for (size_t i = 0; i < text.size();) {
    size_t length = Utf8CharLength(text, i);
    if (length == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("text is not valid UTF-8 at byte ", i));
    std::string c(text.substr(i, length));
    auto found = char_ids_.find(c);
    if (found == char_ids_.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "character ", Quote(c), " at byte ", i, " is not in the vocabulary"));
    ids.push_back(found->second);
    i += length;
  }
  return ids;
}

std::string Vocab::Decode(const std::vector<int64_t> &ids) const {
  std::string text;
  for (int64_t id : ids) {
    if (level_ == Level::kByte)
      text.push_back(static_cast<char>(id));
    else
      text += characters_[id];
  }
  return text;
}

} // namespace tcc::trun
