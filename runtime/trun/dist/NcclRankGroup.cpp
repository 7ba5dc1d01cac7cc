// The NCCL back end (RankGroup.h) for cuda steps.
//
// trun links neither NCCL nor the CUDA runtime (the step library brings its
// own): libnccl.so.2 and the driver's libcuda.so.1 are dlopened here, so a
// machine without NCCL learns it at start, in one line. The few
// declarations below are NCCL's and the driver's stable C ABI (nccl.h,
// cuda.h), copied as types only.
//
// Bootstrap: rank 0 makes NCCL's unique id and serves it over TCP at
// MASTER_ADDR:MASTER_PORT (TcpBootstrap.h); the others connect, retrying
// until the timeout, then everyone calls ncclCommInitRank.
//
// Overlap: all_reduce, reduce_scatter and all_gather queue the collective
// on a communication stream that first waits (an event) for what the step
// stream had queued, and return; wait() makes the step stream wait for the
// last one. Inside a CUDA graph capture both are captured as a fork and a
// join of the step's graph.
//
// trun --profile (no CUDA graph then): a timed event pair around each
// collective on the communication stream and around each wait of the step
// stream, read after the step (AddCommTimes, CommProfile.h).
#include "runtime/initializers/Dtypes.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/dist/TcpBootstrap.h"

#include "absl/strings/str_cat.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <thread>
#include <vector>

namespace tcc::trun {
namespace {

// --- NCCL (nccl.h) ---
using ncclResult_t = int;
using ncclComm_t = struct ncclComm *;
struct ncclUniqueId {
  char internal[128];
};
enum { ncclSuccess = 0 };
enum { ncclSum = 0, ncclAvg = 4 };
enum { ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9, ncclUint8 = 1 };
// --- CUDA driver (cuda.h) ---
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUdeviceptr = unsigned long long;
constexpr unsigned kStreamNonBlocking = 0x1, kEventDisableTiming = 0x2;

struct NcclApi {
  ncclResult_t (*GetUniqueId)(ncclUniqueId *);
  ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*AllReduce)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*AllGather)(const void *, void *, size_t, int, ncclComm_t, CUstream);
  ncclResult_t (*ReduceScatter)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
  const char *(*GetErrorString)(ncclResult_t);
  ncclResult_t (*GetVersion)(int *);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
};

struct DriverApi {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*GetErrorString)(CUresult, const char **);
  // For trun --profile only (null: the driver lacks them; not profiled).
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
};

template <typename F> bool Resolve(void *handle, const char *name, F &f) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  return f != nullptr;
}

absl::Status LoadNccl(NcclApi &api) {
  const char *override_path = std::getenv("TCC_NCCL_LIBRARY");
  const char *path = override_path && *override_path ? override_path : "libnccl.so.2";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL is missing: cannot load ", path, " (", dlerror(),
        "); a cuda step trains across ranks with NCCL: install it (e.g. the libnccl2 package, "
        "or pip's nvidia-nccl-cu13 with its lib directory on LD_LIBRARY_PATH), or set "
        "TCC_NCCL_LIBRARY to libnccl.so.2"));
  // The first function this libnccl lacks, named in the error.
  const char *missing = nullptr;
  auto need = [&](const char *name, auto &f) {
    if (!missing && !Resolve(h, name, f))
      missing = name;
  };
  need("ncclGetUniqueId", api.GetUniqueId);
  need("ncclCommInitRank", api.CommInitRank);
  need("ncclAllReduce", api.AllReduce);
  need("ncclAllGather", api.AllGather);
  need("ncclReduceScatter", api.ReduceScatter);
  need("ncclCommAbort", api.CommAbort);
  need("ncclCommDestroy", api.CommDestroy);
  need("ncclCommGetAsyncError", api.CommGetAsyncError);
  need("ncclGetErrorString", api.GetErrorString);
  need("ncclGetVersion", api.GetVersion);
  need("ncclGroupStart", api.GroupStart);
  need("ncclGroupEnd", api.GroupEnd);
  if (missing)
    return absl::FailedPreconditionError(absl::StrCat(
        path, " lacks ", missing, ", an NCCL function trun needs (NCCL 2.10 or newer)"));
  return absl::OkStatus();
}

