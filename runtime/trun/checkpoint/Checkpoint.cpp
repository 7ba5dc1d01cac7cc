#include "runtime/trun/checkpoint/Checkpoint.h"

#include "runtime/trun/io/AtomicFile.h"
#include "runtime/trun/io/MappedFile.h"
#include "runtime/trun/io/Safetensors.h"
#include "runtime/trun/step/StepDescriptor.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h> // renameat2
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>

namespace tcc::trun {
namespace {

using Json = nlohmann::json;

constexpr char kFormat[] = "tcc-checkpoint";
constexpr int64_t kVersion = 1;
constexpr char kModelFile[] = "model.safetensors";
constexpr char kOptimizerFile[] = "optimizer.safetensors";
constexpr char kStateFile[] = "state.json";
constexpr char kLockFile[] = ".lock";
constexpr char kTempPrefix[] = ".tmp-";
// state.json holds a few lines per tensor; anything this large is not ours.
constexpr size_t kMaxStateBytes = 64u << 20;

const char *Str(const char *s) { return s ? s : ""; }

std::string StepDirName(int64_t step) {
  return absl::StrFormat("step_%09d", step);
}

// The step of a step_%09d directory name; nullopt for any other name, so
// unrelated entries (and non-canonical spellings like step_10) are ignored.
std::optional<int64_t> ParseStepDirName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "step_") || name.empty())
    return std::nullopt;
  int64_t step = 0;
  auto [end, error] =
      std::from_chars(name.data(), name.data() + name.size(), step);
  if (error != std::errc() || end != name.data() + name.size() || step < 0 ||
      StepDirName(step) != absl::StrCat("step_", name))
    return std::nullopt;
  return step;
}

// The writer's pid of a ".tmp-...-<pid>" name; nullopt for other names.
std::optional<pid_t> ParseTempPid(absl::string_view name) {
  if (!absl::StartsWith(name, kTempPrefix))
    return std::nullopt;
  size_t dash = name.rfind('-');
  absl::string_view digits = name.substr(dash + 1);
  int64_t pid = 0;
  auto [end, error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (digits.empty() || error != std::errc() ||
      end != digits.data() + digits.size() || pid <= 0 ||
      pid > std::numeric_limits<pid_t>::max())
    return std::nullopt;
  return static_cast<pid_t>(pid);
}

// Complete checkpoints of `dir` as (step, path), oldest first.
std::vector<std::pair<int64_t, std::string>> ListSteps(const std::string &dir) {
  std::vector<std::pair<int64_t, std::string>> steps;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return steps;
  while (const dirent *entry = ::readdir(d)) {
    std::optional<int64_t> step = ParseStepDirName(entry->d_name);
    if (!step)
      continue;
    std::string path = absl::StrCat(dir, "/", entry->d_name);
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      steps.emplace_back(*step, std::move(path));
  }
  ::closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::Status SyncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", dir));
  int error = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  if (error != 0)
    return absl::ErrnoToStatus(error, absl::StrCat("cannot sync ", dir));
  return absl::OkStatus();
}

// Renames `path` to a temporary name first, so an interrupted removal never
// leaves a half-deleted step_* directory that looks like a checkpoint.
void RemoveCheckpoint(const std::string &dir, const std::string &path) {
  std::string name = path.substr(path.rfind('/') + 1);
  std::string doomed =
      absl::StrCat(dir, "/", kTempPrefix, "old-", name, "-", ::getpid());
  std::error_code ignored;
  if (std::rename(path.c_str(), doomed.c_str()) == 0)
    std::filesystem::remove_all(doomed, ignored);
}

// mkdir -p, naming the component at fault.
absl::Status MakeDirectories(const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint directory ", dir, " is not a directory (it is ",
        S_ISREG(st.st_mode) ? "a regular file" : "a special file", ")"));
  }
  std::string what = absl::StrCat("cannot create checkpoint directory ", dir);
  size_t slash = 0;
  while (true) {
    slash = dir.find('/', slash + 1);
    std::string prefix = dir.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0) {
      int error = errno;
      if (error != EEXIST)
        return absl::ErrnoToStatus(
            error, absl::StrCat(what, ": cannot create ", prefix));
      if (::stat(prefix.c_str(), &st) != 0)
        return absl::ErrnoToStatus(errno, absl::StrCat(what, ": ", prefix));
      if (!S_ISDIR(st.st_mode))
        return absl::FailedPreconditionError(
            absl::StrCat(what, ": ", prefix, " is not a directory"));
    }
    if (slash == std::string::npos)
      return absl::OkStatus();
  }
}

