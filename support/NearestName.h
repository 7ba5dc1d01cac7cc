// "Did you mean" hints for command lines: the known name closest to a
// mistyped one. Header-only, in support/ (below the compiler and the
// runtime, which include nothing of each other's internals:
// tests/layering), so trun, tcc and tcc-data share it without linking each
// other.
#ifndef TCC_SUPPORT_NEARESTNAME_H
#define TCC_SUPPORT_NEARESTNAME_H

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tcc {

// Levenshtein distance (insertions, deletions, substitutions).
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The candidate nearest to `word`, when it is near enough to be a typo: at
// most a third of the longer one's length apart (at least 1, at most 3).
inline std::optional<std::string> NearestName(std::string_view word,
                                              const std::vector<std::string> &candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string &c : candidates) {
    size_t d = EditDistance(word, c);
    size_t limit = std::clamp<size_t>(std::max(word.size(), c.size()) / 3, 1, 3);
    if (d <= limit && (!best || d < best_distance)) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

// The flags ("--name") a --help text names, for NearestName.
inline std::vector<std::string> FlagsInHelp(std::string_view help) {
  std::vector<std::string> flags;
  for (size_t at = help.find("--"); at != std::string_view::npos; at = help.find("--", at + 2)) {
    if (at > 0 && help[at - 1] != ' ' && help[at - 1] != '\n' && help[at - 1] != '[' &&
        help[at - 1] != '(' && help[at - 1] != '|')
      continue;
    size_t end = at + 2;
    while (end < help.size() && (std::isalnum(static_cast<unsigned char>(help[end])) ||
                                 help[end] == '-'))
      ++end;
    if (end > at + 2) {
      std::string flag(help.substr(at, end - at));
      if (std::find(flags.begin(), flags.end(), flag) == flags.end())
        flags.push_back(flag);
    }
  }
  return flags;
}

// " (did you mean --steps?)" for a mistyped flag, else "" (also for a known
// flag given a form it does not take, e.g. --info=yes).
inline std::string DidYouMean(std::string_view flag, std::string_view help) {
  std::optional<std::string> near = NearestName(flag, FlagsInHelp(help));
  return near && *near != flag ? " (did you mean " + *near + "?)" : std::string();
}

} // namespace tcc

#endif // TCC_SUPPORT_NEARESTNAME_H