absl::Status LoadDriver(DriverApi &api) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load the CUDA driver (libcuda.so.1): ", dlerror()));
  bool ok = Resolve(h, "cuInit", api.Init) && Resolve(h, "cuDeviceGet", api.DeviceGet) &&
            Resolve(h, "cuDevicePrimaryCtxRetain", api.DevicePrimaryCtxRetain) &&
            Resolve(h, "cuCtxSetCurrent", api.CtxSetCurrent) &&
            Resolve(h, "cuStreamCreate", api.StreamCreate) &&
            Resolve(h, "cuEventCreate", api.EventCreate) &&
            Resolve(h, "cuEventRecord", api.EventRecord) &&
            Resolve(h, "cuStreamWaitEvent", api.StreamWaitEvent) &&
            Resolve(h, "cuStreamSynchronize", api.StreamSynchronize) &&
            Resolve(h, "cuMemAlloc_v2", api.MemAlloc) && Resolve(h, "cuMemFree_v2", api.MemFree) &&
            Resolve(h, "cuMemcpyHtoD_v2", api.MemcpyHtoD) &&
            Resolve(h, "cuMemcpyDtoH_v2", api.MemcpyDtoH) &&
            Resolve(h, "cuGetErrorString", api.GetErrorString);
  if (!ok)
    return absl::FailedPreconditionError("libcuda.so.1 lacks a driver function trun needs");
  if (!Resolve(h, "cuEventSynchronize", api.EventSynchronize) ||
      !Resolve(h, "cuEventElapsedTime", api.EventElapsedTime))
    api.EventElapsedTime = nullptr;
  return absl::OkStatus();
}

class NcclRankGroup : public RankGroup {
public:
  explicit NcclRankGroup(RankInfo info) : RankGroup(std::move(info)) {}

  ~NcclRankGroup() override {
    if (comm_ && !finished_)
      nccl_.CommAbort(comm_);
  }

