#include "runtime/trun/checkpoint/Checkpoint.h"
#include "runtime/trun/checkpoint/CheckpointState.h"

#include "runtime/trun/io/Safetensors.h"
#include "runtime/trun/io/Weights.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

namespace tcc::trun {
namespace {

using testing::ReadFileBytes;
using testing::TempDir;
namespace fs = std::filesystem;

struct Spec {
  std::string name;
  tcc_dtype dtype;
  std::vector<int64_t> shape;
};

int64_t Bytes(tcc_dtype dtype) {
  return dtype == TCC_DTYPE_F64 || dtype == TCC_DTYPE_I64 ? 8 : 4;
}

// A small step descriptor built from editable specs: params "w" f32[rows,
// cols] and "b" f32[cols], SGD momentum state for each, input "x".
// Edit the specs or fields, then Sync(). Not copyable: d points into it.
struct TinyStep {
  explicit TinyStep(int64_t rows = 3, int64_t cols = 4) {
    params = {{"w", TCC_DTYPE_F32, {rows, cols}}, {"b", TCC_DTYPE_F32, {cols}}};
    state = {{"w.momentum", TCC_DTYPE_F32, {rows, cols}},
             {"b.momentum", TCC_DTYPE_F32, {cols}}};
    inputs = {{"x", TCC_DTYPE_F32, {2, rows}}};
    d.abi_version = TCC_STEP_ABI_VERSION;
    d.struct_size = sizeof(tcc_step_descriptor);
    d.target = "cpu";
    d.arch = "x86_64";
    d.precision = "f32";
    d.loss_name = "loss";
    d.default_learning_rate = 0.1;
    d.lr_schedule = {TCC_LR_CONSTANT, 0.1, 0, 0, 0.0};
    d.micro_batches = 1;
    Sync();
  }
  TinyStep(const TinyStep &) = delete;
  TinyStep &operator=(const TinyStep &) = delete;

  const tcc_step_descriptor &Sync() {
    auto describe = [](std::vector<Spec> &specs, bool with_init) {
      std::vector<tcc_tensor_desc> out;
      for (Spec &s : specs) {
        tcc_tensor_desc t{};
        t.name = s.name.c_str();
        t.dtype = s.dtype;
        t.rank = static_cast<int32_t>(s.shape.size());
        t.shape = s.shape.data();
        t.num_elements = 1;
        for (int64_t n : s.shape)
          t.num_elements *= n;
        t.size_bytes = t.num_elements * Bytes(s.dtype);
        if (with_init) {
          t.init_kind = TCC_INIT_NORMAL;
          t.init_scale = 0.02;
          t.init_seed = 7;
          t.trainable = 1;
        }
        out.push_back(t);
      }
      return out;
    };
    param_descs = describe(params, true);
    state_descs = describe(state, false);
    input_descs = describe(inputs, false);
    d.model_name = model.c_str();
    d.optimizer = optimizer.c_str();
    d.num_params = static_cast<int32_t>(param_descs.size());
    d.params = param_descs.data();
    d.num_optimizer_state = static_cast<int32_t>(state_descs.size());
    d.optimizer_state = state_descs.data();
    d.num_inputs = static_cast<int32_t>(input_descs.size());
    d.inputs = input_descs.data();
    return d;
  }

  std::vector<Spec> params, state, inputs;
  std::string model = "tiny", optimizer = "sgd";
  std::vector<tcc_tensor_desc> param_descs, state_descs, input_descs;
  tcc_step_descriptor d{};
};

// Buffers for a step's params and optimizer state, filled from `salt`.
struct Buffers {
  Buffers(const tcc_step_descriptor &d, int salt) {
    auto fill = [salt](int32_t n, const tcc_tensor_desc *list) {
      std::vector<std::vector<uint8_t>> out;
      for (int32_t i = 0; i < n; ++i) {
        std::vector<uint8_t> bytes(static_cast<size_t>(list[i].size_bytes));
        for (size_t j = 0; j < bytes.size(); ++j)
          bytes[j] = static_cast<uint8_t>(salt * 29 + i * 101 + j * 7);
        out.push_back(std::move(bytes));
      }
      return out;
    };
    params = fill(d.num_params, d.params);
    state = fill(d.num_optimizer_state, d.optimizer_state);
  }
  template <typename T>
  static std::vector<T> Pointers(std::vector<std::vector<uint8_t>> &buffers) {
    std::vector<T> out;
    for (auto &b : buffers)
      out.push_back(b.data());
    return out;
  }
  std::vector<const void *> Params() { return Pointers<const void *>(params); }
  std::vector<const void *> State() { return Pointers<const void *>(state); }
  std::vector<void *> MutableParams() { return Pointers<void *>(params); }
  std::vector<void *> MutableState() { return Pointers<void *>(state); }
  bool operator==(const Buffers &o) const {
    return params == o.params && state == o.state;
  }

