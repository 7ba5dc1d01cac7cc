#include "runtime/tools/Tokenize.h"

#include "runtime/trun/data/TokenShards.h"
#include "runtime/trun/io/AtomicFile.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace tcc::data {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadWholeFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (in.bad())
    return absl::DataLossError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  return text;
}

// The files below `dir`: regular, not symbolic links, sorted by path.
absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string &dir) {
  std::vector<std::string> files;
  std::error_code error;
  fs::recursive_directory_iterator it(dir, error), end;
  if (error)
    return absl::NotFoundError(
        absl::StrCat("cannot read ", dir, ": ", error.message()));
  for (; it != end; it.increment(error)) {
    if (error)
      return absl::NotFoundError(
          absl::StrCat("cannot read ", dir, ": ", error.message()));
    if (it->is_symlink() || !it->is_regular_file())
      continue;
    files.push_back(it->path().string());
  }
  if (error)
    return absl::NotFoundError(
        absl::StrCat("cannot read ", dir, ": ", error.message()));
  std::sort(files.begin(), files.end());
  return files;
}

absl::Status CheckUtf8(const std::string &path, const std::string &text) {
  for (size_t i = 0; i < text.size();) {
    size_t length = trun::Utf8CharLength(text, i);
    if (length == 0)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": invalid UTF-8 at byte ", i,
          " (char level needs UTF-8 text; use --level byte)"));
    i += length;
  }
  return absl::OkStatus();
}

// Decodes the UTF-8 character of `length` bytes at text[i] (already valid).
uint32_t CodePoint(const std::string &text, size_t i, size_t length) {
  static const uint8_t kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t code = static_cast<unsigned char>(text[i]) & kLeadMask[length];
  for (size_t k = 1; k < length; ++k)
    code = (code << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  return code;
}

// A character for an error message: "'é' (U+00E9)", or "U+000A" for a
// control character, which would break the one-line message.
std::string DescribeCharacter(uint32_t code, absl::string_view utf8) {
  std::string hex = absl::StrFormat("U+%04X", code);
  if (code < 0x20 || (code >= 0x7F && code < 0xA0))
    return hex;
  return absl::StrCat("'", utf8, "' (", hex, ")");
}

} // namespace

absl::StatusOr<Corpus> ReadCorpus(const std::vector<std::string> &inputs,
                                  bool require_utf8) {
  Corpus corpus;
  for (const std::string &input : inputs) {
    std::error_code error;
    bool is_directory = fs::is_directory(input, error);
    std::vector<std::string> paths = {input};
    if (is_directory) {
      absl::StatusOr<std::vector<std::string>> listed = ListDirectory(input);
      if (!listed.ok())
        return listed.status();
      paths = std::move(*listed);
    }
    for (const std::string &path : paths) {
      absl::StatusOr<std::string> text = ReadWholeFile(path);
      if (!text.ok())
        return text.status();
      if (is_directory && text->find('\0') != std::string::npos) {
        corpus.skipped.push_back(path);
        continue;
      }
      if (require_utf8)
        if (absl::Status s = CheckUtf8(path, *text); !s.ok())
          return s;
      corpus.files.push_back(path);
      corpus.file_starts.push_back(corpus.text.size());
      corpus.text += *text;
    }
  }
  return corpus;
}