// Reads the pid the lock holder wrote into the lock file.
std::string LockHolder(int fd) {
  char text[32] = {};
  ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  int64_t pid = 0;
  if (n > 0) {
    const char *end = text + n;
    while (end > text && (end[-1] == '\n' || end[-1] == ' '))
      --end;
    auto [stop, error] = std::from_chars(text, end, pid);
    if (error == std::errc() && stop == end && pid > 0)
      return absl::StrCat("pid ", pid);
  }
  return "pid unknown";
}

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
  for (const char *p = Str(name); *p; ++p) {
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

std::string InitName(int32_t kind) {
  switch (kind) {
  case TCC_INIT_ZEROS:
    return "zeros";
  case TCC_INIT_ONES:
    return "ones";
  case TCC_INIT_NORMAL:
    return "normal";
  case TCC_INIT_UNIFORM:
    return "uniform";
  default:
    return absl::StrCat("init(", kind, ")");
  }
}

// The canonical text the fingerprint hashes, one line per field or tensor
// (descriptor order). state.json records it, so a mismatch can be named.
std::vector<std::string> InterfaceLines(const tcc_step_descriptor &d) {
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
  auto add = [&lines](const char *kind, int32_t n, const tcc_tensor_desc *list,
                      bool with_init) {
    for (int32_t i = 0; list && i < n; ++i) {
      const tcc_tensor_desc &t = list[i];
      std::string line =
          absl::StrCat(kind, " ", Quote(t.name), " ", SpecText(t));
      if (with_init)
        absl::StrAppend(&line, " init=", InitName(t.init_kind),
                        absl::StrFormat(" scale=%.17g", t.init_scale),
                        " seed=", t.init_seed, " trainable=", t.trainable);
      lines.push_back(std::move(line));
    }
  };
  add("param", d.num_params, d.params, true);
  add("optimizer_state", d.num_optimizer_state, d.optimizer_state, true);
  add("input", d.num_inputs, d.inputs, false);
  add("output", d.num_outputs, d.outputs, false);
  add("train_output", d.num_train_outputs, d.train_outputs, false);
  return lines;
}

// 64-bit FNV-1a: stable across builds and platforms (std::hash is not).
std::string Fingerprint(const std::vector<std::string> &lines) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const std::string &line : lines)
    for (char c : line + "\n") {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ull;
    }
  return absl::StrFormat("%016x", hash);
}

struct FileSummary {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};

