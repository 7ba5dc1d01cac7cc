#include "runtime/trun/checkpoint/CheckpointState.h"

#include "runtime/initializers/Dtypes.h"
#include "runtime/initializers/Initializers.h"
#include "runtime/trun/io/MappedFile.h"
#include "tcc/counter_rng.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <limits>
#include <utility>

namespace tcc::trun::checkpoint {
namespace {

using Json = nlohmann::json;

constexpr char kFormat[] = "tcc-checkpoint";
constexpr int64_t kVersion = 1;
// state.json holds a few lines per tensor; anything this large is not ours.
constexpr size_t kMaxStateBytes = 64u << 20;

std::string IsoTimeNow() {
  std::time_t now = std::time(nullptr);
  std::tm utc;
  char text[32];
  if (!::gmtime_r(&now, &utc) ||
      std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc) == 0)
    return "";
  return text;
}

// Names in the fingerprint text: quoted, with every byte outside printable
// ASCII escaped, so the text is unambiguous and valid JSON.
std::string Quote(const char *name) {
  std::string out = "\"";
  for (const char *p = OrEmpty(name); *p; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\')
      absl::StrAppend(&out, "\\", std::string(1, static_cast<char>(c)));
    else if (c < 0x20 || c >= 0x7f)
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
    else
      out.push_back(static_cast<char>(c));
  }
  return out + "\"";
}

nlohmann::ordered_json SpecsJson(int32_t n, const tcc_tensor_desc *list) {
  nlohmann::ordered_json specs = nlohmann::ordered_json::array();
  for (int32_t i = 0; i < n; ++i)
    specs.push_back({{"name", OrEmpty(list[i].name)},
                     {"dtype", DtypeName(list[i].dtype)},
                     {"shape", ShapeOf(list[i])}});
  return specs;
}

// Typed access to state.json fields; errors say which field is wrong.
class Fields {
public:
  explicit Fields(const Json &object, std::string where = "state.json")
      : object_(object), where_(std::move(where)) {}

