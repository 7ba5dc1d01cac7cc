#include "runtime/trun/data/NamedArrays.h"

#include "runtime/trun/step/StepDescriptor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tcc::trun {
namespace {

// Python's spelling: (), (5,), (5, 3).
std::string TupleText(const std::vector<int64_t> &shape) {
  if (shape.size() == 1)
    return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

std::vector<int64_t> WithoutOnes(const std::vector<int64_t> &dims) {
  std::vector<int64_t> kept;
  for (int64_t d : dims)
    if (d != 1)
      kept.push_back(d);
  return kept;
}

// The stored type an input of `dtype` takes as is.
ArrayType NativeType(int32_t dtype) {
  switch (dtype) {
  case TCC_DTYPE_F64: return ArrayType::kF64;
  case TCC_DTYPE_I32: return ArrayType::kI32;
  case TCC_DTYPE_I64: return ArrayType::kI64;
  case TCC_DTYPE_U8: return ArrayType::kU8;
  case TCC_DTYPE_BF16: return ArrayType::kBF16;
  case TCC_DTYPE_F16: return ArrayType::kF16;
  default: return ArrayType::kF32;
  }
}

// Value `index` of `array`, as written in an error.
std::string ValueText(const StoredArray &array, int64_t index) {
  long double v = ArrayValue(array, index);
  if (IsFloatArrayType(array.type)) // whole numbers in full: 3000000000
    return std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15
               ? absl::StrCat(static_cast<int64_t>(v))
               : absl::StrFormat("%.9g", static_cast<double>(v));
  if (array.type == ArrayType::kU64)
    return absl::StrCat(static_cast<uint64_t>(v));
  return absl::StrCat(static_cast<int64_t>(v));
}

// Why `v` (stored as `type`) cannot become `dtype` exactly; "" if it can.
std::string Refusal(ArrayType type, int32_t dtype, long double v) {
  bool from_float = IsFloatArrayType(type);
  if (from_float && std::isnan(v))
    return "is nan; float values must be finite";
  if (from_float && std::isinf(v))
    return "is infinite; float values must be finite";
  switch (dtype) {
  case TCC_DTYPE_F32: {
    float f = static_cast<float>(v);
    if (std::isinf(f))
      return "is beyond float32's range";
    if (!from_float && static_cast<long double>(f) != v)
      return "is not exact in float32";
    return "";
  }
  case TCC_DTYPE_F64:
    if (!from_float && static_cast<long double>(static_cast<double>(v)) != v)
      return "is not exact in float64";
    return "";
  case TCC_DTYPE_BF16:
  case TCC_DTYPE_F16:
    return ""; // stored as the input's dtype: nothing to convert
  default: {
    if (v != std::trunc(v))
      return "is not a whole number";
    long double low = dtype == TCC_DTYPE_U8 ? 0
                      : dtype == TCC_DTYPE_I32
                          ? std::numeric_limits<int32_t>::min()
                          : std::numeric_limits<int64_t>::min();
    long double high = dtype == TCC_DTYPE_U8 ? 255
                       : dtype == TCC_DTYPE_I32
                           ? std::numeric_limits<int32_t>::max()
                           : std::numeric_limits<int64_t>::max();
    if (v < low || v > high)
      return absl::StrCat("is out of ", DtypeName(dtype), "'s range");
    return "";
  }
  }
}

void Store(int32_t dtype, long double v, uint8_t *out) {
  auto put = [out](auto value) { std::memcpy(out, &value, sizeof(value)); };
  switch (dtype) {
  case TCC_DTYPE_F32: put(static_cast<float>(v)); break;
  case TCC_DTYPE_F64: put(static_cast<double>(v)); break;
  case TCC_DTYPE_I32: put(static_cast<int32_t>(v)); break;
  case TCC_DTYPE_I64: put(static_cast<int64_t>(v)); break;
  case TCC_DTYPE_U8: put(static_cast<uint8_t>(v)); break;
  default: break; // f16 / bf16 are only copied as stored
  }
}

// Checks every value of `stored` and writes it in `input`'s dtype to `out`
// (an array already of that dtype moves its bytes there).
absl::Status Convert(StoredArray &stored, const tcc_tensor_desc &input,
                     NamedArrays::Array &out) {
  int32_t dtype = input.dtype;
  ArrayType native = NativeType(dtype);
  bool half = dtype == TCC_DTYPE_BF16 || dtype == TCC_DTYPE_F16;
  if (half && stored.type != native)
    return absl::InvalidArgumentError(absl::StrCat(
        stored.source, ": ", ArrayTypeName(stored.type), " array '",
        stored.name, "' cannot feed step input '", input.name, "' ",
        DtypeName(dtype), " ", ShapeString(input), " (a ", DtypeName(dtype),
        " input takes ", ArrayTypeName(native), " arrays only)"));
  const int64_t n = stored.num_elements();
  const int64_t per_sample = stored.shape[0] ? n / stored.shape[0] : 1;
  out.converted = stored.type != native;
  if (out.converted)
    out.data.assign(static_cast<size_t>(n * DtypeSize(dtype)), 0);
  const bool check = out.converted || IsFloatArrayType(stored.type);
  for (int64_t i = 0; check && i < n; ++i) {
    long double v = ArrayValue(stored, i);
    std::string why = Refusal(stored.type, dtype, v);
    if (!why.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          stored.source, ": value ", ValueText(stored, i), " at index ", i,
          " (sample ", i / per_sample, ") of array '", stored.name, "' ", why,
          " (step input '", input.name, "' is ", DtypeName(dtype), ")"));
    if (out.converted)
      Store(dtype, v, out.data.data() + i * DtypeSize(dtype));
  }
  if (!out.converted)
    out.data = std::move(stored.bytes);
  return absl::OkStatus();
}

// Labels of the accuracy: in [0, classes).
absl::Status CheckLabels(const NamedArrays::Array &array,
                         const StoredArray &stored, int32_t dtype,
                         int64_t classes) {
  int64_t count = static_cast<int64_t>(array.data.size()) / DtypeSize(dtype);
  for (int64_t i = 0; i < count; ++i) {
    int64_t label = 0;
    if (dtype == TCC_DTYPE_I64) {
      std::memcpy(&label, array.data.data() + i * 8, 8);
    } else {
      int32_t value;
      std::memcpy(&value, array.data.data() + i * 4, 4);
      label = value;
    }
    if (label < 0 || label >= classes)
      return absl::InvalidArgumentError(absl::StrCat(
          stored.source, ": label ", label, " of sample ", i, " in array '",
          stored.name, "' is out of range for 'logits' width ", classes));
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<NamedArrays> NamedArrays::Load(const std::string &value,
                                              absl::string_view flag,
                                              const tcc_step_descriptor &d,
                                              const StepBinding &binding) {
  absl::StatusOr<std::vector<ArraySpec>> specs = ParseArraySpecs(value, flag);
  if (!specs.ok())
    return specs.status();
  absl::StatusOr<std::vector<StoredArray>> stored = ReadArrays(*specs);
  if (!stored.ok())
    return stored.status();
  return Bind(std::move(*stored), flag, d, binding);
}

absl::StatusOr<NamedArrays> NamedArrays::Bind(std::vector<StoredArray> stored,
                                              absl::string_view flag,
                                              const tcc_step_descriptor &d,
                                              const StepBinding &binding) {
  // Names first: which array feeds which input.
  std::vector<int32_t> of_input(d.num_inputs, -1); // index into `stored`
  for (size_t k = 0; k < stored.size(); ++k) {
    int32_t input = -1;
    for (int32_t i = 0; i < d.num_inputs; ++i)
      if (stored[k].name == d.inputs[i].name)
        input = i;
    if (input == -1) {
      std::vector<std::string> names;
      for (int32_t i = 0; i < d.num_inputs; ++i)
        names.push_back(d.inputs[i].name);
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": array '", stored[k].name, "' (", stored[k].source,
          ") is not an input of step '", d.model_name, "' (inputs: ",
          absl::StrJoin(names, ", "), "); name it INPUT=FILE"));
    }
    if (of_input[input] != -1)
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": two arrays for step input '", stored[k].name, "': ",
          stored[of_input[input]].source, " and ", stored[k].source));
    of_input[input] = static_cast<int32_t>(k);
  }
  for (int32_t i = 0; i < d.num_inputs; ++i)
    if (of_input[i] == -1)
      return absl::InvalidArgumentError(absl::StrCat(
          "step input '", d.inputs[i].name, "' ", DtypeName(d.inputs[i].dtype),
          " ", ShapeString(d.inputs[i]), " has no array in ", flag, " (add ",
          d.inputs[i].name, "=FILE.npy)"));

  // Shapes: (N, per-sample) against [B, per-sample].
  for (int32_t i = 0; i < d.num_inputs; ++i) {
    const StoredArray &s = stored[of_input[i]];
    const tcc_tensor_desc &t = d.inputs[i];
    if (s.shape.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          s.source, ": array '", s.name,
          "' is a scalar; arrays hold one row per sample (samples, ...)"));
    std::vector<int64_t> per_sample(s.shape.begin() + 1, s.shape.end());
    std::vector<int64_t> wanted(t.shape + 1, t.shape + t.rank);
    if (WithoutOnes(per_sample) != WithoutOnes(wanted))
      return absl::InvalidArgumentError(absl::StrCat(
          s.source, ": array '", s.name, "' ", ArrayTypeName(s.type), " ",
          TupleText(s.shape), " has samples shaped ", TupleText(per_sample),
          "; step input '", t.name, "' ", DtypeName(t.dtype), " ",
          ShapeString(t), " takes ", TupleText(wanted), " per sample"));
  }
  const StoredArray &first = stored[of_input[0]];
  for (int32_t i = 1; i < d.num_inputs; ++i) {
    const StoredArray &s = stored[of_input[i]];
    if (s.shape[0] != first.shape[0])
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": sample counts differ: '", first.name, "' (", first.source,
          ") has ", first.shape[0], ", '", s.name, "' (", s.source, ") has ",
          s.shape[0]));
  }
  if (first.shape[0] == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(first.source, ": array '", first.name, "' has no samples"));

  NamedArrays arrays;
  arrays.count_ = first.shape[0];
  for (int32_t i = 0; i < d.num_inputs; ++i) {
    StoredArray &s = stored[of_input[i]];
    const tcc_tensor_desc &t = d.inputs[i];
    Array array;
    array.input = i;
    array.source = s.source;
    array.stored = absl::StrCat(ArrayTypeName(s.type), " ", TupleText(s.shape));
    array.sample_bytes = t.size_bytes / t.shape[0];
    if (absl::Status status = Convert(s, t, array); !status.ok())
      return status;
    if (i == binding.target_input)
      if (absl::Status status =
              CheckLabels(array, s, t.dtype, binding.num_classes);
          !status.ok())
        return status;
    arrays.arrays_.push_back(std::move(array));
  }
  return arrays;
}