  std::vector<std::vector<uint8_t>> params, state;
};

TrainState SampleState(int64_t step) {
  TrainState s;
  s.step = step;
  s.data_cursor = step * 4 + 1;
  s.seed = (uint64_t{1} << 63) + 12345; // not representable as a double
  s.data_order = "random";
  s.base_learning_rate = 3e-4;
  s.total_steps = 1000;
  s.data = "/data/shards";
  return s;
}

void ExpectSameState(const TrainState &a, const TrainState &b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.data_cursor, b.data_cursor);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.data_order, b.data_order);
  EXPECT_EQ(a.base_learning_rate, b.base_learning_rate);
  EXPECT_EQ(a.total_steps, b.total_steps);
  EXPECT_EQ(a.data, b.data);
}

std::unique_ptr<CheckpointDir> OpenOrDie(const std::string &dir) {
  absl::StatusOr<std::unique_ptr<CheckpointDir>> opened =
      CheckpointDir::Open(dir);
  EXPECT_TRUE(opened.ok()) << opened.status();
  return opened.ok() ? std::move(*opened) : nullptr;
}

// Writes checkpoint `step` with buffers from `salt`.
std::string WriteStep(CheckpointDir &dir, TinyStep &step, int64_t number,
                      int salt, int64_t keep = 0) {
  Buffers buffers(step.d, salt);
  absl::StatusOr<std::string> path = dir.Write(
      step.d, SampleState(number), buffers.Params(), buffers.State(), keep);
  EXPECT_TRUE(path.ok()) << path.status();
  return path.ok() ? *path : "";
}

std::set<std::string> Entries(const std::string &dir) {
  std::set<std::string> names;
  for (const auto &entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

std::string StepPath(const std::string &dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "/step_%09lld",
                static_cast<long long>(step));
  return dir + name;
}

void WriteText(const std::string &path, const std::string &text) {
  testing::WriteFile(path, std::vector<uint8_t>(text.begin(), text.end()));
}

nlohmann::json ReadJson(const std::string &path) {
  std::vector<uint8_t> bytes = ReadFileBytes(path);
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

// Runs `body` in a forked child and returns what it wrote to the pipe and
// its exit status. The child never returns into gtest.
std::pair<std::string, int> InChild(const std::function<std::string()> &body) {
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return {"", -1};
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string text = body();
    ssize_t written = ::write(fds[1], text.data(), text.size());
    ::_exit(written == static_cast<ssize_t>(text.size()) ? 0 : 3);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof(buffer))) > 0)
    text.append(buffer, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {text, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

std::string Message(const absl::Status &s) { return std::string(s.message()); }

TEST(CheckpointTest, RoundTripRestoresTensorsAndState) {
  TempDir tmp;
  std::string dir = tmp.File("runs/a"); // missing parents are created
  TinyStep step;
  Buffers written(step.d, 1);
  TrainState state = SampleState(100);
  state.base_learning_rate = 0.1 + 1e-17; // full double precision survives
  std::string path;
  {
    std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(dir);
    ASSERT_TRUE(ckpt);
    absl::StatusOr<std::string> result = ckpt->Write(
        step.d, state, written.Params(), written.State(), /*keep=*/0);
    ASSERT_TRUE(result.ok()) << result.status();
    path = *result;
  }
  EXPECT_EQ(path, dir + "/step_000000100");
  EXPECT_EQ(Entries(dir), (std::set<std::string>{".lock", "step_000000100"}));
  EXPECT_EQ(Entries(path),
            (std::set<std::string>{"model.safetensors", "optimizer.safetensors",
                                   "state.json"}));

  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(dir);
  ASSERT_TRUE(ckpt);
  EXPECT_EQ(ckpt->List(), std::vector<std::string>{path});
  Buffers loaded(step.d, 2);
  ASSERT_FALSE(loaded == written);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
      step.d, loaded.MutableParams(), loaded.MutableState(), warnings);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(result->path, path);
  EXPECT_TRUE(loaded == written);
  ExpectSameState(result->state, state);

  // state.json: the documented fields, the seed as a decimal string, and
  // size + CRC32 of the files as they are on disk.
  nlohmann::json json = ReadJson(path + "/state.json");
  EXPECT_EQ(json["format"], "tcc-checkpoint");
  EXPECT_EQ(json["version"], 1);
  EXPECT_EQ(json["step"], 100);
  EXPECT_EQ(json["seed"], "9223372036854788153");
  EXPECT_EQ(json["model"], "tiny");
  EXPECT_EQ(json["fingerprint"], DescriptorFingerprint(step.d));
  EXPECT_EQ(json["params"][0],
            nlohmann::json::parse(
                R"({"name": "w", "dtype": "f32", "shape": [3, 4]})"));
  EXPECT_EQ(json["optimizer_state"][1]["name"], "b.momentum");
  EXPECT_TRUE(json["written_at"].get<std::string>().size() == 20 &&
              json["written_at"].get<std::string>().back() == 'Z')
      << json["written_at"];
  for (const char *file : {"model.safetensors", "optimizer.safetensors"}) {
    std::vector<uint8_t> bytes = ReadFileBytes(path + "/" + file);
    EXPECT_EQ(json["files"][file]["bytes"], bytes.size()) << file;
    EXPECT_EQ(json["files"][file]["crc32"],
              crc32(crc32(0, Z_NULL, 0), bytes.data(),
                    static_cast<uInt>(bytes.size())))
        << file;
  }

  // model.safetensors is a weights file for --init-from.
  Buffers weights(step.d, 3);
  ASSERT_TRUE(
      LoadWeights(path + "/model.safetensors", step.d, weights.MutableParams())
          .ok());
  EXPECT_EQ(weights.params, written.params);
  absl::StatusOr<SafetensorsFile> model =
      SafetensorsFile::Open(path + "/model.safetensors");
  ASSERT_TRUE(model.ok()) << model.status();
  std::map<std::string, std::string> metadata = model->metadata();
  EXPECT_EQ(metadata.erase("tcc_data_crc32"), 1u); // every file trun writes
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{
                          {"model", "tiny"}, {"producer", "trun"}, {"step", "100"}}));
}

