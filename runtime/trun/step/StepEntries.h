// The further entry points of a step (tcc_step_descriptor.entries, step_abi.h
// tcc_step_entry): checks, lookup and the `trun --info` lines. "encode",
// "train_cached" and "eval_cached" come from tcc's frozen-subgraph cut
// (tcc compile --cache-frozen); "prefill" / "decode" from generation.
#ifndef TCC_RUNTIME_TRUN_STEP_STEPENTRIES_H
#define TCC_RUNTIME_TRUN_STEP_STEPENTRIES_H

#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <ostream>

namespace tcc::trun {

// The descriptor's entries (0 for a step built before the field).
inline int32_t NumEntries(const tcc_step_descriptor &d) {
  return tcc_step_descriptor_has_entries(&d) ? d.num_entries : 0;
}

// Entry `name`, or null.
const tcc_step_entry *FindEntry(const tcc_step_descriptor &d, absl::string_view name);
// Its index in d.entries, or -1.
int32_t EntryIndex(const tcc_step_descriptor &d, absl::string_view name);

// Whether entry `e` trains (its name begins with "train": it updates the
// parameters and optimizer state like d.train).
bool EntryTrains(const tcc_step_entry &e);

// Entries are well formed: a non-negative count and a list when positive;
// each with a unique non-empty name other than train / eval, a function,
// consistent tensor tables (names unique within each list, known dtypes,
// shapes matching num_elements and size_bytes) and finite FLOPs.
absl::Status ValidateEntries(const tcc_step_descriptor &d, absl::string_view origin);

// "entries: 2" and one line per entry with its inputs, outputs and state.
void PrintEntries(const tcc_step_descriptor &d, std::ostream &out);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_STEPENTRIES_H