uint32_t Crc32(const uint8_t *data, size_t size) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  while (size > 0) { // crc32() takes a uInt length
    uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = ::crc32(crc, data, n);
    data += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

absl::StatusOr<FileSummary> Summarize(const std::string &path) {
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  if (!file.ok())
    return file.status();
  return FileSummary{static_cast<int64_t>(file->size()),
                     Crc32(file->data(), file->size())};
}

// The dtype code of a tcc dtype name ("f32"); 0 if unknown.
int32_t DtypeFromName(const std::string &name) {
  for (int32_t dtype :
       {TCC_DTYPE_F32, TCC_DTYPE_F64, TCC_DTYPE_I32, TCC_DTYPE_I64,
        TCC_DTYPE_U8, TCC_DTYPE_BF16, TCC_DTYPE_F16})
    if (DtypeName(dtype) == name)
      return dtype;
  return TCC_DTYPE_INVALID;
}

// A tensor spec as state.json records it.
struct TensorSpec {
  std::string name;
  std::string dtype; // tcc name, "f32"
  std::vector<int64_t> shape;
};

nlohmann::ordered_json SpecsJson(int32_t n, const tcc_tensor_desc *list) {
  nlohmann::ordered_json specs = nlohmann::ordered_json::array();
  for (int32_t i = 0; i < n; ++i)
    specs.push_back({{"name", Str(list[i].name)},
                     {"dtype", DtypeName(list[i].dtype)},
                     {"shape", ShapeOf(list[i])}});
  return specs;
}

std::vector<TensorToWrite>
TensorsToWrite(int32_t n, const tcc_tensor_desc *list,
               const std::vector<const void *> &data) {
  std::vector<TensorToWrite> tensors;
  for (int32_t i = 0; i < n; ++i)
    tensors.push_back(TensorToWriteOf(list[i], data[i]));
  return tensors;
}

// Everything read from one checkpoint directory before anything is copied.
struct Candidate {
  TrainState state;
  std::string model, optimizer, fingerprint;
  std::vector<std::string> interface;
  std::vector<TensorSpec> params, optimizer_state;
  std::map<std::string, FileSummary> files;
  SafetensorsFile model_file, optimizer_file;
};

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
  absl::Status File(const char *name, FileSummary &out) const {
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

// Reads and checks state.json of the checkpoint at `path` (step `step`).
absl::Status ReadState(const std::string &path, int64_t step, Candidate &c) {
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

// Checks a data file's size and CRC32 against state.json, then opens it as
// safetensors holding exactly `specs`.
absl::StatusOr<SafetensorsFile>
ReadTensors(const std::string &path, const char *name,
            const FileSummary &recorded, const std::vector<TensorSpec> &specs) {
  std::string file = absl::StrCat(path, "/", name);
  absl::StatusOr<FileSummary> actual = Summarize(file);
  if (!actual.ok())
    return actual.status();
  if (actual->bytes != recorded.bytes)
    return absl::DataLossError(
        absl::StrCat(name, " has ", actual->bytes, " bytes, ", kStateFile,
                     " recorded ", recorded.bytes, " (truncated or replaced)"));
  if (actual->crc32 != recorded.crc32)
    return absl::DataLossError(
        absl::StrFormat("%s has CRC32 %08x, %s recorded %08x (corrupt)", name,
                        actual->crc32, kStateFile, recorded.crc32));
  absl::StatusOr<SafetensorsFile> tensors = SafetensorsFile::Open(file);
  if (!tensors.ok())
    return tensors.status();
  if (tensors->tensors().size() != specs.size())
    return absl::DataLossError(
        absl::StrCat(name, " has ", tensors->tensors().size(), " tensors, ",
                     kStateFile, " recorded ", specs.size()));
  for (const TensorSpec &spec : specs) {
    auto found = tensors->tensors().find(spec.name);
    if (found == tensors->tensors().end())
      return absl::DataLossError(
          absl::StrCat(name, " has no tensor '", spec.name, "'"));
    const SafetensorsFile::Tensor &t = found->second;
    if (t.dtype != SafetensorsDtypeName(DtypeFromName(spec.dtype)) ||
        t.shape != spec.shape)
      return absl::DataLossError(
          absl::StrCat(name, " tensor '", spec.name, "' is ", t.dtype, " ",
                       SpecText("", t.shape), ", ", kStateFile, " recorded ",
                       SpecText(spec.dtype, spec.shape)));
  }
  return tensors;
}

// The first difference between recorded tensor specs and the step's.
std::optional<std::string>
TensorDifference(absl::string_view kind, const std::vector<TensorSpec> &there,
                 int32_t n, const tcc_tensor_desc *here) {
  auto find = [&there](const std::string &name) -> const TensorSpec * {
    for (const TensorSpec &spec : there)
      if (spec.name == name)
        return &spec;
    return nullptr;
  };
  for (int32_t i = 0; i < n; ++i) {
    const tcc_tensor_desc &t = here[i];
    const TensorSpec *spec = find(Str(t.name));
    if (!spec)
      return absl::StrCat(kind, " '", Str(t.name), "' (", SpecText(t),
                          ") of this step.so is not in the checkpoint");
    if (spec->dtype != DtypeName(t.dtype) || spec->shape != ShapeOf(t))
      return absl::StrCat(kind, " '", spec->name, "' is ",
                          SpecText(spec->dtype, spec->shape), " there and ",
                          SpecText(t), " in this step.so");
  }
  for (const TensorSpec &spec : there) {
    bool known = false;
    for (int32_t i = 0; i < n && !known; ++i)
      known = spec.name == Str(here[i].name);
    if (!known)
      return absl::StrCat(kind, " '", spec.name, "' (",
                          SpecText(spec.dtype, spec.shape),
                          ") is in the checkpoint but not in this step.so");
  }
  for (int32_t i = 0; i < n; ++i)
    if (there[i].name != Str(here[i].name))
      for (size_t j = 0; j < there.size(); ++j)
        if (there[j].name == Str(here[i].name))
          return absl::StrCat(kind, " '", there[j].name, "' is at position ", j,
                              " there and ", i, " in this step.so");
  return std::nullopt;
}

// Names the first difference between the checkpoint's step and `d`.
std::string StepDifference(const Candidate &c, const tcc_step_descriptor &d) {
  if (auto diff =
          TensorDifference("parameter", c.params, d.num_params, d.params))
    return *diff;
  if (auto diff = TensorDifference("optimizer state", c.optimizer_state,
                                   d.num_optimizer_state, d.optimizer_state)) {
    if (c.optimizer != Str(d.optimizer))
      absl::StrAppend(&*diff, " (the optimizer is ", c.optimizer, " there and ",
                      Str(d.optimizer), " in this step.so)");
    return *diff;
  }
  std::vector<std::string> here = InterfaceLines(d);
  const std::vector<std::string> &there = c.interface;
  for (size_t i = 0; i < std::max(here.size(), there.size()); ++i) {
    if (i >= there.size())
      return absl::StrCat("this step.so has '", here[i],
                          "', the checkpoint not");
    if (i >= here.size())
      return absl::StrCat("the checkpoint has '", there[i],
                          "', this step.so not");
    if (here[i] != there[i])
      return absl::StrCat("'", there[i], "' there and '", here[i],
                          "' in this step.so");
  }
  return absl::StrCat("fingerprint ", c.fingerprint, " there and ",
                      DescriptorFingerprint(d), " in this step.so");
}

// The file tensors for `n` descriptor tensors, checked to fill exactly
// size_bytes each (the fingerprint matched, so a failure means corruption).
absl::Status MatchBuffers(const SafetensorsFile &file, const char *name,
                          int32_t n, const tcc_tensor_desc *list,
                          std::vector<const SafetensorsFile::Tensor *> &out) {
  for (int32_t i = 0; i < n; ++i) {
    auto found = file.tensors().find(Str(list[i].name));
    if (found == file.tensors().end() ||
        found->second.size_bytes != list[i].size_bytes ||
        found->second.dtype != SafetensorsDtypeName(list[i].dtype) ||
        found->second.shape != ShapeOf(list[i]))
      return absl::DataLossError(absl::StrCat(
          name, " does not hold tensor '", Str(list[i].name), "' as ",
          SpecText(list[i]), " although the fingerprints match (corrupt)"));
    out.push_back(&found->second);
  }
  return absl::OkStatus();
}

absl::Status CheckBufferCounts(const tcc_step_descriptor &d, size_t params,
                               size_t optimizer_state, absl::string_view what) {
  if (params != static_cast<size_t>(d.num_params) ||
      optimizer_state != static_cast<size_t>(d.num_optimizer_state))
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", params, " parameter and ", optimizer_state,
                     " optimizer state buffers for a step with ", d.num_params,
                     " and ", d.num_optimizer_state));
  return absl::OkStatus();
}

} // namespace