TEST(CheckpointTest, StepWithoutOptimizerStateStillWritesItsFile) {
  TempDir tmp;
  TinyStep step;
  step.state.clear();
  step.Sync();
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
  ASSERT_TRUE(ckpt);
  std::string path = WriteStep(*ckpt, step, 5, 1);
  absl::StatusOr<SafetensorsFile> file =
      SafetensorsFile::Open(path + "/optimizer.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->tensors().empty());
  Buffers loaded(step.d, 2);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
      step.d, loaded.MutableParams(), loaded.MutableState(), warnings);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(loaded == Buffers(step.d, 1));
}

TEST(CheckpointTest, FingerprintIsStableAndCoversTheInterface) {
  TinyStep base;
  std::string fingerprint = DescriptorFingerprint(base.d);
  // Pinned: the hash must not change between builds or platforms. This is
  // 64-bit FNV-1a of the canonical text (abi_version 3\nmodel "tiny"\n...),
  // computed independently; a deliberate change of the text (or an ABI
  // version bump) updates it.
  EXPECT_EQ(fingerprint, "6417ebb3f31b3cc1");
  TinyStep same;
  EXPECT_EQ(DescriptorFingerprint(same.d), fingerprint);

  std::vector<std::pair<const char *, std::function<void(TinyStep &)>>>
      changes = {
          {"param shape", [](TinyStep &s) { s.params[0].shape[0] = 5; }},
          {"param name", [](TinyStep &s) { s.params[1].name = "bias"; }},
          {"param dtype",
           [](TinyStep &s) { s.params[1].dtype = TCC_DTYPE_I32; }},
          {"param order",
           [](TinyStep &s) { std::swap(s.params[0], s.params[1]); }},
          {"state shape", [](TinyStep &s) { s.state[1].shape = {5}; }},
          {"input shape", [](TinyStep &s) { s.inputs[0].shape[0] = 8; }},
          {"model", [](TinyStep &s) { s.model = "tiny2"; }},
          {"optimizer", [](TinyStep &s) { s.optimizer = "adamw"; }},
          {"schedule", [](TinyStep &s) { s.d.lr_schedule.base_lr = 0.2; }},
          {"micro-batches", [](TinyStep &s) { s.d.micro_batches = 2; }},
          {"abi",
           [](TinyStep &s) { s.d.abi_version = TCC_STEP_ABI_VERSION + 1; }},
      };
  for (auto &[what, change] : changes) {
    TinyStep changed;
    change(changed);
    changed.Sync();
    EXPECT_NE(DescriptorFingerprint(changed.d), fingerprint) << what;
  }
  TinyStep init;
  init.Sync();
  init.param_descs[0].init_scale = 0.5;
  EXPECT_NE(DescriptorFingerprint(init.d), fingerprint) << "init scale";
  // Target and arch are not part of the interface: a CPU checkpoint fits
  // the same step built for another machine.
  TinyStep other_arch;
  other_arch.d.arch = "aarch64";
  EXPECT_EQ(DescriptorFingerprint(other_arch.d), fingerprint);
}

