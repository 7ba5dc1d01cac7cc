#include "runtime/trun/step/StepEntries.h"

#include "runtime/initializers/Dtypes.h"
#include "runtime/trun/step/ShapeString.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cmath>
#include <set>
#include <tuple>
#include <string>

namespace tcc::trun {
namespace {

absl::Status CheckList(int32_t count, const tcc_tensor_desc *list, absl::string_view kind,
                       const std::string &where) {
  if (count < 0 || (count > 0 && !list))
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", count, " ", kind, "s but ",
                                                   count < 0 ? "a negative count" : "a null list"));
  std::set<std::string> names;
  for (int32_t i = 0; i < count; ++i) {
    const tcc_tensor_desc &t = list[i];
    if (!t.name || !t.name[0])
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", kind, " #", i, " has no name"));
    std::string what = absl::StrCat(where, ": ", kind, " '", t.name, "'");
    if (!names.insert(t.name).second)
      return absl::InvalidArgumentError(absl::StrCat(what, " is listed twice"));
    if (DtypeSize(t.dtype) == 0 || t.rank < 0 || t.rank > 32 || (t.rank > 0 && !t.shape))
      return absl::InvalidArgumentError(absl::StrCat(what, " has an invalid dtype or shape"));
    int64_t elements = 1;
    for (int32_t k = 0; k < t.rank; ++k)
      if (t.shape[k] < 0 || __builtin_mul_overflow(elements, t.shape[k], &elements))
        return absl::InvalidArgumentError(absl::StrCat(what, " has an invalid shape"));
    if (elements != t.num_elements || t.size_bytes != elements * DtypeSize(t.dtype))
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has shape ", ShapeString(t), " but ", t.num_elements, " elements, ",
          t.size_bytes, " bytes"));
  }
  return absl::OkStatus();
}

void PrintList(const char *title, int32_t count, const tcc_tensor_desc *list, std::ostream &out) {
  for (int32_t i = 0; i < count; ++i)
    out << "    " << title << " " << list[i].name << "  " << DtypeName(list[i].dtype) << " "
        << ShapeString(list[i]) << "  " << list[i].size_bytes << " bytes\n";
}

} // namespace

const tcc_step_entry *FindEntry(const tcc_step_descriptor &d, absl::string_view name) {
  int32_t i = EntryIndex(d, name);
  return i < 0 ? nullptr : &d.entries[i];
}

int32_t EntryIndex(const tcc_step_descriptor &d, absl::string_view name) {
  for (int32_t i = 0; i < NumEntries(d); ++i)
    if (d.entries[i].name && name == d.entries[i].name)
      return i;
  return -1;
}

bool EntryTrains(const tcc_step_entry &e) {
  return e.name && absl::string_view(e.name).substr(0, 5) == "train";
}

absl::Status ValidateEntries(const tcc_step_descriptor &d, absl::string_view origin) {
  if (!tcc_step_descriptor_has_entries(&d))
    return absl::OkStatus();
  if (d.num_entries < 0 || (d.num_entries > 0 && !d.entries))
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", d.num_entries, " entries but ",
        d.num_entries < 0 ? "a negative count" : "a null list"));
  std::set<std::string> names;
  for (int32_t k = 0; k < d.num_entries; ++k) {
    const tcc_step_entry &e = d.entries[k];
    if (!e.name || !e.name[0])
      return absl::InvalidArgumentError(absl::StrCat(origin, ": entry #", k, " has no name"));
    std::string where = absl::StrCat(origin, ": entry '", e.name, "'");
    if (!names.insert(e.name).second || absl::string_view(e.name) == "train" ||
        absl::string_view(e.name) == "eval")
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the name is used twice (or is train / eval)"));
    if (!e.fn)
      return absl::InvalidArgumentError(absl::StrCat(where, " has a null function"));
    if (!std::isfinite(e.flops_per_call) || e.flops_per_call < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(where, " has invalid flops_per_call ", e.flops_per_call));
    for (auto [count, list, kind] :
         {std::tuple{e.num_inputs, e.inputs, "input"}, std::tuple{e.num_outputs, e.outputs, "output"},
          std::tuple{e.num_state, e.state, "state tensor"}})
      if (absl::Status s = CheckList(count, list, kind, where); !s.ok())
        return s;
  }
  return absl::OkStatus();
}

void PrintEntries(const tcc_step_descriptor &d, std::ostream &out) {
  if (NumEntries(d) == 0)
    return;
  out << "entries: " << d.num_entries << "\n";
  for (int32_t k = 0; k < d.num_entries; ++k) {
    const tcc_step_entry &e = d.entries[k];
    out << absl::StrFormat("  %s: %d inputs, %d outputs, %d state tensors, %.4g FLOPs/call%s\n",
                           e.name, e.num_inputs, e.num_outputs, e.num_state, e.flops_per_call,
                           EntryTrains(e) ? " (trains)" : "");
    PrintList("input", e.num_inputs, e.inputs, out);
    PrintList("output", e.num_outputs, e.outputs, out);
    PrintList("state", e.num_state, e.state, out);
  }
}

} // namespace tcc::trun