std::string DescriptorFingerprint(const tcc_step_descriptor &descriptor) {
  return Fingerprint(InterfaceLines(descriptor));
}

absl::StatusOr<std::unique_ptr<CheckpointDir>>
CheckpointDir::Open(const std::string &path) {
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') // "D/" names D
    dir.pop_back();
  if (dir.empty())
    return absl::InvalidArgumentError("checkpoint directory: empty path");
  if (absl::Status s = MakeDirectories(dir); !s.ok())
    return s;
  // Root passes this check everywhere; others learn it here rather than at
  // the first checkpoint, hours into a run.
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
    return absl::ErrnoToStatus(
        errno, absl::StrCat("checkpoint directory ", dir, " is not writable"));
  std::string lock = absl::StrCat(dir, "/", kLockFile);
  int fd = ::open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", lock));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    std::string holder = LockHolder(fd);
    ::close(fd);
    if (error == EWOULDBLOCK)
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint directory ", dir,
                       " is in use by another trun (", holder, ")"));
    return absl::ErrnoToStatus(error, absl::StrCat("cannot lock ", lock));
  }
  std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) !=
                                     static_cast<ssize_t>(pid.size())) {
    int error = errno ? errno : EIO;
    ::close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot write ", lock));
  }
  std::unique_ptr<CheckpointDir> result(new CheckpointDir(dir, fd));

  // With the lock held no other writer is active; still, only remove what
  // a dead process (or an earlier attempt of ours) left.
  if (DIR *d = ::opendir(dir.c_str())) {
    std::vector<std::string> stale;
    while (const dirent *entry = ::readdir(d)) {
      std::optional<pid_t> writer = ParseTempPid(entry->d_name);
      if (writer && (*writer == ::getpid() ||
                     (::kill(*writer, 0) != 0 && errno == ESRCH)))
        stale.push_back(absl::StrCat(dir, "/", entry->d_name));
    }
    ::closedir(d);
    for (const std::string &path : stale) {
      std::error_code ignored; // leftovers are harmless; retried next time
      std::filesystem::remove_all(path, ignored);
    }
  }
  return result;
}