// Data-parallel runs record the global step: N ranks of batch B match one
// rank of batch N x B, so a checkpoint resumes at another world size with
// the same global batch, and only then.
TEST(CheckpointTest, FingerprintAcrossRanksIsTheGlobalStep) {
  TinyStep four; // input x f32[2, 3]: batch 2 per rank
  TinyStep eight;
  eight.inputs[0].shape[0] = 4;
  eight.Sync();
  EXPECT_EQ(DescriptorFingerprint(four.d, 2), DescriptorFingerprint(eight.d, 1));
  EXPECT_EQ(DescriptorFingerprint(four.d, 1), DescriptorFingerprint(four.d));
  EXPECT_NE(DescriptorFingerprint(four.d, 2), DescriptorFingerprint(four.d, 1));
  EXPECT_NE(DescriptorFingerprint(four.d, 4), DescriptorFingerprint(eight.d, 1));
  // Parameters are replicated, not scaled.
  std::vector<std::string> lines = checkpoint::InterfaceLines(four.d, 2);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "input \"x\" f32[4,3]"), lines.end());
  EXPECT_NE(std::find_if(lines.begin(), lines.end(),
                         [](const std::string &l) { return l.rfind("param \"w\" f32[3,4]", 0) == 0; }),
            lines.end());

  // Written by 2 ranks of batch 2, loaded by 1 rank of batch 4; a third
  // step of another global batch is refused.
  TempDir dir;
  Buffers buffers(four.d, 3);
  {
    auto ckpt = CheckpointDir::Open(dir.path());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    (*ckpt)->set_world_size(2);
    TrainState state;
    state.step = 5;
    ASSERT_TRUE((*ckpt)->Write(four.d, state, buffers.Params(), buffers.State(), 0).ok());
  }
  auto ckpt = CheckpointDir::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  Buffers loaded(eight.d, 9);
  std::vector<std::string> warnings;
  auto result = (*ckpt)->LoadNewest(eight.d, loaded.MutableParams(), loaded.MutableState(), warnings);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(loaded == buffers);
  auto refused = (*ckpt)->LoadNewest(four.d, loaded.MutableParams(), loaded.MutableState(), warnings);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_NE(std::string(refused.status().message())
                .find("'input \"x\" f32[4,3]' there and 'input \"x\" f32[2,3]'"),
            std::string::npos)
      << refused.status();
}

TEST(CheckpointTest, KeepDeletesOnlyOlderCompleteCheckpoints) {
  TempDir tmp;
  std::string dir = tmp.path();
  TinyStep step;
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(dir);
  ASSERT_TRUE(ckpt);
  // Unrelated entries, including names that look almost like checkpoints.
  fs::create_directory(dir + "/notes");
  fs::create_directory(dir + "/step_10");
  WriteText(dir + "/step_000000001", "a file, not a checkpoint");
  for (int64_t s : {10, 20, 30})
    WriteStep(*ckpt, step, s, static_cast<int>(s));
  EXPECT_EQ(ckpt->List(),
            (std::vector<std::string>{StepPath(dir, 10), StepPath(dir, 20),
                                      StepPath(dir, 30)}));
  WriteStep(*ckpt, step, 40, 40, /*keep=*/2);
  EXPECT_EQ(ckpt->List(),
            (std::vector<std::string>{StepPath(dir, 30), StepPath(dir, 40)}));
  // A checkpoint newer than the one written is left alone.
  WriteStep(*ckpt, step, 35, 35, /*keep=*/1);
  EXPECT_EQ(ckpt->List(),
            (std::vector<std::string>{StepPath(dir, 35), StepPath(dir, 40)}));
  EXPECT_EQ(Entries(dir), (std::set<std::string>{
                              ".lock", "notes", "step_10", "step_000000001",
                              "step_000000035", "step_000000040"}));
  // Ordered by number, not by name: step 1000000000 has ten digits.
  WriteStep(*ckpt, step, 1000000000, 9);
  EXPECT_EQ(ckpt->List().back(), dir + "/step_1000000000");
}

// A run killed after writing step N and before deleting the old ones
// leaves keep + 1; the resumed run (TrainingSession) finishes the job with
// PruneOlder for the step it resumed from.
TEST(CheckpointTest, PruneOlderFinishesAnInterruptedKeep) {
  TempDir tmp;
  std::string dir = tmp.path();
  TinyStep step;
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(dir);
  ASSERT_TRUE(ckpt);
  for (int64_t s : {1, 2, 3, 4, 5})
    WriteStep(*ckpt, step, s, static_cast<int>(s));
  EXPECT_EQ(ckpt->PruneOlder(4, 0), 0); // keep 0: keep all
  EXPECT_EQ(ckpt->List().size(), 5u);
  // Resumed from step 4 with --keep 3: steps 2, 3, 4 stay, and step 5 (newer
  // than the one resumed from) is not this run's to delete.
  EXPECT_EQ(ckpt->PruneOlder(4, 3), 1);
  EXPECT_EQ(ckpt->List(), (std::vector<std::string>{StepPath(dir, 2), StepPath(dir, 3),
                                                    StepPath(dir, 4), StepPath(dir, 5)}));
  EXPECT_EQ(ckpt->PruneOlder(5, 3), 1);
  EXPECT_EQ(ckpt->List(), (std::vector<std::string>{StepPath(dir, 3), StepPath(dir, 4),
                                                    StepPath(dir, 5)}));
  EXPECT_EQ(ckpt->PruneOlder(5, 3), 0); // nothing left beyond --keep
}

TEST(CheckpointTest, RewritingAStepReplacesIt) {
  TempDir tmp;
  TinyStep step;
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
  ASSERT_TRUE(ckpt);
  WriteStep(*ckpt, step, 10, 1);
  std::string path = WriteStep(*ckpt, step, 10, 2);
  EXPECT_EQ(ckpt->List(), std::vector<std::string>{path});
  EXPECT_EQ(Entries(tmp.path()),
            (std::set<std::string>{".lock", "step_000000010"}));
  Buffers loaded(step.d, 3);
  std::vector<std::string> warnings;
  ASSERT_TRUE(ckpt->LoadNewest(step.d, loaded.MutableParams(),
                               loaded.MutableState(), warnings)
                  .ok());
  EXPECT_TRUE(loaded == Buffers(step.d, 2));
}

