// tcc-data: prepares data for trun. See docs/runtime.md ("Token data").
//
//   tcc-data tokenize --level char|byte | --vocab FILE [--val-fraction F]
//                     -o OUT_PREFIX FILES...
#include "support/NearestName.h"
#include "runtime/tools/Tokenize.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>
#include <csignal>

namespace {

const char kUsage[] =
    R"(usage: tcc-data tokenize (--level char|byte | --vocab FILE) [--val-fraction F]
                         -o OUT_PREFIX FILES...

Tokenizes raw text for trun: writes OUT_PREFIX_train.bin and OUT_PREFIX_val.bin
(token shards: 256 x int32 header with magic 20240520, version 1 and the token
count, then uint16 tokens, as nanoGPT and llm.c write them) and
OUT_PREFIX_vocab.json (id -> text, for trun --vocab).

  --level char          one token per distinct UTF-8 character, ids in code
                        point order (the text must be UTF-8)
  --level byte          one token per byte, id = byte value (256 ids)
  --vocab FILE          tokenize with the ids of an existing vocabulary (a
                        _vocab.json of tcc-data, a checkpoint's vocab.json)
                        to fine-tune a model on new text; the same ids are
                        written as OUT_PREFIX_vocab.json. A character it
                        lacks is an error naming the character, the file and
                        the byte (ids never shift). Its level is used;
                        --level, if given, must match it
  --val-fraction F      the last floor(N * F) of the N tokens go to the
                        validation shard (0 <= F < 1, default 0.1)
  -o OUT_PREFIX         output path prefix (its folder is created if missing)
  FILES...              text files or directories; a directory contributes its
                        regular files in sorted path order, skipping symbolic
                        links and binary files (with a NUL byte)

The output depends only on the input bytes and the flags.
Exit status: 0 on success, 1 on an error, 2 on a usage error.
)";

int Fail(const std::string &message, int exit_code) {
  std::cout.flush();
  std::fprintf(stderr, "tcc-data: error: %s\n",
               absl::StrReplaceAll(message, {{"\n", " "}}).c_str());
  return exit_code;
}

// Parses the arguments after "tokenize"; an error is a usage message.
std::optional<std::string> ParseTokenize(const std::vector<std::string> &args,
                                         tcc::data::TokenizeOptions &options) {
  bool have_level = false, have_fraction = false, have_output = false,
       have_vocab = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      options.inputs.push_back(arg);
      continue;
    }
    size_t equals = arg.find('=');
    std::string flag = arg.substr(0, equals);
    if (flag != "--level" && flag != "--val-fraction" && flag != "-o" &&
        flag != "--vocab")
      return "unknown flag '" + arg + "'" + tcc::DidYouMean(flag, kUsage);
    bool &seen = flag == "--level"          ? have_level
                 : flag == "--val-fraction" ? have_fraction
                 : flag == "--vocab"        ? have_vocab
                                            : have_output;
    if (seen)
      return flag + " given twice";
    seen = true;
    std::string value;
    if (equals != std::string::npos)
      value = arg.substr(equals + 1);
    else if (i + 1 < args.size())
      value = args[++i];
    if (value.empty())
      return flag + " needs a value";
    if (flag == "--level") {
      if (value == "char")
        options.level = tcc::trun::Vocab::Level::kChar;
      else if (value == "byte")
        options.level = tcc::trun::Vocab::Level::kByte;
      else
        return "--level expects char or byte, got '" + value + "'";
    } else if (flag == "--val-fraction") {
      double f = 0;
      if (!absl::SimpleAtod(value, &f) || !std::isfinite(f) || f < 0 || f >= 1)
        return "--val-fraction expects a number in [0, 1), got '" + value +
               "'";
      options.val_fraction = f;
    } else if (flag == "--vocab") {
      options.vocab_path = value;
    } else {
      options.out_prefix = value;
    }
  }
  if (!have_level && !have_vocab)
    return "missing --level char|byte (or --vocab FILE)";
  if (!have_level)
    options.level.reset(); // the vocabulary's level
  if (!have_output)
    return "missing -o OUT_PREFIX";
  if (options.inputs.empty())
    return "no input FILES";
  return std::nullopt;
}

} // namespace

int main(int argc, char **argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, which the
  // writers report naming the file (and remove their temporaries), instead
  // of SIGXFSZ ending the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string &arg : args)
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  if (args.empty())
    return Fail("missing command (see tcc-data --help)", 2);
  if (args[0] != "tokenize")
    return Fail("unknown command '" + args[0] + "' (see tcc-data --help)", 2);
  tcc::data::TokenizeOptions options;
  if (std::optional<std::string> usage =
          ParseTokenize({args.begin() + 1, args.end()}, options))
    return Fail(*usage, 2);
  absl::StatusOr<tcc::data::TokenizeReport> report =
      tcc::data::RunTokenize(options);
  if (!report.ok())
    return Fail(std::string(report.status().message()), 1);
  std::cout << "read " << report->corpus.files.size() << " files";
  if (!report->corpus.skipped.empty())
    std::cout << " (skipped " << report->corpus.skipped.size()
              << " binary files)";
  std::cout << "\n"
            << (report->level == tcc::trun::Vocab::Level::kChar ? "char"
                                                                : "byte")
            << " level: vocabulary of " << report->vocab_size << " tokens"
            << (options.vocab_path.empty() ? ""
                                           : " from " + options.vocab_path)
            << "\n"
            << report->train_path << ": " << report->train_tokens
            << " tokens\n"
            << report->val_path << ": " << report->val_tokens << " tokens\n"
            << report->vocab_path << "\n";
  return 0;
}
