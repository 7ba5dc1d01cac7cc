#include "runtime/trun/step/MemoryByPrecision.h"

#include "runtime/initializers/Dtypes.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <set>

namespace tcc::trun {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

void AddTensors(int32_t count, const tcc_tensor_desc *list,
                std::map<int32_t, int64_t> &bytes, bool gradients_only) {
  for (int32_t i = 0; i < count; ++i) {
    if (gradients_only && !absl::StartsWith(list[i].name, "grad:"))
      continue;
    bytes[list[i].dtype] += list[i].size_bytes;
  }
}

void AddEntries(int32_t count, const tcc_dtype_bytes *list,
                std::map<int32_t, int64_t> &bytes) {
  for (int32_t i = 0; i < count; ++i)
    bytes[list[i].dtype] += list[i].bytes;
}

absl::Status CheckEntries(int32_t count, const tcc_dtype_bytes *list,
                          absl::string_view field, absl::string_view origin) {
  if (count < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": negative num_", field, " ", count));
  if (count > 0 && !list)
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", count, " ", field, " entries but a null list"));
  std::set<int32_t> seen;
  for (int32_t i = 0; i < count; ++i) {
    if (DtypeSize(list[i].dtype) == 0)
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": ", field, " entry #", i, " has unknown dtype ",
          list[i].dtype));
    if (list[i].bytes < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": ", field, " entry #", i, " (",
                       DtypeName(list[i].dtype), ") has negative bytes ",
                       list[i].bytes));
    if (!seen.insert(list[i].dtype).second)
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": ", field, " lists ",
                       DtypeName(list[i].dtype), " twice"));
  }
  return absl::OkStatus();
}

// Columns: floats from wide to narrow, then integers.
constexpr int32_t kColumnOrder[] = {TCC_DTYPE_F64, TCC_DTYPE_F32,
                                    TCC_DTYPE_BF16, TCC_DTYPE_F16,
                                    TCC_DTYPE_I64, TCC_DTYPE_I32,
                                    TCC_DTYPE_U8};

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.4f", static_cast<double>(bytes) / kMiB);
}

} // namespace

std::vector<MemoryRow> MemoryByPrecision(const tcc_step_descriptor &d) {
  std::vector<MemoryRow> rows;
  rows.push_back({"parameters", {}});
  AddTensors(d.num_params, d.params, rows.back().bytes_by_dtype, false);
  MemoryRow gradients{"gradients", {}};
  AddTensors(d.num_train_outputs, d.train_outputs, gradients.bytes_by_dtype,
             /*gradients_only=*/true);
  // Without --emit-gradients the gradients are temporaries of the train
  // step (in its workspace); the compiler counts them by dtype.
  if (gradients.bytes_by_dtype.empty() && tcc_step_descriptor_has_gradient_bytes(&d))
    AddEntries(d.num_train_gradient_bytes, d.train_gradient_bytes,
               gradients.bytes_by_dtype);
  if (!gradients.bytes_by_dtype.empty())
    rows.push_back(std::move(gradients));
  rows.push_back({"optimizer state", {}});
  AddTensors(d.num_optimizer_state, d.optimizer_state,
             rows.back().bytes_by_dtype, false);
  if (tcc_step_descriptor_has_memory_by_dtype(&d)) {
    rows.push_back({"activations at peak", {}});
    AddEntries(d.num_train_peak_bytes, d.train_peak_bytes,
               rows.back().bytes_by_dtype);
    rows.push_back({"temporaries (no reuse)", {}});
    AddEntries(d.num_train_planned_bytes, d.train_planned_bytes,
               rows.back().bytes_by_dtype);
  }
  return rows;
}

absl::Status CheckMemoryByDtype(const tcc_step_descriptor &d,
                                absl::string_view origin) {
  if (!tcc_step_descriptor_has_memory_by_dtype(&d))
    return absl::OkStatus();
  if (absl::Status s = CheckEntries(d.num_train_planned_bytes,
                                    d.train_planned_bytes,
                                    "train_planned_bytes", origin);
      !s.ok())
    return s;
  if (absl::Status s = CheckEntries(d.num_train_peak_bytes, d.train_peak_bytes,
                                    "train_peak_bytes", origin);
      !s.ok())
    return s;
  if (!tcc_step_descriptor_has_gradient_bytes(&d))
    return absl::OkStatus();
  return CheckEntries(d.num_train_gradient_bytes, d.train_gradient_bytes,
                      "train_gradient_bytes", origin);
}

void PrintMemoryByPrecision(const tcc_step_descriptor &d, std::ostream &out) {
  std::vector<MemoryRow> rows = MemoryByPrecision(d);
  std::set<int32_t> present;
  for (const MemoryRow &row : rows)
    for (const auto &[dtype, bytes] : row.bytes_by_dtype)
      present.insert(dtype);
  std::vector<int32_t> columns;
  for (int32_t dtype : kColumnOrder)
    if (present.count(dtype))
      columns.push_back(dtype);

  out << "memory by precision (MiB):\n";
  out << absl::StrFormat("  %-24s", "");
  for (int32_t dtype : columns)
    out << absl::StrFormat("%13s", DtypeName(dtype));
  out << absl::StrFormat("%13s\n", "total");
  for (const MemoryRow &row : rows) {
    out << absl::StrFormat("  %-24s", row.category);
    int64_t total = 0;
    for (int32_t dtype : columns) {
      auto it = row.bytes_by_dtype.find(dtype);
      out << absl::StrFormat("%13s",
                             it == row.bytes_by_dtype.end() ? "-"
                                                            : MiB(it->second));
      if (it != row.bytes_by_dtype.end())
        total += it->second;
    }
    out << absl::StrFormat("%13s\n", MiB(total));
  }
  // The workspace mixes element types (its bytes are reused across them):
  // a total only.
  out << absl::StrFormat("  %-24s", "workspace (total)");
  for (size_t i = 0; i < columns.size(); ++i)
    out << absl::StrFormat("%13s", "");
  out << absl::StrFormat("%13s\n", MiB(d.workspace_bytes));
  if (!tcc_step_descriptor_has_memory_by_dtype(&d))
    out << "  (activations by precision: not in this step; it was built "
           "before the descriptor carried its memory plan)\n";
}

} // namespace tcc::trun
