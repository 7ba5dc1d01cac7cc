// trun --info's memory table: parameter, gradient, optimizer-state and
// activation bytes per precision, from the step descriptor's tensor tables
// and its memory-plan fields (train_planned_bytes / train_peak_bytes).
#ifndef TCC_RUNTIME_TRUN_STEP_MEMORYBYPRECISION_H
#define TCC_RUNTIME_TRUN_STEP_MEMORYBYPRECISION_H

#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace tcc::trun {

// One row of the table: bytes by tcc_dtype.
struct MemoryRow {
  std::string category;
  std::map<int32_t, int64_t> bytes_by_dtype;
};

// The rows, in order: "parameters"; "gradients" when the step returns
// separate gradient buffers (train outputs "grad:<param>"); "optimizer
// state"; and, when the descriptor has the memory-plan fields,
// "activations at peak" and "temporaries (no reuse)".
std::vector<MemoryRow> MemoryByPrecision(const tcc_step_descriptor &d);

// Checks the memory-plan fields when struct_size includes them: counts not
// negative, a list for a positive count, known dtypes, bytes not negative,
// each dtype once. `origin` names the library in errors.
absl::Status CheckMemoryByDtype(const tcc_step_descriptor &d,
                                absl::string_view origin);

// The table in MiB (a column per dtype present, then the total), then the
// workspace total; a step built before the memory-plan fields says so.
void PrintMemoryByPrecision(const tcc_step_descriptor &d, std::ostream &out);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_MEMORYBYPRECISION_H