// Ways to break a checkpoint, and the reason LoadNewest must give.
struct Corruption {
  const char *what;
  std::function<void(const std::string &older, const std::string &newer)> apply;
  std::string reason;
  std::string more_reason = ""; // a second part of the reason, if any
};

std::vector<Corruption> Corruptions() {
  auto edit_state = [](const std::string &path,
                       const std::function<void(nlohmann::json &)> &edit) {
    nlohmann::json json = ReadJson(path + "/state.json");
    edit(json);
    WriteText(path + "/state.json", json.dump(2));
  };
  return {
      {"truncated model",
       [](const std::string &, const std::string &p) {
         fs::resize_file(p + "/model.safetensors",
                         fs::file_size(p + "/model.safetensors") / 2);
       },
       "model.safetensors has ", " bytes, state.json recorded "},
      {"flipped byte in the optimizer state",
       [](const std::string &, const std::string &p) {
         std::string file = p + "/optimizer.safetensors";
         std::vector<uint8_t> bytes = ReadFileBytes(file);
         bytes.back() ^= 0x10;
         testing::WriteFile(file, bytes);
         // Caught twice: by state.json's CRC of the file (the error below)
         // and by the file's own data checksum (tcc_data_crc32).
         ASSERT_FALSE(SafetensorsFile::Open(file).ok());
       },
       "optimizer.safetensors has CRC32 "},
      {"garbage state.json",
       [](const std::string &, const std::string &p) {
         WriteText(p + "/state.json", "{\"format\": \"tcc-chec");
       },
       "state.json is not a JSON object"},
      {"missing model",
       [](const std::string &, const std::string &p) {
         fs::remove(p + "/model.safetensors");
       },
       "model.safetensors: No such file or directory"},
      {"missing state.json",
       [](const std::string &, const std::string &p) {
         fs::remove(p + "/state.json");
       },
       "state.json: No such file or directory"},
      {"state.json of another step",
       [](const std::string &older, const std::string &p) {
         fs::copy_file(older + "/state.json", p + "/state.json",
                       fs::copy_options::overwrite_existing);
       },
       "state.json is for step 10, not 20"},
      {"a field of the wrong type",
       [edit_state](const std::string &, const std::string &p) {
         edit_state(p, [](nlohmann::json &j) { j["data_cursor"] = "81"; });
       },
       "state.json field 'data_cursor' is missing or not an integer"},
      {"a seed that is not a number",
       [edit_state](const std::string &, const std::string &p) {
         edit_state(p, [](nlohmann::json &j) { j["seed"] = "12x"; });
       },
       "field 'seed' is not a decimal uint64: '12x'"},
      {"recorded spec differs from the file",
       [edit_state](const std::string &, const std::string &p) {
         edit_state(p, [](nlohmann::json &j) {
           j["params"][0]["shape"] = {9, 4};
         });
       },
       "model.safetensors tensor 'w' is F32 [3,4], state.json recorded "
       "f32[9,4]"},
      {"edited fingerprint",
       [edit_state](const std::string &, const std::string &p) {
         edit_state(p, [](nlohmann::json &j) {
           j["fingerprint"] = "0123456789abcdef";
         });
       },
       "does not match its own 'interface' lines"},
  };
}

TEST(CheckpointTest, FallsBackPastAnUnusableCheckpoint) {
  for (const Corruption &corruption : Corruptions()) {
    SCOPED_TRACE(corruption.what);
    TempDir tmp;
    TinyStep step;
    std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
    ASSERT_TRUE(ckpt);
    std::string older = WriteStep(*ckpt, step, 10, 1);
    std::string newer = WriteStep(*ckpt, step, 20, 2);
    corruption.apply(older, newer);
    Buffers loaded(step.d, 3);
    std::vector<std::string> warnings;
    absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
        step.d, loaded.MutableParams(), loaded.MutableState(), warnings);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->path, older);
    EXPECT_EQ(result->state.step, 10);
    EXPECT_TRUE(loaded == Buffers(step.d, 1));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].rfind(newer + " is unusable: ", 0), 0u)
        << warnings[0];
    EXPECT_NE(warnings[0].find(corruption.reason), std::string::npos)
        << warnings[0];
    EXPECT_NE(warnings[0].find(corruption.more_reason), std::string::npos)
        << warnings[0];
    EXPECT_EQ(warnings[0].substr(warnings[0].size() - 25),
              "; trying the previous one");
  }
}