absl::StatusOr<Tokenized> Tokenize(const std::string &text,
                                   trun::Vocab::Level level) {
  Tokenized result;
  result.tokens.reserve(text.size());
  if (level == trun::Vocab::Level::kByte) {
    result.vocab = trun::Vocab::Bytes();
    for (unsigned char c : text)
      result.tokens.push_back(c);
    return result;
  }
  // Pass 1: which code points occur; ids follow code point order.
  constexpr uint32_t kCodePoints = 0x110000;
  std::vector<int32_t> id_of(kCodePoints, -1);
  for (size_t i = 0; i < text.size();) {
    size_t length = trun::Utf8CharLength(text, i);
    if (length == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("invalid UTF-8 at byte ", i));
    id_of[CodePoint(text, i, length)] = 0;
    i += length;
  }
  std::vector<std::string> characters;
  for (uint32_t code = 0; code < kCodePoints; ++code)
    if (id_of[code] == 0) {
      id_of[code] = static_cast<int32_t>(characters.size());
      std::string utf8;
      if (code < 0x80) {
        utf8 = {static_cast<char>(code)};
      } else if (code < 0x800) {
        utf8 = {static_cast<char>(0xC0 | (code >> 6)),
                static_cast<char>(0x80 | (code & 0x3F))};
      } else if (code < 0x10000) {
        utf8 = {static_cast<char>(0xE0 | (code >> 12)),
                static_cast<char>(0x80 | ((code >> 6) & 0x3F)),
                static_cast<char>(0x80 | (code & 0x3F))};
      } else {
        utf8 = {static_cast<char>(0xF0 | (code >> 18)),
                static_cast<char>(0x80 | ((code >> 12) & 0x3F)),
                static_cast<char>(0x80 | ((code >> 6) & 0x3F)),
                static_cast<char>(0x80 | (code & 0x3F))};
      }
      characters.push_back(std::move(utf8));
    }
  if (static_cast<int64_t>(characters.size()) > trun::kMaxTokenShardVocab)
    return absl::InvalidArgumentError(absl::StrCat(
        "the text has ", characters.size(),
        " distinct characters; token shards hold at most ",
        trun::kMaxTokenShardVocab, " ids (uint16); use --level byte"));
  // Pass 2: the ids.
  for (size_t i = 0; i < text.size();) {
    size_t length = trun::Utf8CharLength(text, i);
    result.tokens.push_back(
        static_cast<uint16_t>(id_of[CodePoint(text, i, length)]));
    i += length;
  }
  absl::StatusOr<trun::Vocab> vocab = trun::Vocab::Chars(std::move(characters));
  if (!vocab.ok())
    return vocab.status();
  result.vocab = std::move(*vocab);
  return result;
}