void NamedArrays::CopySample(int64_t sample, int64_t row,
                             HostBatch &batch) const {
  for (const Array &array : arrays_)
    std::memcpy(batch.arrays[array.input].as<uint8_t>() +
                    row * array.sample_bytes,
                array.data.data() + sample * array.sample_bytes,
                static_cast<size_t>(array.sample_bytes));
}

SampleCopier NamedArrays::copier() const {
  return [this](int64_t sample, int64_t row, HostBatch &batch) {
    CopySample(sample, row, batch);
  };
}

std::string NamedArrays::BindingLines(const tcc_step_descriptor &d,
                                      const StepBinding &binding,
                                      absl::string_view prefix) const {
  std::string lines;
  for (const Array &array : arrays_) {
    const tcc_tensor_desc &t = d.inputs[array.input];
    absl::StrAppend(&lines, prefix, " '", t.name, "' ", DtypeName(t.dtype), " ",
                    ShapeString(t), " <- ", array.source, " (", array.stored,
                    array.converted
                        ? absl::StrCat(", converted to ", DtypeName(t.dtype))
                        : std::string(", as stored"),
                    "), ", count_, " samples",
                    array.input == binding.target_input
                        ? " (the labels of the accuracy)"
                        : "",
                    "\n");
  }
  return lines;
}

} // namespace tcc::trun
