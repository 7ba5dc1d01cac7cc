// The ranges the optimizer hyper-parameters must lie in (learning rate,
// momentum, betas, eps, weight decay), with how messages spell them. One
// home, so the importer's checks of a model file's training recipe and the
// verifiers of the tg optimizer ops accept the same values and say so alike.
#ifndef TCC_DIALECTS_COMMON_HYPERPARAMETERRANGES_H
#define TCC_DIALECTS_COMMON_HYPERPARAMETERRANGES_H

#include <cmath>
#include <limits>

namespace tcc::model {

struct HyperParameterRange {
  double lo, hi;
  bool loOpen, hiOpen;  // whether lo / hi themselves lie outside
  const char *spelling; // "> 0": for "<field> must be > 0, got ..."

  // `value` is finite and within the range.
  bool contains(double value) const {
    return std::isfinite(value) && (loOpen ? value > lo : value >= lo) &&
           (hiOpen ? value < hi : value <= hi);
  }
};

inline constexpr HyperParameterRange kPositive{
    0, std::numeric_limits<double>::infinity(), true, false, "> 0"};
inline constexpr HyperParameterRange kNonNegative{
    0, std::numeric_limits<double>::infinity(), false, false, ">= 0"};
inline constexpr HyperParameterRange kUnitInterval{0, 1, false, true,
                                                   "in [0, 1)"};

} // namespace tcc::model

#endif