// Each file of the newest checkpoint cut at every byte (a full disk, an
// interrupted copy): skipped with a warning, the previous one loads.
TEST(CheckpointTest, NewestCutAtAnyByteFallsBack) {
  TempDir tmp;
  TinyStep step;
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
  ASSERT_TRUE(ckpt);
  std::string older = WriteStep(*ckpt, step, 10, 1);
  std::string newer = WriteStep(*ckpt, step, 20, 2);
  for (const char *name :
       {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    std::string file = newer + "/" + name;
    std::vector<uint8_t> whole = ReadFileBytes(file);
    // Cutting state.json's final newline leaves the same JSON: not a cut.
    size_t content = whole.size();
    while (content > 0 && whole[content - 1] == '\n')
      --content;
    for (size_t cut = 0; cut < content; ++cut) {
      testing::WriteFile(
          file, std::vector<uint8_t>(whole.begin(), whole.begin() + cut));
      Buffers loaded(step.d, 3);
      std::vector<std::string> warnings;
      absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
          step.d, loaded.MutableParams(), loaded.MutableState(), warnings);
      ASSERT_TRUE(result.ok()) << name << " cut at " << cut << ": "
                               << result.status();
      EXPECT_EQ(result->path, older) << name << " cut at " << cut;
      ASSERT_EQ(warnings.size(), 1u) << name << " cut at " << cut;
      EXPECT_EQ(warnings[0].rfind(newer + " is unusable: ", 0), 0u)
          << warnings[0];
    }
    testing::WriteFile(file, whole);
  }
}

TEST(CheckpointTest, NoUsableCheckpointIsDataLoss) {
  TempDir tmp;
  TinyStep step;
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
  ASSERT_TRUE(ckpt);
  std::string older = WriteStep(*ckpt, step, 10, 1);
  std::string newer = WriteStep(*ckpt, step, 20, 2);
  fs::remove(older + "/optimizer.safetensors");
  WriteText(newer + "/state.json", "");
  Buffers loaded(step.d, 3);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
      step.d, loaded.MutableParams(), loaded.MutableState(), warnings);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Message(result.status()),
            "no usable checkpoint in " + tmp.path() +
                ": all 2 checkpoints are unusable (the newest: " + newer +
                " is unusable: state.json is not a JSON object (0 bytes; "
                "corrupt or truncated))");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find(newer + " is unusable: state.json"),
            std::string::npos)
      << warnings[0];
  EXPECT_EQ(warnings[1], older + " is unusable: cannot open " + older +
                             "/optimizer.safetensors: No such file or "
                             "directory; there is no older one");
  EXPECT_TRUE(loaded == Buffers(step.d, 3)); // untouched
}

TEST(CheckpointTest, NoCheckpointIsNotFound) {
  TempDir tmp;
  TinyStep step;
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
  ASSERT_TRUE(ckpt);
  fs::create_directory(tmp.File("step_7")); // not a checkpoint name
  WriteText(tmp.File("notes.txt"), "x");
  Buffers loaded(step.d, 3);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
      step.d, loaded.MutableParams(), loaded.MutableState(), warnings);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Message(result.status()),
            "no checkpoint (step_* directory) in " + tmp.path());
  EXPECT_TRUE(ckpt->List().empty());
  EXPECT_TRUE(warnings.empty());
}

TEST(CheckpointTest, CheckpointOfADifferentStepIsRefused) {
  struct Case {
    const char *what;
    std::function<void(TinyStep &)> change;
    std::string difference;
  };
  std::vector<Case> cases = {
      {"shape", [](TinyStep &s) { s.params[0].shape[0] = 5; },
       "parameter 'w' is f32[3,4] there and f32[5,4] in this step.so"},
      {"name", [](TinyStep &s) { s.params[1].name = "bias"; },
       "parameter 'bias' (f32[4]) of this step.so is not in the checkpoint"},
      {"dtype", [](TinyStep &s) { s.params[1].dtype = TCC_DTYPE_I32; },
       "parameter 'b' is f32[4] there and i32[4] in this step.so"},
      {"dropped param",
       [](TinyStep &s) {
         s.params.pop_back();
         s.state.pop_back();
       },
       "parameter 'b' (f32[4]) is in the checkpoint but not in this step.so"},
      {"order", [](TinyStep &s) { std::swap(s.params[0], s.params[1]); },
       "parameter 'b' is at position 1 there and 0 in this step.so"},
      {"optimizer",
       [](TinyStep &s) {
         s.optimizer = "adamw";
         s.state = {{"w.m", TCC_DTYPE_F32, {3, 4}},
                    {"w.v", TCC_DTYPE_F32, {3, 4}},
                    {"b.m", TCC_DTYPE_F32, {4}},
                    {"b.v", TCC_DTYPE_F32, {4}}};
       },
       "optimizer state 'w.m' (f32[3,4]) of this step.so is not in the "
       "checkpoint (the optimizer is sgd there and adamw in this step.so)"},
      {"state shape", [](TinyStep &s) { s.state[1].shape = {5}; },
       "optimizer state 'b.momentum' is f32[4] there and f32[5] in this "
       "step.so"},
      {"input shape", [](TinyStep &s) { s.inputs[0].shape[0] = 8; },
       "'input \"x\" f32[2,3]' there and 'input \"x\" f32[8,3]' in this "
       "step.so"},
      {"schedule", [](TinyStep &s) { s.d.lr_schedule.warmup_steps = 10; },
       "'lr_schedule kind=0 base_lr=0.10000000000000001 warmup_steps=0 "
       "decay_steps=0 min_lr=0' there and 'lr_schedule kind=0 "
       "base_lr=0.10000000000000001 warmup_steps=10 decay_steps=0 min_lr=0' "
       "in this step.so"},
      {"model name", [](TinyStep &s) { s.model = "tiny2"; },
       "'model \"tiny\"' there and 'model \"tiny2\"' in this step.so"},
  };
  TempDir tmp;
  TinyStep original;
  std::string path;
  {
    std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
    ASSERT_TRUE(ckpt);
    path = WriteStep(*ckpt, original, 200, 1);
  }
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    TinyStep step;
    c.change(step);
    step.Sync();
    std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
    ASSERT_TRUE(ckpt);
    Buffers loaded(step.d, 3);
    std::vector<std::string> warnings;
    absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
        step.d, loaded.MutableParams(), loaded.MutableState(), warnings);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(Message(result.status()),
              "checkpoint " + path + " was written for a different step: " +
                  c.difference + "; refusing to resume (--init-from " + path +
                  "/model.safetensors starts from its weights only when the "
                  "parameters match)");
    EXPECT_TRUE(warnings.empty());
    EXPECT_TRUE(loaded == Buffers(step.d, 3)); // untouched
  }

  // The newest checkpoint is unusable and the one before is for a different
  // step: the refusal comes with the warning about the newest.
  TinyStep changed;
  changed.params[0].shape[0] = 5;
  changed.state[0].shape[0] = 5;
  changed.Sync();
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
  ASSERT_TRUE(ckpt);
  std::string newer = WriteStep(*ckpt, changed, 300, 2);
  fs::remove(newer + "/model.safetensors");
  Buffers loaded(changed.d, 3);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
      changed.d, loaded.MutableParams(), loaded.MutableState(), warnings);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind(newer + " is unusable: ", 0), 0u);
}

