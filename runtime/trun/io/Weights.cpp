#include "runtime/trun/io/Weights.h"

#include "runtime/initializers/Dtypes.h"
#include "runtime/trun/io/Safetensors.h"
#include "runtime/trun/step/StepDescriptor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <cmath>

namespace tcc::trun {
namespace {

std::string ShapeText(const std::vector<int64_t> &shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::vector<int64_t> ShapeOf(const tcc_tensor_desc &t) {
  return t.shape ? std::vector<int64_t>(t.shape, t.shape + t.rank) : std::vector<int64_t>();
}

// IEEE half and bfloat16 bits to float (exact).
float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
  if (exponent == 0x1f) { // inf, NaN
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { // subnormal: normalize
    int shift = 0;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float Bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Element `i` of a float tensor of safetensors dtype `tag`.
double ReadFloat(const std::string &tag, const uint8_t *data, int64_t i) {
  if (tag == "F64") {
    double v;
    std::memcpy(&v, data + i * 8, 8);
    return v;
  }
  if (tag == "F32") {
    float v;
    std::memcpy(&v, data + i * 4, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, data + i * 2, 2);
  return tag == "F16" ? HalfToFloat(h) : Bf16ToFloat(h);
}

bool IsFloatTag(const std::string &tag) {
  return tag == "F64" || tag == "F32" || tag == "F16" || tag == "BF16";
}

// One parameter's place in the file: the tensor found, and how to read it.
struct Source {
  const SafetensorsFile::Tensor *tensor = nullptr;
  std::vector<int64_t> shape;  // as the file holds it
  std::vector<int32_t> inverse; // file layout -> tcc's; empty: the same
  bool convert = false;         // another float dtype than the parameter's
};

// The keys, shape and permutation a parameter has in a file of `layout`.
struct Expected {
  TorchTensor keys;
  std::vector<int64_t> shape;
};

Expected ExpectedOf(const tcc_step_descriptor &d, int32_t i, bool torch_layout) {
  if (!torch_layout)
    return {TorchTensor{d.params[i].name, {}, {}}, ShapeOf(d.params[i])};
  return {TorchTensorOf(d, i), TorchShapeOf(d, i)};
}

// What the file's metadata says about its layout: trun's own files name it
// ("layout": "torch"); a file trun wrote before layouts ("producer": "trun"
// without "layout", as checkpoints) is tcc's; anything else (PyTorch's
// {"format": "pt"}, no metadata) is a state_dict, PyTorch's.
absl::StatusOr<bool> IsTorchLayout(const SafetensorsFile &file) {
  const std::map<std::string, std::string> &m = file.metadata();
  auto layout = m.find("layout");
  if (layout != m.end()) {
    if (layout->second == "torch" || layout->second == "tcc")
      return layout->second == "torch";
    return absl::InvalidArgumentError(absl::StrCat(
        file.path(), ": metadata \"layout\" is '", layout->second,
        "'; trun reads \"torch\" (PyTorch's names and layouts) or \"tcc\""));
  }
  auto producer = m.find("producer");
  return producer == m.end() || producer->second != "trun";
}

// "f32 [256, 784], PyTorch's layout of tcc's [784, 256]" (or just the
// dtype and shape when the layouts agree).
std::string Needs(const tcc_tensor_desc &p, const Expected &e) {
  std::string text = absl::StrCat(DtypeName(p.dtype), " ", ShapeText(e.shape));
  if (!e.keys.perm.empty())
    absl::StrAppend(&text, ", PyTorch's layout of tcc's ", ShapeText(ShapeOf(p)));
  return text;
}

} // namespace

void PermuteCopy(const void *src, const std::vector<int64_t> &shape,
                 const std::vector<int32_t> &perm, int64_t element_bytes, void *dst) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  if (count == 0)
    return;
  const auto *in = static_cast<const uint8_t *>(src);
  auto *out = static_cast<uint8_t *>(dst);
  if (perm.empty()) {
    std::memcpy(out, in, static_cast<size_t>(count * element_bytes));
    return;
  }
  const size_t rank = shape.size();
  std::vector<int64_t> src_stride(rank, element_bytes);
  for (size_t k = rank - 1; k > 0; --k)
    src_stride[k - 1] = src_stride[k] * shape[k];
  // dst dimension k walks src dimension perm[k]: an odometer over dst.
  std::vector<int64_t> size(rank), step(rank), index(rank, 0);
  for (size_t k = 0; k < rank; ++k) {
    size[k] = shape[perm[k]];
    step[k] = src_stride[perm[k]];
  }
  int64_t offset = 0;
  for (int64_t n = 0; n < count; ++n) {
    std::memcpy(out + n * element_bytes, in + offset, static_cast<size_t>(element_bytes));
    for (size_t k = rank; k-- > 0;) {
      offset += step[k];
      if (++index[k] < size[k])
        break;
      offset -= step[k] * size[k];
      index[k] = 0;
    }
  }
}

absl::Status SaveWeights(const std::string &path, const tcc_step_descriptor &d,
                         const std::vector<const void *> &params) {
  std::vector<TensorToWrite> tensors;
  std::vector<std::unique_ptr<uint8_t[]>> permuted; // alive until written
  for (int32_t i = 0; i < d.num_params; ++i) {
    const tcc_tensor_desc &p = d.params[i];
    TorchTensor torch = TorchTensorOf(d, i);
    const void *data = params[i];
    if (!torch.perm.empty()) {
      permuted.emplace_back(new uint8_t[static_cast<size_t>(p.size_bytes)]);
      PermuteCopy(params[i], ShapeOf(p), torch.perm, DtypeSize(p.dtype), permuted.back().get());
      data = permuted.back().get();
    }
    std::vector<int64_t> shape = TorchShapeOf(d, i);
    tensors.push_back({torch.name, p.dtype, shape, data, p.size_bytes});
    // Tied weights: load_state_dict(strict=True) wants every key.
    for (const std::string &alias : torch.aliases)
      tensors.push_back({alias, p.dtype, shape, data, p.size_bytes});
  }
  return WriteSafetensors(path, tensors,
                          {{"format", "pt"},
                           {"layout", "torch"},
                           {"model", d.model_name},
                           {"producer", "trun"}});
}

absl::Status LoadWeights(const std::string &path, const tcc_step_descriptor &d,
                         const std::vector<void *> &params, const LoadWeightsOptions &options,
                         LoadedWeights *loaded) {
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  if (!file.ok())
    return file.status();
  absl::StatusOr<bool> torch_layout = IsTorchLayout(*file);
  if (!torch_layout.ok())
    return torch_layout.status();
  auto mismatch = [&](absl::string_view what) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", what));
  };
  std::string step = absl::StrCat("step '", d.model_name, "'");
  const std::map<std::string, SafetensorsFile::Tensor> &in_file = file->tensors();
  LoadedWeights report;
  report.torch_layout = *torch_layout;
  std::set<std::string> used;
  // Check everything before copying anything.
  std::vector<Source> sources(d.num_params);
  for (int32_t i = 0; i < d.num_params; ++i) {
    const tcc_tensor_desc &p = d.params[i];
    Expected e = ExpectedOf(d, i, *torch_layout);
    std::string param = absl::StrCat("parameter '", p.name, "' of ", step);
    // The key, else the first alias present; every other present one must
    // hold the same tensor.
    std::vector<std::string> keys = {e.keys.name};
    keys.insert(keys.end(), e.keys.aliases.begin(), e.keys.aliases.end());
    std::string found_key;
    for (const std::string &key : keys) {
      auto found = in_file.find(key);
      if (found == in_file.end())
        continue;
      used.insert(key);
      const SafetensorsFile::Tensor &t = found->second;
      if (!sources[i].tensor) {
        sources[i].tensor = &t;
        found_key = key;
        continue;
      }
      const SafetensorsFile::Tensor &first = *sources[i].tensor;
      if (t.dtype != first.dtype || t.shape != first.shape ||
          (t.size_bytes > 0 &&
           std::memcmp(t.data, first.data, static_cast<size_t>(t.size_bytes)) != 0))
        return mismatch(absl::StrCat("tensors '", found_key, "' and '", key,
                                     "' differ, but both hold ", param,
                                     " (tied weights must be equal)"));
    }
    if (!sources[i].tensor) {
      std::string aliases =
          e.keys.aliases.empty()
              ? ""
              : absl::StrCat(", nor its alias", e.keys.aliases.size() > 1 ? "es '" : " '",
                             absl::StrJoin(e.keys.aliases, "', '"), "'");
      return mismatch(absl::StrCat("missing tensor '", e.keys.name, "' (", param, ": ",
                                   Needs(p, e), aliases, ")",
                                   *torch_layout ? ""
                                                 : "; the file has tcc's names and layout "
                                                   "(written by trun without \"layout\")"));
    }
    const SafetensorsFile::Tensor &t = *sources[i].tensor;
    bool float_param = p.dtype == TCC_DTYPE_F32 || p.dtype == TCC_DTYPE_F64;
    if (t.dtype != SafetensorsDtypeName(p.dtype) && !(float_param && IsFloatTag(t.dtype)))
      return mismatch(absl::StrCat(
          "tensor '", found_key, "' is ", t.dtype, " but ", param, " is ", DtypeName(p.dtype),
          float_param ? " (trun reads F32, F64, F16 or BF16 into it)" : ""));
    if (t.shape != e.shape)
      return mismatch(absl::StrCat("tensor '", found_key, "' has shape ", ShapeText(t.shape),
                                   " but ", param, " needs ", Needs(p, e)));
    // Non-finite weights are refused, as named arrays refuse them: a NaN
    // would train (and every loss after it be NaN) without a word.
    if (IsFloatTag(t.dtype)) {
      int64_t n = 1;
      for (int64_t d : t.shape)
        n *= d; // the file's checks bound it by its size
      for (int64_t k = 0; k < n; ++k)
        if (!std::isfinite(ReadFloat(t.dtype, t.data, k)))
          return mismatch(absl::StrCat("tensor '", found_key, "' holds ",
                                       std::isnan(ReadFloat(t.dtype, t.data, k)) ? "NaN"
                                                                                 : "an infinity",
                                       " at element ", k, " (", param,
                                       "): trun does not start from non-finite weights"));
    }
    sources[i].shape = e.shape;
    sources[i].convert = t.dtype != SafetensorsDtypeName(p.dtype);
    // The file holds tcc.permute(perm); tcc's dimension perm[k] is its k.
    if (!e.keys.perm.empty()) {
      sources[i].inverse.resize(e.keys.perm.size());
      for (size_t k = 0; k < e.keys.perm.size(); ++k)
        sources[i].inverse[e.keys.perm[k]] = static_cast<int32_t>(k);
    }
    report.permuted += !e.keys.perm.empty();
    report.from_alias += found_key != e.keys.name;
    report.converted += sources[i].convert;
  }
  for (const auto &[name, tensor] : in_file) {
    if (used.count(name))
      continue;
    if (!options.ignore_extra)
      return mismatch(absl::StrCat(
          "tensor '", name, "' is not a parameter of ", step,
          *torch_layout ? " (nor a PyTorch name or alias of one)" : "",
          "; remove it, or pass --init-from-ignore-extra to skip tensors the step "
          "does not have"));
    report.ignored.push_back(name);
  }
  for (int32_t i = 0; i < d.num_params; ++i) {
    const Source &s = sources[i];
    const tcc_tensor_desc &p = d.params[i];
    const void *data = s.tensor->data;
    std::vector<uint8_t> converted;
    if (s.convert) {
      converted.resize(static_cast<size_t>(p.size_bytes));
      for (int64_t n = 0; n < p.num_elements; ++n) {
        double v = ReadFloat(s.tensor->dtype, s.tensor->data, n);
        if (p.dtype == TCC_DTYPE_F32) {
          float f = static_cast<float>(v);
          std::memcpy(converted.data() + n * 4, &f, 4);
        } else {
          std::memcpy(converted.data() + n * 8, &v, 8);
        }
      }
      data = converted.data();
    }
    PermuteCopy(data, s.shape, s.inverse, DtypeSize(p.dtype), params[i]);
  }
  if (loaded) {
    report.checksummed = file->has_data_checksum();
    *loaded = std::move(report);
  }
  return absl::OkStatus();
}

} // namespace tcc::trun
