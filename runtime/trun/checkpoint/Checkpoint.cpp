// The checkpoint directory (Checkpoint.h): its lock, the atomic writer of a
// step_N directory (temporary directory, fsync, rename, --keep) and the
// loader of the newest usable one. What state.json holds is
// CheckpointState; whether a checkpoint fits the step, CheckpointCompatibility.
#include "runtime/trun/checkpoint/Checkpoint.h"
#include "runtime/trun/io/PathLock.h"

#include "runtime/trun/checkpoint/CheckpointCompatibility.h"
#include "runtime/trun/checkpoint/CheckpointState.h"
#include "runtime/trun/io/AtomicFile.h"
#include "runtime/trun/io/Safetensors.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

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
#include <filesystem>
#include <limits>
#include <map>
#include <utility>

namespace tcc::trun {

// The state codec and the compatibility checks (internal to checkpoint/).
using namespace checkpoint;

namespace {

constexpr char kLockFile[] = ".lock";
constexpr char kTempPrefix[] = ".tmp-";

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

std::vector<TensorToWrite>
TensorsToWrite(int32_t n, const tcc_tensor_desc *list,
               const std::vector<const void *> &data) {
  std::vector<TensorToWrite> tensors;
  for (int32_t i = 0; i < n; ++i)
    tensors.push_back(TensorToWriteOf(list[i], data[i]));
  return tensors;
}

// Everything read from one checkpoint directory before anything is copied.
struct Candidate : RecordedState {
  SafetensorsFile model_file, optimizer_file;
};

} // namespace

std::string DescriptorFingerprint(const tcc_step_descriptor &descriptor, int world_size) {
  return Fingerprint(InterfaceLines(descriptor, world_size));
}

namespace {
// "D/" names D.
std::string WithoutTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  return dir;
}
} // namespace

absl::StatusOr<std::unique_ptr<CheckpointDir>>
CheckpointDir::Open(const std::string &path) {
  std::string dir = WithoutTrailingSlashes(path);
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

std::unique_ptr<CheckpointDir> CheckpointDir::OpenForReading(const std::string &path) {
  return std::unique_ptr<CheckpointDir>(new CheckpointDir(WithoutTrailingSlashes(path), -1));
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
      {"model", OrEmpty(d.model_name)},
      {"producer", "trun"},
      {"step", absl::StrCat(state.step)}};
  // The sizes and CRCs state.json records are taken while writing: reading
  // the files back would cost as much again (1.5 GB for GPT-2 with AdamW).
  FileChecksum model, optimizer;
  if (absl::Status s = WriteSafetensors(
          absl::StrCat(temp, "/", kModelFile),
          TensorsToWrite(d.num_params, d.params, params), metadata, &model);
      !s.ok())
    return fail(s);
  metadata["optimizer"] = OrEmpty(d.optimizer);
  if (absl::Status s =
          WriteSafetensors(absl::StrCat(temp, "/", kOptimizerFile),
                           TensorsToWrite(d.num_optimizer_state,
                                          d.optimizer_state, optimizer_state),
                           metadata, &optimizer);
      !s.ok())
    return fail(s);
  std::string text = EncodeState(d, world_size_, state, model, optimizer);
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
  // newest `keep` (counting N).
  PruneOlder(state.step, keep);
  return final_path;
}

int64_t CheckpointDir::PruneOlder(int64_t step, int64_t keep) {
  if (keep <= 0)
    return 0;
  // Newer ones, from a run that went further, are not this run's to
  // delete. A failed removal leaves a complete one.
  std::vector<std::pair<int64_t, std::string>> older;
  for (auto &entry : ListSteps(dir_))
    if (entry.first < step)
      older.push_back(std::move(entry));
  const int64_t excess = static_cast<int64_t>(older.size()) - (keep - 1);
  for (int64_t i = 0; i < excess; ++i)
    RemoveCheckpoint(dir_, older[i].second);
  return std::max<int64_t>(excess, 0);
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
  std::string fingerprint = DescriptorFingerprint(d, world_size_);
  std::string newest_reason;
  for (size_t i = steps.size(); i-- > 0;) {
    const std::string &path = steps[i].second;
    Candidate c;
    std::vector<const SafetensorsFile::Tensor *> param_sources, state_sources;
    absl::Status s = ReadState(path, steps[i].first, c);
    if (s.ok()) {
      absl::StatusOr<SafetensorsFile> file = ReadRecordedTensors(
          path, kModelFile, c.files[kModelFile], c.params);
      s = file.status();
      if (file.ok())
        c.model_file = std::move(*file);
    }
    if (s.ok()) {
      absl::StatusOr<SafetensorsFile> file = ReadRecordedTensors(
          path, kOptimizerFile, c.files[kOptimizerFile], c.optimizer_state);
      s = file.status();
      if (file.ok())
        c.optimizer_file = std::move(*file);
    }
    if (s.ok() && c.fingerprint != fingerprint)
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", path,
          " was written for a different step: ", StepDifference(c, d, world_size_),
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
    CopyTensorData(param_sources, params);
    CopyTensorData(state_sources, optimizer_state);
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