TEST(CheckpointTest, SecondOpenOfALockedDirectoryNamesThePid) {
  TempDir tmp;
  std::string dir = tmp.File("ckpt");
  std::unique_ptr<CheckpointDir> first = OpenOrDie(dir);
  ASSERT_TRUE(first);
  std::string pid = std::to_string(::getpid());
  std::vector<uint8_t> lock = ReadFileBytes(dir + "/.lock");
  EXPECT_EQ(std::string(lock.begin(), lock.end()), pid + "\n");
  std::string expected = "checkpoint directory " + dir +
                         " is in use by another trun (pid " + pid + ")";

  absl::StatusOr<std::unique_ptr<CheckpointDir>> second =
      CheckpointDir::Open(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(second.status()), expected);
  // Another process is refused the same way.
  auto [text, status] = InChild([&dir] {
    absl::StatusOr<std::unique_ptr<CheckpointDir>> opened =
        CheckpointDir::Open(dir);
    return opened.ok() ? std::string("opened") : Message(opened.status());
  });
  EXPECT_EQ(text, expected);

  first.reset(); // releases the lock
  std::unique_ptr<CheckpointDir> again = OpenOrDie(dir + "/");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->dir(), dir); // "D/" names D
}

TEST(CheckpointTest, OpenRemovesTemporariesOfDeadWriters) {
  TempDir tmp;
  std::string dir = tmp.path();
  pid_t dead = ::fork();
  if (dead == 0)
    ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  std::string dead_temp = dir + "/.tmp-step_000000005-" + std::to_string(dead);
  std::string own_temp =
      dir + "/.tmp-step_000000006-" + std::to_string(::getpid());
  std::string live_temp = dir + "/.tmp-step_000000007-1"; // pid 1 is alive
  for (const std::string &temp : {dead_temp, own_temp, live_temp}) {
    fs::create_directory(temp);
    WriteText(temp + "/model.safetensors", "partial");
  }
  fs::create_directory(dir + "/.tmp-notes"); // no pid: not ours to remove
  ASSERT_TRUE(OpenOrDie(dir));
  EXPECT_EQ(Entries(dir), (std::set<std::string>{".lock", ".tmp-notes",
                                                 ".tmp-step_000000007-1"}));
}

TEST(CheckpointTest, OpenExplainsAnUnusableDirectory) {
  TempDir tmp;
  std::string file = tmp.File("file");
  WriteText(file, "x");
  absl::StatusOr<std::unique_ptr<CheckpointDir>> opened =
      CheckpointDir::Open(file);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(Message(opened.status()), "checkpoint directory " + file +
                                          " is not a directory (it is a "
                                          "regular file)");
  opened = CheckpointDir::Open(file + "/sub/ckpt");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(Message(opened.status()), "cannot create checkpoint directory " +
                                          file + "/sub/ckpt: " + file +
                                          " is not a directory");
  opened = CheckpointDir::Open("");
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument);

  // A directory without write permission (0555). Root may write anywhere,
  // so as root the check runs in a child that drops to nobody.
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0755), 0);
  std::string readonly = tmp.File("readonly");
  ASSERT_TRUE(fs::create_directory(readonly));
  ASSERT_EQ(::chmod(readonly.c_str(), 0555), 0);
  auto [text, status] = InChild([&readonly]() -> std::string {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0))
      return "cannot drop root";
    std::string lines;
    for (const std::string &dir : {readonly, readonly + "/sub"}) {
      absl::StatusOr<std::unique_ptr<CheckpointDir>> result =
          CheckpointDir::Open(dir);
      lines +=
          (result.ok() ? std::string("opened") : Message(result.status())) +
          "\n";
    }
    return lines;
  });
  if (text == "cannot drop root")
    GTEST_SKIP() << "cannot test an unwritable directory: setuid failed";
  EXPECT_EQ(text, "checkpoint directory " + readonly +
                      " is not writable: Permission denied\n"
                      "cannot create checkpoint directory " +
                      readonly + "/sub: cannot create " + readonly +
                      "/sub: Permission denied\n");
}