CheckpointDir::~CheckpointDir() {
  if (lock_fd_ >= 0)
    ::close(lock_fd_);
}

std::vector<std::string> CheckpointDir::List() const {
  std::vector<std::string> paths;
  for (auto &[step, path] : ListSteps(dir_))
    paths.push_back(std::move(path));
  return paths;
}

absl::StatusOr<std::string>
CheckpointDir::Write(const tcc_step_descriptor &d, const TrainState &state,
                     const std::vector<const void *> &params,
                     const std::vector<const void *> &optimizer_state,
                     int64_t keep) {
  std::string name = StepDirName(state.step);
  std::string final_path = absl::StrCat(dir_, "/", name);
  std::string what = absl::StrCat("cannot write checkpoint ", final_path);
  if (absl::Status s =
          CheckBufferCounts(d, params.size(), optimizer_state.size(), what);
      !s.ok())
    return s;
  if (state.step < 0 || state.data_cursor < 0 || state.total_steps < 0 ||
      !std::isfinite(state.base_learning_rate))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": step ", state.step, ", data cursor ", state.data_cursor,
        ", total steps ", state.total_steps, " and base learning rate ",
        state.base_learning_rate, " must be non-negative and finite"));

  std::string temp =
      absl::StrCat(dir_, "/", kTempPrefix, name, "-", ::getpid());
  std::error_code ignored;
  std::filesystem::remove_all(temp, ignored); // an earlier failed attempt
  auto fail = [&](const absl::Status &s) {
    std::filesystem::remove_all(temp, ignored);
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  };
  if (::mkdir(temp.c_str(), 0755) != 0)
    return fail(
        absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", temp)));

  std::map<std::string, std::string> metadata = {
      {"model", Str(d.model_name)},
      {"producer", "trun"},
      {"step", absl::StrCat(state.step)}};
  if (absl::Status s = WriteSafetensors(
          absl::StrCat(temp, "/", kModelFile),
          TensorsToWrite(d.num_params, d.params, params), metadata);
      !s.ok())
    return fail(s);
  metadata["optimizer"] = Str(d.optimizer);
  if (absl::Status s =
          WriteSafetensors(absl::StrCat(temp, "/", kOptimizerFile),
                           TensorsToWrite(d.num_optimizer_state,
                                          d.optimizer_state, optimizer_state),
                           metadata);
      !s.ok())
    return fail(s);

  // The CRCs are of the bytes in the files, read back (the safetensors
  // header is built inside WriteSafetensors).
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  for (const char *file : {kModelFile, kOptimizerFile}) {
    absl::StatusOr<FileSummary> summary =
        Summarize(absl::StrCat(temp, "/", file));
    if (!summary.ok())
      return fail(summary.status());
    files[file] = {{"bytes", summary->bytes}, {"crc32", summary->crc32}};
  }
  std::vector<std::string> lines = InterfaceLines(d);
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
      {"model", Str(d.model_name)},
      {"optimizer", Str(d.optimizer)},
      {"fingerprint", Fingerprint(lines)},
      {"interface", lines},
      {"params", SpecsJson(d.num_params, d.params)},
      {"optimizer_state", SpecsJson(d.num_optimizer_state, d.optimizer_state)},
      {"files", files},
      {"written_at", IsoTimeNow()}};
  // replace: a --data path that is not UTF-8 must not abort the write.
  std::string text =
      json.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  if (absl::Status s =
          WriteFileAtomically(absl::StrCat(temp, "/", kStateFile), {text});
      !s.ok())
    return fail(s);
  if (absl::Status s = SyncDirectory(temp); !s.ok())
    return fail(s);

  // Publish: one rename. A checkpoint of the same step is swapped out
  // atomically (RENAME_EXCHANGE) and then removed from the temporary name.
  struct stat st;
  std::string replaced;
  if (::lstat(final_path.c_str(), &st) != 0) {
    if (std::rename(temp.c_str(), final_path.c_str()) != 0)
      return fail(absl::ErrnoToStatus(
          errno, absl::StrCat("cannot rename ", temp, " to ", final_path)));
  } else if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, final_path.c_str(),
                         RENAME_EXCHANGE) == 0) {
    replaced = temp;
  } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
    // No RENAME_EXCHANGE on this file system: move the old one aside first
    // (a crash in between leaves older checkpoints, not a partial one).
    replaced =
        absl::StrCat(dir_, "/", kTempPrefix, "old-", name, "-", ::getpid());
    std::filesystem::remove_all(replaced, ignored);
    if (std::rename(final_path.c_str(), replaced.c_str()) != 0)
      return fail(absl::ErrnoToStatus(
          errno, absl::StrCat("cannot rename ", final_path, " to ", replaced)));
    if (std::rename(temp.c_str(), final_path.c_str()) != 0) {
      absl::Status s = absl::ErrnoToStatus(
          errno, absl::StrCat("cannot rename ", temp, " to ", final_path));
      std::rename(replaced.c_str(), final_path.c_str());
      return fail(s);
    }
  } else {
    return fail(absl::ErrnoToStatus(
        errno, absl::StrCat("cannot replace ", final_path, " with ", temp)));
  }
  absl::Status synced = SyncDirectory(dir_);
  if (!replaced.empty())
    std::filesystem::remove_all(replaced, ignored);
  if (!synced.ok())
    return absl::Status(synced.code(),
                        absl::StrCat(what, ": ", synced.message()));

  // Only now that step N is complete: drop older checkpoints beyond the
  // newest `keep` (counting N). Newer ones, from a run that went further,
  // are not this run's to delete. A failed removal leaves a complete one.
  if (keep > 0) {
    std::vector<std::pair<int64_t, std::string>> older;
    for (auto &entry : ListSteps(dir_))
      if (entry.first < state.step)
        older.push_back(std::move(entry));
    int64_t excess = static_cast<int64_t>(older.size()) - (keep - 1);
    for (int64_t i = 0; i < excess; ++i)
      RemoveCheckpoint(dir_, older[i].second);
  }
  return final_path;
}

