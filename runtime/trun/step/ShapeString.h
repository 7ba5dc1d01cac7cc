// A tensor descriptor's shape as text, "[64, 784]" ("[]" for a scalar): in
// errors and trun --info. Header-only so that the descriptor checks
// (StepDescriptor, StepEntries) share it without including each other.
#ifndef TCC_RUNTIME_TRUN_STEP_SHAPESTRING_H
#define TCC_RUNTIME_TRUN_STEP_SHAPESTRING_H

#include "tcc/step_abi.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <string>

namespace tcc::trun {

inline std::string ShapeString(const tcc_tensor_desc &tensor) {
  if (tensor.rank <= 0 || !tensor.shape)
    return "[]";
  return absl::StrCat("[", absl::StrJoin(tensor.shape, tensor.shape + tensor.rank, ", "), "]");
}

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_SHAPESTRING_H