TEST(CheckpointTest, FailedWriteLeavesOlderCheckpointsAlone) {
  // A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes writes fail
  // with EFBIG mid-file, like a full disk, at the file named in each case.
  struct Case {
    const char *failing_file;
    std::vector<Spec> state;
    rlim_t limit;
  };
  std::vector<Case> cases = {
      {"model.safetensors", {{"w.big", TCC_DTYPE_F32, {64, 64}}}, 64},
      {"optimizer.safetensors", {{"w.big", TCC_DTYPE_F32, {64, 64}}}, 8192},
      {"state.json", {{"w.momentum", TCC_DTYPE_F32, {2, 2}}}, 600},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.failing_file);
    TempDir tmp;
    std::string dir = tmp.path();
    TinyStep step;
    step.params = {{"w", TCC_DTYPE_F32, {2, 2}}};
    step.state = c.state;
    step.Sync();
    std::string older;
    {
      std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(dir);
      ASSERT_TRUE(ckpt);
      older = WriteStep(*ckpt, step, 10, 1);
    }
    // The limit falls inside the file that is to fail, after the ones
    // written before it.
    std::vector<std::string> order = {"model.safetensors",
                                      "optimizer.safetensors", "state.json"};
    for (const std::string &file : order) {
      uintmax_t size = fs::file_size(older + "/" + file);
      if (file == c.failing_file) {
        ASSERT_GT(size, c.limit);
        break;
      }
      ASSERT_LT(size, c.limit) << file;
    }

    auto [text, status] = InChild([&] {
      ::signal(SIGXFSZ, SIG_IGN);
      rlimit limit{c.limit, c.limit};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0)
        return std::string("setrlimit failed");
      absl::StatusOr<std::unique_ptr<CheckpointDir>> ckpt =
          CheckpointDir::Open(dir);
      if (!ckpt.ok())
        return Message(ckpt.status());
      Buffers buffers(step.d, 2);
      absl::StatusOr<std::string> path = (*ckpt)->Write(
          step.d, SampleState(20), buffers.Params(), buffers.State(), 1);
      return path.ok() ? "written " + *path : Message(path.status());
    });
    std::string newer = StepPath(dir, 20);
    EXPECT_EQ(text.rfind("cannot write checkpoint " + newer + ": ", 0), 0u)
        << text;
    EXPECT_NE(text.find(std::string(c.failing_file) + ": File too large"),
              std::string::npos)
        << text;
    // No temporary directory is left behind (checked before an Open could
    // clean up after the dead child).
    EXPECT_EQ(Entries(dir), (std::set<std::string>{".lock", "step_000000010"}));

    std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(dir);
    ASSERT_TRUE(ckpt);
    Buffers loaded(step.d, 3);
    std::vector<std::string> warnings;
    absl::StatusOr<LoadedCheckpoint> result = ckpt->LoadNewest(
        step.d, loaded.MutableParams(), loaded.MutableState(), warnings);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->path, older);
    EXPECT_TRUE(warnings.empty());
    EXPECT_TRUE(loaded == Buffers(step.d, 1));
  }
}

TEST(CheckpointTest, RejectsBuffersThatDoNotFitTheStep) {
  TempDir tmp;
  TinyStep step;
  std::unique_ptr<CheckpointDir> ckpt = OpenOrDie(tmp.path());
  ASSERT_TRUE(ckpt);
  Buffers buffers(step.d, 1);
  std::vector<const void *> one_param = {buffers.params[0].data()};
  absl::StatusOr<std::string> written =
      ckpt->Write(step.d, SampleState(1), one_param, buffers.State(), 0);
  EXPECT_EQ(written.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(written.status()),
            "cannot write checkpoint " + tmp.path() +
                "/step_000000001: 1 parameter and 2 optimizer state buffers "
                "for a step with 2 and 2");
  written = ckpt->Write(step.d, SampleState(-1), buffers.Params(),
                        buffers.State(), 0);
  EXPECT_EQ(written.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> loaded =
      ckpt->LoadNewest(step.d, buffers.MutableParams(), {}, warnings);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Entries(tmp.path()), std::set<std::string>{".lock"});
}

} // namespace
} // namespace tcc::trun