absl::StatusOr<std::vector<uint16_t>>
EncodeWithVocab(const Corpus &corpus, const trun::Vocab &vocab,
                const std::string &vocab_path) {
  const std::string &text = corpus.text;
  std::vector<uint16_t> tokens;
  tokens.reserve(text.size());
  if (vocab.level() == trun::Vocab::Level::kByte) {
    for (unsigned char c : text)
      tokens.push_back(c); // every byte has its id: nothing can be missing
    return tokens;
  }
  std::map<std::string, uint16_t> id_of;
  for (size_t id = 0; id < vocab.characters().size(); ++id)
    id_of.emplace(vocab.characters()[id], static_cast<uint16_t>(id));
  // Missing characters by code point (their UTF-8 and count), and the
  // first occurrence of any: one error that says everything to fix.
  std::map<uint32_t, std::pair<std::string, int64_t>> missing;
  size_t first_missing = std::string::npos;
  for (size_t i = 0; i < text.size();) {
    size_t length = trun::Utf8CharLength(text, i);
    if (length == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("invalid UTF-8 at byte ", i));
    std::string character = text.substr(i, length);
    auto found = id_of.find(character);
    if (found != id_of.end()) {
      tokens.push_back(found->second);
    } else {
      auto &[utf8, count] = missing[CodePoint(text, i, length)];
      utf8 = std::move(character);
      ++count;
      if (first_missing == std::string::npos)
        first_missing = i;
    }
    i += length;
  }
  if (missing.empty())
    return tokens;
  // The file holding the first missing character, and the offset in it.
  size_t file = std::upper_bound(corpus.file_starts.begin(),
                                 corpus.file_starts.end(), first_missing) -
                corpus.file_starts.begin() - 1;
  size_t length = trun::Utf8CharLength(text, first_missing);
  constexpr int kListed = 10;
  std::vector<std::string> listed;
  for (const auto &[code, utf8_count] : missing) {
    if (listed.size() == kListed) {
      listed.push_back("...");
      break;
    }
    listed.push_back(absl::StrCat(DescribeCharacter(code, utf8_count.first),
                                  " ", utf8_count.second,
                                  utf8_count.second == 1 ? " time" : " times"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      corpus.files[file], ": character ",
      DescribeCharacter(CodePoint(text, first_missing, length),
                        text.substr(first_missing, length)),
      " at byte ", first_missing - corpus.file_starts[file],
      " is not in the vocabulary ", vocab_path, " (char level, ",
      vocab.size(), " tokens); missing from it: ", absl::StrJoin(listed, ", "),
      " (remove them from the text, or tokenize without --vocab for a new "
      "vocabulary with other ids)"));
}

absl::StatusOr<TokenizeReport> RunTokenize(const TokenizeOptions &options) {
  TokenizeReport report;
  std::optional<trun::Vocab> given_vocab;
  if (!options.vocab_path.empty()) {
    absl::StatusOr<trun::Vocab> read = trun::Vocab::Read(options.vocab_path);
    if (!read.ok())
      return read.status();
    if (read->size() > trun::kMaxTokenShardVocab)
      return absl::InvalidArgumentError(absl::StrCat(
          options.vocab_path, ": ", read->size(),
          " tokens; token shards hold at most ", trun::kMaxTokenShardVocab,
          " ids (uint16)"));
    auto name = [](trun::Vocab::Level level) {
      return level == trun::Vocab::Level::kChar ? "char" : "byte";
    };
    if (options.level && *options.level != read->level())
      return absl::InvalidArgumentError(absl::StrCat(
          "--level ", name(*options.level), " but the vocabulary ",
          options.vocab_path, " is ", name(read->level()),
          " level (drop --level to use the vocabulary's)"));
    given_vocab = std::move(*read);
  } else if (!options.level) {
    return absl::InvalidArgumentError("no --level and no --vocab");
  }
  report.level = given_vocab ? given_vocab->level() : *options.level;
  absl::StatusOr<Corpus> corpus =
      ReadCorpus(options.inputs, report.level == trun::Vocab::Level::kChar);
  if (!corpus.ok())
    return corpus.status();
  report.corpus = std::move(*corpus);
  if (report.corpus.text.empty()) {
    std::string skipped =
        report.corpus.skipped.empty()
            ? ""
            : absl::StrCat(" (", report.corpus.skipped.size(),
                           " binary files skipped)");
    return absl::InvalidArgumentError(
        absl::StrCat("no text to tokenize: the ", report.corpus.files.size(),
                     " files read hold 0 bytes", skipped));
  }
  absl::StatusOr<Tokenized> tokenized;
  if (given_vocab) {
    absl::StatusOr<std::vector<uint16_t>> tokens =
        EncodeWithVocab(report.corpus, *given_vocab, options.vocab_path);
    if (!tokens.ok())
      return tokens.status();
    tokenized = Tokenized{std::move(*given_vocab), std::move(*tokens)};
  } else {
    tokenized = Tokenize(report.corpus.text, report.level);
    if (!tokenized.ok())
      return tokenized.status();
  }
  report.corpus.text.clear();
  report.corpus.text.shrink_to_fit();

  const std::vector<uint16_t> &tokens = tokenized->tokens;
  int64_t total = static_cast<int64_t>(tokens.size());
  report.val_tokens = static_cast<int64_t>(
      static_cast<double>(total) * options.val_fraction);
  report.train_tokens = total - report.val_tokens;
  if (options.val_fraction > 0 && report.val_tokens == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the text has ", total, " tokens; --val-fraction ",
        options.val_fraction, " leaves no validation tokens"));
  report.vocab_size = tokenized->vocab.size();
  report.train_path = options.out_prefix + "_train.bin";
  report.val_path = options.out_prefix + "_val.bin";
  report.vocab_path = options.out_prefix + "_vocab.json";
  // The output prefix's folder is made, as a user naming it expects.
  std::filesystem::path folder = std::filesystem::path(options.out_prefix).parent_path();
  std::error_code error;
  if (!folder.empty() && !std::filesystem::is_directory(folder) &&
      !std::filesystem::create_directories(folder, error) && error)
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create the output folder ", folder.string(), ": ", error.message()));
  absl::Span<const uint16_t> all(tokens);
  if (absl::Status s = trun::WriteTokenShard(
          report.train_path, all.subspan(0, report.train_tokens));
      !s.ok())
    return s;
  if (absl::Status s = trun::WriteTokenShard(
          report.val_path, all.subspan(report.train_tokens));
      !s.ok())
    return s;
  std::string vocab_json = tokenized->vocab.ToJson();
  if (absl::Status s =
          trun::WriteFileAtomically(report.vocab_path, {vocab_json});
      !s.ok())
    return s;
  return report;
}

} // namespace tcc::data