  absl::Status Init(int gpu, const BootstrapOptions &bootstrap) {
    if (absl::Status s = LoadNccl(nccl_); !s.ok())
      return s;
    if (absl::Status s = LoadDriver(cu_); !s.ok())
      return s;
    // The step library selected the GPU through its CUDA runtime; NCCL and
    // these streams use that device's primary context.
    CUdevice device = 0;
    CUcontext context = nullptr;
    if (absl::Status s = Cu(cu_.Init(0), "cuInit"); !s.ok())
      return s;
    if (absl::Status s = Cu(cu_.DeviceGet(&device, gpu), "cuDeviceGet"); !s.ok())
      return s;
    if (absl::Status s = Cu(cu_.DevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
        !s.ok())
      return s;
    if (absl::Status s = Cu(cu_.CtxSetCurrent(context), "cuCtxSetCurrent"); !s.ok())
      return s;
    if (absl::Status s = Cu(cu_.StreamCreate(&comm_stream_, kStreamNonBlocking), "cuStreamCreate");
        !s.ok())
      return s;
    if (absl::Status s = Cu(cu_.EventCreate(&ready_, kEventDisableTiming), "cuEventCreate"); !s.ok())
      return s;
    if (absl::Status s = Cu(cu_.EventCreate(&done_, kEventDisableTiming), "cuEventCreate"); !s.ok())
      return s;
    if (absl::Status s = Cu(cu_.MemAlloc(&host_exchange_, kHostExchangeBytes), "cuMemAlloc");
        !s.ok())
      return s;

    ncclUniqueId id{};
    if (is_lead())
      if (absl::Status s = Nccl(nccl_.GetUniqueId(&id), "ncclGetUniqueId"); !s.ok())
        return s;
    absl::Status shared = ShareBootstrapBytes(info_, bootstrap, id.internal, sizeof id.internal);
    if (!shared.ok())
      return shared;
    if (absl::Status s =
            Nccl(nccl_.CommInitRank(&comm_, world_size(), id, rank()), "ncclCommInitRank");
        !s.ok())
      return s;
    int version = 0;
    nccl_.GetVersion(&version);
    version_ = absl::StrCat(version / 10000, ".", version / 100 % 100, ".", version % 100);
    collectives_.rank = rank();
    collectives_.world_size = world_size();
    collectives_.context = this;
    collectives_.all_reduce = &NcclRankGroup::StepAllReduce;
    collectives_.reduce_scatter = &NcclRankGroup::StepReduceScatter;
    collectives_.all_gather = &NcclRankGroup::StepAllGather;
    collectives_.wait = &NcclRankGroup::StepWait;
    collectives_.all_reduce_bucket = &NcclRankGroup::StepAllReduceBucket;
    return absl::OkStatus();
  }

  bool TimesCollectives() const override { return cu_.EventElapsedTime != nullptr; }

  absl::Status SetCommProfiling(bool on) override {
    if (on && !TimesCollectives())
      return absl::FailedPreconditionError(
          "trun --profile: this CUDA driver lacks cuEventElapsedTime; collectives not timed");
    profiling_ = on;
    collective_times_.used = wait_times_.used = 0;
    untimed_ = false;
    return absl::OkStatus();
  }

  absl::Status AddCommTimes(CommProfile &sums) override {
    if (!profiling_)
      return absl::OkStatus();
    if (untimed_)
      return absl::InternalError("trun --profile: cuEventCreate failed; collectives not timed");
    double bytes = 0;
    sums.collectives += static_cast<double>(collective_times_.used);
    absl::StatusOr<double> comm = SumPairs(collective_times_, &bytes);
    if (!comm.ok())
      return comm.status();
    absl::StatusOr<double> exposed = SumPairs(wait_times_, nullptr);
    if (!exposed.ok())
      return exposed.status();
    sums.bytes += bytes;
    sums.comm_ms += *comm;
    sums.exposed_ms += *exposed;
    return absl::OkStatus();
  }

  std::string Describe() const override {
    return absl::StrCat("NCCL ", version_, " (all-reduce on a communication stream)");
  }

  // In order: the communication stream drained (its last collectives
  // done), then the communicator destroyed. The caller has released the
  // step's CUDA graphs first (Trainer::ReleaseGraphs): ncclCommDestroy
  // waits for every graph holding this communicator's operations.
  absl::Status Finish() override {
    StopWatchdog();
    finished_ = true;
    if (absl::Status s = CloseGatherGroup(); !s.ok())
      return s;
    if (comm_stream_)
      if (absl::Status s = Cu(cu_.StreamSynchronize(comm_stream_), "cuStreamSynchronize"); !s.ok())
        return s;
    if (comm_)
      if (absl::Status s = Nccl(nccl_.CommDestroy(comm_), "ncclCommDestroy"); !s.ok())
        return s;
    comm_ = nullptr;
    return absl::OkStatus();
  }

  void AbortFromWatchdog() override { AbortBriefly(); }

  [[noreturn]] void AbortAll(int exit_code) override {
    // Aborting the communicator makes the NCCL kernels of this rank return.
    // The other ranks are ended by the launcher (trun --nproc, torchrun,
    // srun), which sees this process exit: trun does not poll NCCL for a
    // dead peer inside a step.
    AbortBriefly();
    std::_Exit(exit_code);
  }

protected:
  // Host exchanges go through a small device buffer on the communication
  // stream (between steps: nothing else is queued there then).
  size_t MaxExchangeBytes() const override { return kHostExchangeBytes; }

  absl::Status GatherBytes(const char *mine, size_t bytes, char *all) override {
    if (absl::Status s = CloseGatherGroup(); !s.ok())
      return s;
    size_t total = bytes * world_size();
    if (total > kHostExchangeBytes)
      return absl::InternalError("AllGather: more bytes than the exchange buffer holds");
    CUdeviceptr own = host_exchange_ + bytes * rank();
    if (absl::Status s = Cu(cu_.MemcpyHtoD(own, mine, bytes), "cuMemcpyHtoD"); !s.ok())
      return s;
    if (absl::Status s = Nccl(nccl_.AllGather(reinterpret_cast<void *>(own),
                                              reinterpret_cast<void *>(host_exchange_), bytes,
                                              ncclUint8, comm_, comm_stream_),
                              "ncclAllGather");
        !s.ok())
      return s;
    return CopyBack(all, total);
  }

  absl::Status SumDoubles(double *values, size_t count) override {
    if (absl::Status s = CloseGatherGroup(); !s.ok())
      return s;
    size_t bytes = count * sizeof(double);
    if (bytes > kHostExchangeBytes)
      return absl::InternalError("SumOnHost: more values than the exchange buffer holds");
    if (absl::Status s = Cu(cu_.MemcpyHtoD(host_exchange_, values, bytes), "cuMemcpyHtoD"); !s.ok())
      return s;
    void *p = reinterpret_cast<void *>(host_exchange_);
    if (absl::Status s =
            Nccl(nccl_.AllReduce(p, p, count, ncclFloat64, ncclSum, comm_, comm_stream_),
                 "ncclAllReduce");
        !s.ok())
      return s;
    return CopyBack(reinterpret_cast<char *>(values), bytes);
  }

private:
  static constexpr size_t kHostExchangeBytes = 1 << 16;
  static constexpr int kAbortSeconds = 5;

  // ncclCommAbort, given kAbortSeconds on a thread of its own; the caller
  // ends the process next, whatever it did. ncclCommAbort stops this rank's
  // NCCL kernels at once, then waits, as ncclCommDestroy does, until every
  // CUDA graph holding the communicator's collectives is destroyed (on these
  // paths the step still holds its graphs), and it may wait for the other
  // ranks' NCCL proxies: unbounded, a rank that failed after its first
  // captured step never exited, nor did the watchdog end a hung one (issue
  // 34). The first caller aborts (the watchdog's thread or main()'s).
  void AbortBriefly() {
    if (!comm_ || aborting_.exchange(true))
      return;
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([this, done] {
      nccl_.CommAbort(comm_);
      *done = true;
    }).detach();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kAbortSeconds);
    while (!*done && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // The first `bytes` of the exchange buffer, once the stream is done.
  absl::Status CopyBack(char *out, size_t bytes) {
    if (absl::Status s = Cu(cu_.StreamSynchronize(comm_stream_), "cuStreamSynchronize"); !s.ok())
      return s;
    return Cu(cu_.MemcpyDtoH(out, host_exchange_, bytes), "cuMemcpyDtoH");
  }

  // NCCL's type of a floating-point dtype, -1 for the others.
  static int NcclFloatType(tcc_dtype dtype) {
    return dtype == TCC_DTYPE_F32    ? ncclFloat32
           : dtype == TCC_DTYPE_BF16 ? ncclBfloat16
           : dtype == TCC_DTYPE_F16  ? ncclFloat16
           : dtype == TCC_DTYPE_F64  ? ncclFloat64
                                     : -1;
  }
  static int NcclOp(tcc_reduction reduction) {
    return reduction == TCC_REDUCE_MEAN ? ncclAvg : ncclSum;
  }

  // Queues `collective` (an NCCL call on the communication stream) after
  // the work `stream` had queued, then records done_ for StepWait: the
  // communication stream runs in order, so done_ covers every collective
  // queued so far.
  template <typename Collective>
  absl::Status QueueAfterStep(void *stream, const char *what, double bytes,
                              Collective collective) {
    if (absl::Status s = CloseGatherGroup(); !s.ok())
      return s;
    if (absl::Status s = CommWaitsForStep(stream); !s.ok())
      return s;
    return LaunchOnCommStream(what, bytes, collective);
  }

  // The communication stream waits for what `stream` (the step's) had
  // queued: the buffers the next collective reads are final then.
  absl::Status CommWaitsForStep(void *stream) {
    if (absl::Status s = Cu(cu_.EventRecord(ready_, static_cast<CUstream>(stream)),
                            "cuEventRecord");
        !s.ok())
      return s;
    return Cu(cu_.StreamWaitEvent(comm_stream_, ready_, 0), "cuStreamWaitEvent");
  }

  // `launch` (NCCL calls on the communication stream) between --profile's
  // timed events, then done_ recorded for StepWait: the communication
  // stream runs in order, so done_ covers everything queued so far.
  template <typename Launch>
  absl::Status LaunchOnCommStream(const char *what, double bytes, Launch launch) {
    TimedPair *timed = profiling_ ? NextPair(collective_times_) : nullptr;
    if (timed)
      if (absl::Status s = Cu(cu_.EventRecord(timed->start, comm_stream_), "cuEventRecord");
          !s.ok())
        return s;
    if (absl::Status s = Nccl(launch(), what); !s.ok())
      return s;
    if (timed) {
      timed->bytes = bytes;
      if (absl::Status s = Cu(cu_.EventRecord(timed->end, comm_stream_), "cuEventRecord");
          !s.ok())
        return s;
    }
    return Cu(cu_.EventRecord(done_, comm_stream_), "cuEventRecord");
  }

  // ZeRO-1's all-gathers come in a run, after the update of the shards:
  // one NCCL launch each (148 for GPT-2, most of them latency-bound). They
  // are queued into one NCCL group instead, launched (ncclGroupEnd) at the
  // next call that is not an all-gather: the step's wait before anything
  // reads the parameters (at the latest, the one at the step's end),
  // another collective, a host exchange, Finish.
  template <typename Gather>
  absl::Status QueueGather(void *stream, double bytes, Gather gather) {
    if (absl::Status s = CommWaitsForStep(stream); !s.ok())
      return s;
    if (!gather_group_open_) {
      if (absl::Status s = Nccl(nccl_.GroupStart(), "ncclGroupStart"); !s.ok())
        return s;
      gather_group_open_ = true;
      gather_group_bytes_ = 0;
    }
    gather_group_bytes_ += bytes;
    return Nccl(gather(), "ncclAllGather");
  }

  // Launches the open group of all-gathers, if any (QueueGather).
  absl::Status CloseGatherGroup() {
    if (!gather_group_open_)
      return absl::OkStatus();
    gather_group_open_ = false;
    return LaunchOnCommStream("ncclGroupEnd (a group of ncclAllGather)", gather_group_bytes_,
                              [&] { return nccl_.GroupEnd(); });
  }

  // --profile's events: a pair per collective or wait, reused each step.
  struct TimedPair {
    CUevent start = nullptr, end = nullptr;
    double bytes = 0;
  };
  struct TimedPairs {
    std::vector<TimedPair> pairs;
    size_t used = 0;
  };
  // The next pair of `list` (created on first use); null if creating failed
  // (the collective then goes untimed; AddCommTimes says so).
  TimedPair *NextPair(TimedPairs &list) {
    if (list.used == list.pairs.size()) {
      TimedPair p;
      if (cu_.EventCreate(&p.start, 0) != 0 || cu_.EventCreate(&p.end, 0) != 0) {
        untimed_ = true;
        return nullptr;
      }
      list.pairs.push_back(p);
    }
    return &list.pairs[list.used++];
  }
  // Milliseconds between each used pair's events, summed; clears `list`.
  absl::StatusOr<double> SumPairs(TimedPairs &list, double *bytes) {
    double ms = 0;
    for (size_t i = 0; i < list.used; ++i) {
      TimedPair &p = list.pairs[i];
      if (absl::Status s = Cu(cu_.EventSynchronize(p.end), "cuEventSynchronize"); !s.ok())
        return s;
      float elapsed = 0;
      if (absl::Status s = Cu(cu_.EventElapsedTime(&elapsed, p.start, p.end),
                              "cuEventElapsedTime");
          !s.ok())
        return s;
      ms += elapsed;
      if (bytes)
        *bytes += p.bytes;
    }
    list.used = 0;
    return ms;
  }

  // A bucket of all-reduces as one NCCL group: one launch on the
  // communication stream for all of them.
  static int32_t StepAllReduceBucket(void *context, int32_t n, void *const *buffers,
                                     const int64_t *counts, tcc_dtype dtype,
                                     tcc_reduction reduction, void *stream) {
    auto *self = static_cast<NcclRankGroup *>(context);
    int type = NcclFloatType(dtype);
    if (type < 0) {
      RecordCollectiveError(absl::StrCat("NCCL all-reduce: dtype ", dtype,
                                         " is not f32, bf16, f16 or f64"));
      return 1;
    }
    double bytes = 0;
    for (int32_t i = 0; i < n; ++i)
      bytes += static_cast<double>(counts[i]) * DtypeSize(dtype);
    absl::Status s = self->QueueAfterStep(stream, "ncclGroupEnd (a bucket of ncclAllReduce)", bytes,
                                          [&] {
      ncclResult_t r = self->nccl_.GroupStart();
      for (int32_t i = 0; i < n && r == ncclSuccess; ++i)
        r = self->nccl_.AllReduce(buffers[i], buffers[i], static_cast<size_t>(counts[i]), type,
                                  NcclOp(reduction), self->comm_, self->comm_stream_);
      ncclResult_t end = self->nccl_.GroupEnd(); // always: a started group must end
      return r != ncclSuccess ? r : end;
    });
    if (s.ok())
      return 0;
    int64_t elements = 0;
    for (int32_t i = 0; i < n; ++i)
      elements += counts[i];
    RecordCollectiveError(absl::StrCat("NCCL all-reduce of ", n, n == 1 ? " buffer" : " buffers",
                                       " (", elements, " elements): ", s.message()));
    return 2;
  }

  // One all-reduce: a bucket of one.
  static int32_t StepAllReduce(void *context, void *buffer, int64_t count, tcc_dtype dtype,
                               tcc_reduction reduction, void *stream) {
    void *const buffers[] = {buffer};
    return StepAllReduceBucket(context, 1, buffers, &count, dtype, reduction, stream);
  }

  static int32_t StepReduceScatter(void *context, const void *send, void *recv,
                                   int64_t recv_count, tcc_dtype dtype, tcc_reduction reduction,
                                   void *stream) {
    auto *self = static_cast<NcclRankGroup *>(context);
    int type = NcclFloatType(dtype);
    if (type < 0) {
      RecordCollectiveError(absl::StrCat("NCCL reduce-scatter: dtype ", dtype,
                                         " is not f32, bf16, f16 or f64"));
      return 1;
    }
    if (recv_count < 0) {
      RecordCollectiveError(absl::StrCat("NCCL reduce-scatter: negative count ", recv_count));
      return 1;
    }
    // The full gradient goes in: world_size x recv_count elements.
    double bytes = static_cast<double>(recv_count) * self->world_size() * DtypeSize(dtype);
    absl::Status s = self->QueueAfterStep(stream, "ncclReduceScatter", bytes, [&] {
      return self->nccl_.ReduceScatter(send, recv, static_cast<size_t>(recv_count), type,
                                       NcclOp(reduction), self->comm_, self->comm_stream_);
    });
    if (s.ok())
      return 0;
    RecordCollectiveError(absl::StrCat("NCCL reduce-scatter to ", recv_count,
                                       " elements per rank: ", s.message()));
    return 2;
  }

  // A byte copy, so every dtype goes as bytes.
  static int32_t StepAllGather(void *context, const void *send, void *recv, int64_t send_count,
                               tcc_dtype dtype, void *stream) {
    auto *self = static_cast<NcclRankGroup *>(context);
    int64_t element_bytes = DtypeSize(dtype);
    if (element_bytes == 0) {
      RecordCollectiveError(absl::StrCat("NCCL all-gather: unknown dtype ", dtype));
      return 1;
    }
    if (send_count < 0) {
      RecordCollectiveError(absl::StrCat("NCCL all-gather: negative count ", send_count));
      return 1;
    }
    // The full parameter comes out: world_size x send_count elements.
    double bytes = static_cast<double>(send_count) * self->world_size() * element_bytes;
    absl::Status s = self->QueueGather(stream, bytes, [&] {
      return self->nccl_.AllGather(send, recv, static_cast<size_t>(send_count * element_bytes),
                                   ncclUint8, self->comm_, self->comm_stream_);
    });
    if (s.ok())
      return 0;
    RecordCollectiveError(absl::StrCat("NCCL all-gather of ", send_count,
                                       " elements per rank: ", s.message()));
    return 2;
  }

  static int32_t StepWait(void *context, void *stream) {
    auto *self = static_cast<NcclRankGroup *>(context);
    CUstream step = static_cast<CUstream>(stream);
    // Timed: `start` completes when the step stream reaches the wait, `end`
    // when the collectives let it go on.
    absl::Status s = self->CloseGatherGroup();
    TimedPair *timed = self->profiling_ ? self->NextPair(self->wait_times_) : nullptr;
    if (s.ok() && timed)
      s = self->Cu(self->cu_.EventRecord(timed->start, step), "cuEventRecord");
    if (s.ok())
      s = self->Cu(self->cu_.StreamWaitEvent(step, self->done_, 0), "cuStreamWaitEvent");
    if (s.ok() && timed)
      s = self->Cu(self->cu_.EventRecord(timed->end, step), "cuEventRecord");
    if (s.ok())
      return 0;
    RecordCollectiveError(absl::StrCat("waiting for the NCCL collectives: ", s.message()));
    return 3;
  }

  absl::Status Cu(CUresult r, const char *what) {
    if (r == 0)
      return absl::OkStatus();
    const char *text = nullptr;
    cu_.GetErrorString(r, &text);
    return absl::InternalError(absl::StrCat(what, " failed: ", text ? text : "?", " (", r, ")"));
  }
  absl::Status Nccl(ncclResult_t r, const char *what) {
    if (r == 0)
      return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat(what, " failed: ", nccl_.GetErrorString(r), " (NCCL_DEBUG=WARN says more)"));
  }

  NcclApi nccl_{};
  DriverApi cu_{};
  ncclComm_t comm_ = nullptr;
  CUstream comm_stream_ = nullptr;
  CUevent ready_ = nullptr, done_ = nullptr;
  CUdeviceptr host_exchange_ = 0;
  std::string version_;
  bool finished_ = false;
  std::atomic<bool> aborting_{false};
  bool profiling_ = false, untimed_ = false;
  bool gather_group_open_ = false; // QueueGather's NCCL group, not yet launched
  double gather_group_bytes_ = 0;
  TimedPairs collective_times_, wait_times_;
};

} // namespace

absl::StatusOr<std::unique_ptr<RankGroup>> JoinNcclRanks(const RankInfo &info, int gpu) {
  absl::StatusOr<BootstrapOptions> bootstrap = BootstrapFromEnvironment(info);
  if (!bootstrap.ok())
    return bootstrap.status();
  auto group = std::make_unique<NcclRankGroup>(info);
  if (absl::Status s = group->Init(gpu, *bootstrap); !s.ok())
    return s;
  return std::unique_ptr<RankGroup>(std::move(group));
}

} // namespace tcc::trun