  absl::Status Int(const char *key, int64_t &out, int64_t min = 0,
                   int64_t max = std::numeric_limits<int64_t>::max()) const {
    const Json *v = Find(key);
    if (!v || !v->is_number_integer() ||
        (v->is_number_unsigned() &&
         v->get<uint64_t>() > static_cast<uint64_t>(max)) ||
        (!v->is_number_unsigned() &&
         (v->get<int64_t>() < min || v->get<int64_t>() > max)))
      return Bad(key, absl::StrCat("an integer in [", min, ", ", max, "]"));
    out = v->get<int64_t>();
    return absl::OkStatus();
  }
  absl::Status Double(const char *key, double &out) const {
    const Json *v = Find(key);
    if (!v || !v->is_number())
      return Bad(key, "a number");
    out = v->get<double>();
    return absl::OkStatus();
  }
  absl::Status String(const char *key, std::string &out) const {
    const Json *v = Find(key);
    if (!v || !v->is_string())
      return Bad(key, "a string");
    out = v->get<std::string>();
    return absl::OkStatus();
  }
  absl::Status Strings(const char *key, std::vector<std::string> &out) const {
    const Json *v = Find(key);
    if (!v || !v->is_array())
      return Bad(key, "a list of strings");
    for (const Json &s : *v) {
      if (!s.is_string())
        return Bad(key, "a list of strings");
      out.push_back(s.get<std::string>());
    }
    return absl::OkStatus();
  }
  absl::Status Specs(const char *key, std::vector<TensorSpec> &out) const {
    const Json *v = Find(key);
    if (!v || !v->is_array())
      return Bad(key, "a list of tensor specs");
    for (size_t i = 0; i < v->size(); ++i) {
      const Json &entry = (*v)[i];
      TensorSpec spec;
      std::string where = absl::StrCat(where_, " ", key, "[", i, "]");
      if (!entry.is_object())
        return absl::DataLossError(absl::StrCat(where, " is not an object"));
      Fields fields(entry, where);
      if (absl::Status s = fields.String("name", spec.name); !s.ok())
        return s;
      if (absl::Status s = fields.String("dtype", spec.dtype); !s.ok())
        return s;
      if (DtypeFromName(spec.dtype) == TCC_DTYPE_INVALID)
        return absl::DataLossError(
            absl::StrCat(where, " has unknown dtype '", spec.dtype, "'"));
      const Json *shape = entry.contains("shape") ? &entry["shape"] : nullptr;
      if (!shape || !shape->is_array())
        return fields.Bad("shape", "a list of non-negative integers");
      for (const Json &d : *shape) {
        if (!d.is_number_unsigned() ||
            d.get<uint64_t>() >
                static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          return fields.Bad("shape", "a list of non-negative integers");
        spec.shape.push_back(d.get<int64_t>());
      }
      out.push_back(std::move(spec));
    }
    return absl::OkStatus();
  }
  absl::Status File(const char *name, FileChecksum &out) const {
    const Json *files = Find("files");
    if (!files || !files->is_object() || !files->contains(name) ||
        !(*files)[name].is_object())
      return absl::DataLossError(
          absl::StrCat(where_, " has no entry for ", name, " in 'files'"));
    Fields fields((*files)[name], absl::StrCat(where_, " files.", name));
    int64_t crc = 0;
    if (absl::Status s = fields.Int("bytes", out.bytes); !s.ok())
      return s;
    if (absl::Status s = fields.Int("crc32", crc, 0, 0xffffffffll); !s.ok())
      return s;
    out.crc32 = static_cast<uint32_t>(crc);
    return absl::OkStatus();
  }

  absl::Status Bad(const char *key, absl::string_view type) const {
    return absl::DataLossError(
        absl::StrCat(where_, " field '", key, "' is missing or not ", type));
  }

private:
  const Json *Find(const char *key) const {
    auto found = object_.find(key);
    return found == object_.end() ? nullptr : &*found;
  }

  const Json &object_;
  std::string where_;
};

} // namespace

std::string SpecText(const std::string &dtype,
                     const std::vector<int64_t> &shape) {
  return absl::StrCat(dtype, "[", absl::StrJoin(shape, ","), "]");
}

std::vector<int64_t> ShapeOf(const tcc_tensor_desc &t) {
  return t.shape ? std::vector<int64_t>(t.shape, t.shape + t.rank)
                 : std::vector<int64_t>();
}

std::string SpecText(const tcc_tensor_desc &t) {
  return SpecText(DtypeName(t.dtype), ShapeOf(t));
}

// The canonical text the fingerprint hashes, one line per field or tensor
// (descriptor order). state.json records it, so a mismatch can be named.
std::vector<std::string> InterfaceLines(const tcc_step_descriptor &d, int world_size) {
  std::vector<std::string> lines;
  lines.push_back(absl::StrCat("abi_version ", d.abi_version));
  lines.push_back(absl::StrCat("model ", Quote(d.model_name)));
  lines.push_back(absl::StrCat("optimizer ", Quote(d.optimizer)));
  const tcc_lr_schedule &s = d.lr_schedule;
  lines.push_back(absl::StrFormat("lr_schedule kind=%d base_lr=%.17g "
                                  "warmup_steps=%d decay_steps=%d "
                                  "min_lr=%.17g",
                                  s.kind, s.base_lr, s.warmup_steps,
                                  s.decay_steps, s.min_lr));
  lines.push_back(absl::StrCat("micro_batches ", d.micro_batches));
  auto add = [&lines, world_size](const char *kind, int32_t n, const tcc_tensor_desc *list,
                                  bool with_init, bool batched = false) {
    for (int32_t i = 0; list && i < n; ++i) {
      const tcc_tensor_desc &t = list[i];
      std::vector<int64_t> shape(t.shape, t.shape + t.rank);
      if (batched && world_size > 1 && !shape.empty())
        shape[0] *= world_size; // the global batch
      std::string line =
          absl::StrCat(kind, " ", Quote(t.name), " ", SpecText(DtypeName(t.dtype), shape));
      if (with_init)
        absl::StrAppend(&line, " init=", InitKindName(t.init_kind),
                        absl::StrFormat(" scale=%.17g", t.init_scale),
                        " seed=", t.init_seed, " trainable=", t.trainable);
      lines.push_back(std::move(line));
    }
  };
  add("param", d.num_params, d.params, true);
  add("optimizer_state", d.num_optimizer_state, d.optimizer_state, true);
  add("input", d.num_inputs, d.inputs, false, /*batched=*/true);
  add("output", d.num_outputs, d.outputs, false, /*batched=*/true);
  add("train_output", d.num_train_outputs, d.train_outputs, false);
  return lines;
}

// 64-bit FNV-1a: stable across builds and platforms (std::hash is not).
std::string Fingerprint(const std::vector<std::string> &lines) {
  std::string text;
  for (const std::string &line : lines)
    absl::StrAppend(&text, line, "\n");
  return absl::StrFormat("%016x", tcc_fnv1a64(text.data(), text.size()));
}

absl::Status ReadState(const std::string &path, int64_t step,
                       RecordedState &c) {
  std::string file = absl::StrCat(path, "/", kStateFile);
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(file);
  if (!mapped.ok())
    return mapped.status();
  if (mapped->size() > kMaxStateBytes)
    return absl::DataLossError(
        absl::StrCat(kStateFile, " is ", mapped->size(), " bytes (corrupt)"));
  absl::string_view text(reinterpret_cast<const char *>(mapped->data()),
                         mapped->size());
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object())
    return absl::DataLossError(
        absl::StrCat(kStateFile, " is not a JSON object (", mapped->size(),
                     " bytes; corrupt or truncated)"));
  Fields fields(json);
  std::string format, seed, written_at;
  int64_t version = 0;
  if (absl::Status s = fields.String("format", format); !s.ok())
    return s;
  if (format != kFormat)
    return absl::DataLossError(absl::StrCat(kStateFile, " has format '", format,
                                            "', not '", kFormat, "'"));
  if (absl::Status s = fields.Int("version", version); !s.ok())
    return s;
  if (version != kVersion)
    return absl::DataLossError(
        absl::StrCat(kStateFile, " has version ", version,
                     "; this trun reads version ", kVersion));
  TrainState &st = c.state;
  for (absl::Status s :
       {fields.Int("step", st.step), fields.Int("data_cursor", st.data_cursor),
        fields.String("seed", seed), fields.String("data_order", st.data_order),
        fields.Double("base_learning_rate", st.base_learning_rate),
        fields.Int("total_steps", st.total_steps),
        fields.String("data", st.data), fields.String("model", c.model),
        fields.String("optimizer", c.optimizer),
        fields.String("fingerprint", c.fingerprint),
        fields.Strings("interface", c.interface),
        fields.Specs("params", c.params),
        fields.Specs("optimizer_state", c.optimizer_state),
        fields.File(kModelFile, c.files[kModelFile]),
        fields.File(kOptimizerFile, c.files[kOptimizerFile]),
        fields.String("written_at", written_at)})
    if (!s.ok())
      return s;
  auto [end, error] =
      std::from_chars(seed.data(), seed.data() + seed.size(), st.seed);
  if (seed.empty() || error != std::errc() || end != seed.data() + seed.size())
    return absl::DataLossError(absl::StrCat(
        kStateFile, " field 'seed' is not a decimal uint64: '", seed, "'"));
  if (st.step != step)
    return absl::DataLossError(
        absl::StrCat(kStateFile, " is for step ", st.step, ", not ", step));
  if (Fingerprint(c.interface) != c.fingerprint)
    return absl::DataLossError(absl::StrCat(
        kStateFile, " fingerprint ", c.fingerprint,
        " does not match its own 'interface' lines (edited or corrupt)"));
  return absl::OkStatus();
}