absl::StatusOr<LoadedCheckpoint>
CheckpointDir::LoadNewest(const tcc_step_descriptor &d,
                          const std::vector<void *> &params,
                          const std::vector<void *> &optimizer_state,
                          std::vector<std::string> &warnings) {
  if (absl::Status s = CheckBufferCounts(
          d, params.size(), optimizer_state.size(),
          absl::StrCat("cannot load a checkpoint from ", dir_));
      !s.ok())
    return s;
  std::vector<std::pair<int64_t, std::string>> steps = ListSteps(dir_);
  if (steps.empty())
    return absl::NotFoundError(
        absl::StrCat("no checkpoint (step_* directory) in ", dir_));
  std::string fingerprint = DescriptorFingerprint(d);
  std::string newest_reason;
  for (size_t i = steps.size(); i-- > 0;) {
    const std::string &path = steps[i].second;
    Candidate c;
    std::vector<const SafetensorsFile::Tensor *> param_sources, state_sources;
    absl::Status s = ReadState(path, steps[i].first, c);
    if (s.ok()) {
      absl::StatusOr<SafetensorsFile> file =
          ReadTensors(path, kModelFile, c.files[kModelFile], c.params);
      s = file.status();
      if (file.ok())
        c.model_file = std::move(*file);
    }
    if (s.ok()) {
      absl::StatusOr<SafetensorsFile> file = ReadTensors(
          path, kOptimizerFile, c.files[kOptimizerFile], c.optimizer_state);
      s = file.status();
      if (file.ok())
        c.optimizer_file = std::move(*file);
    }
    if (s.ok() && c.fingerprint != fingerprint)
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", path,
          " was written for a different step: ", StepDifference(c, d),
          "; refusing to resume (--init-from ", path, "/", kModelFile,
          " starts from its weights only when the parameters match)"));
    if (s.ok())
      s = MatchBuffers(c.model_file, kModelFile, d.num_params, d.params,
                       param_sources);
    if (s.ok())
      s = MatchBuffers(c.optimizer_file, kOptimizerFile, d.num_optimizer_state,
                       d.optimizer_state, state_sources);
    if (!s.ok()) {
      if (newest_reason.empty())
        newest_reason = absl::StrCat(path, " is unusable: ", s.message());
      warnings.push_back(absl::StrCat(path, " is unusable: ", s.message(),
                                      i > 0 ? "; trying the previous one"
                                            : "; there is no older one"));
      continue;
    }
    for (int32_t j = 0; j < d.num_params; ++j)
      if (param_sources[j]->size_bytes > 0)
        std::memcpy(params[j], param_sources[j]->data,
                    static_cast<size_t>(param_sources[j]->size_bytes));
    for (int32_t j = 0; j < d.num_optimizer_state; ++j)
      if (state_sources[j]->size_bytes > 0)
        std::memcpy(optimizer_state[j], state_sources[j]->data,
                    static_cast<size_t>(state_sources[j]->size_bytes));
    return LoadedCheckpoint{path, c.state};
  }
  return absl::DataLossError(absl::StrCat(
      "no usable checkpoint in ", dir_, ": ",
      steps.size() == 1
          ? std::string("its only checkpoint is unusable")
          : absl::StrCat("all ", steps.size(), " checkpoints are unusable"),
      " (the newest: ", newest_reason, ")"));
}

} // namespace tcc::trun
