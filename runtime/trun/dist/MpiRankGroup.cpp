// The MPI back end (RankGroup.h): libtcc_mpi.so, found next to the trun
// executable (or at $TCC_MPI_PLUGIN), dlopened with RTLD_GLOBAL because
// Open MPI's own components resolve libmpi's symbols through it.
#include "runtime/initializers/Dtypes.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/dist/mpi/MpiPlugin.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

namespace tcc::trun {
namespace {

std::string PluginPath() {
  if (const char *path = std::getenv("TCC_MPI_PLUGIN"); path && *path)
    return path;
  std::string dir = ThisExecutable();
  dir = dir.empty() ? std::string(".") : dir.substr(0, dir.find_last_of('/'));
  return dir + "/libtcc_mpi.so";
}

class MpiRankGroup : public RankGroup {
public:
  MpiRankGroup(RankInfo info, const tcc_mpi_plugin *mpi) : RankGroup(std::move(info)), mpi_(mpi) {
    collectives_.rank = info_.rank;
    collectives_.world_size = info_.world_size;
    collectives_.context = this;
    collectives_.all_reduce = &MpiRankGroup::StepAllReduce;
    collectives_.reduce_scatter = &MpiRankGroup::StepReduceScatter;
    collectives_.all_gather = &MpiRankGroup::StepAllGather;
    collectives_.wait = nullptr; // MPI's collectives return when they are done
  }

  std::string Describe() const override { return absl::StrCat("MPI (", mpi_->library_version(), ")"); }


  absl::Status Finish() override {
    StopWatchdog();
    if (mpi_->finalize())
      return Error();
    return absl::OkStatus();
  }

  [[noreturn]] void AbortAll(int exit_code) override {
    mpi_->abort(exit_code);
    std::_Exit(exit_code); // MPI_Abort should not return
  }

protected:
  absl::Status GatherBytes(const char *mine, size_t bytes, char *all) override {
    if (mpi_->all_gather(mine, static_cast<int64_t>(bytes), all))
      return Error();
    return absl::OkStatus();
  }

  absl::Status SumDoubles(double *values, size_t count) override {
    if (mpi_->all_reduce(nullptr, values, static_cast<int64_t>(count), TCC_DTYPE_F64,
                         TCC_REDUCE_SUM, nullptr))
      return Error();
    return absl::OkStatus();
  }

private:
  // The step's all-reduce: the plugin's, its error kept for trun's message.
  static int32_t StepAllReduce(void *context, void *buffer, int64_t count, tcc_dtype dtype,
                               tcc_reduction reduction, void *stream) {
    auto *self = static_cast<MpiRankGroup *>(context);
    int32_t rc = self->mpi_->all_reduce(nullptr, buffer, count, dtype, reduction, stream);
    if (rc)
      RecordCollectiveError(absl::StrCat("MPI all-reduce of ", count, " elements: ",
                                         self->mpi_->last_error()));
    return rc;
  }

  static int32_t StepReduceScatter(void *context, const void *send, void *recv,
                                   int64_t recv_count, tcc_dtype dtype, tcc_reduction reduction,
                                   void *stream) {
    auto *self = static_cast<MpiRankGroup *>(context);
    int32_t rc =
        self->mpi_->reduce_scatter(nullptr, send, recv, recv_count, dtype, reduction, stream);
    if (rc)
      RecordCollectiveError(absl::StrCat("MPI reduce-scatter to ", recv_count,
                                         " elements per rank: ", self->mpi_->last_error()));
    return rc;
  }

  // A byte copy: the plugin's host gather serves every dtype.
  static int32_t StepAllGather(void *context, const void *send, void *recv, int64_t send_count,
                               tcc_dtype dtype, void *) {
    auto *self = static_cast<MpiRankGroup *>(context);
    int64_t element_bytes = DtypeSize(dtype);
    if (element_bytes == 0) {
      RecordCollectiveError(absl::StrCat("MPI all-gather of ", send_count,
                                         " elements per rank: unknown dtype ", dtype));
      return 1;
    }
    int32_t rc = self->mpi_->all_gather(send, send_count * element_bytes, recv);
    if (rc)
      RecordCollectiveError(absl::StrCat("MPI all-gather of ", send_count,
                                         " elements per rank: ", self->mpi_->last_error()));
    return rc;
  }

  absl::Status Error() const { return absl::InternalError(mpi_->last_error()); }
  const tcc_mpi_plugin *mpi_;
};

} // namespace

absl::StatusOr<std::unique_ptr<RankGroup>> JoinMpiRanks(const RankInfo &info) {
  std::string path = PluginPath();
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load trun's MPI back end: ", dlerror(),
        " (a cpu step trains across ranks with MPI: install Open MPI, apt-get install "
        "openmpi-bin libopenmpi-dev, and rebuild trun so that libtcc_mpi.so is built next "
        "to it)"));
  auto get = reinterpret_cast<tcc_mpi_plugin_fn>(dlsym(handle, TCC_MPI_PLUGIN_SYMBOL));
  const tcc_mpi_plugin *mpi = get ? get() : nullptr;
  if (!mpi || mpi->struct_size < sizeof(tcc_mpi_plugin))
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not trun's MPI back end (no ", TCC_MPI_PLUGIN_SYMBOL,
                     " of this trun's version)"));
  int32_t rank = 0, world = 0;
  if (mpi->init(&rank, &world))
    return absl::UnavailableError(absl::StrCat("MPI: ", mpi->last_error()));
  if (rank != info.rank || world != info.world_size)
    return absl::FailedPreconditionError(absl::StrCat(
        "MPI says this process is rank ", rank, " of ", world, " but the launcher's environment says ",
        info.Describe(), ": start trun with one launcher"));
  return std::unique_ptr<RankGroup>(new MpiRankGroup(info, mpi));
}

} // namespace tcc::trun