std::string EncodeState(const tcc_step_descriptor &d, int world_size, const TrainState &state,
                        const FileChecksum &model,
                        const FileChecksum &optimizer) {
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  files[kModelFile] = {{"bytes", model.bytes}, {"crc32", model.crc32}};
  files[kOptimizerFile] = {{"bytes", optimizer.bytes},
                           {"crc32", optimizer.crc32}};
  std::vector<std::string> lines = InterfaceLines(d, world_size);
  nlohmann::ordered_json json = {
      {"format", kFormat},
      {"version", kVersion},
      {"step", state.step},
      {"data_cursor", state.data_cursor},
      {"seed", absl::StrCat(state.seed)}, // a double cannot hold every uint64
      {"data_order", state.data_order},
      {"base_learning_rate", state.base_learning_rate},
      {"total_steps", state.total_steps},
      {"data", state.data},
      {"model", OrEmpty(d.model_name)},
      {"optimizer", OrEmpty(d.optimizer)},
      {"fingerprint", Fingerprint(lines)},
      {"interface", lines},
      {"params", SpecsJson(d.num_params, d.params)},
      {"optimizer_state", SpecsJson(d.num_optimizer_state, d.optimizer_state)},
      {"files", files},
      {"written_at", IsoTimeNow()}};
  // replace: a --data path that is not UTF-8 must not abort the write.
  return json.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

} // namespace tcc::trun::checkpoint
