// libtcc_mpi.so: trun's MPI back end (MpiPlugin.h), over MPI_COMM_WORLD.
#include "runtime/trun/dist/mpi/MpiPlugin.h"

// The C API only: Open MPI's and MPICH's deprecated C++ bindings need
// their own library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string &LastError() {
  static std::string error;
  return error;
}

int32_t Failed(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "MPI error %d", code);
  LastError() = std::string(what) + " failed: " + text;
  return 1;
}

int32_t Init(int32_t *rank, int32_t *world_size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided))
      return Failed("MPI_Init_thread", rc);
  }
  // Errors come back to trun, which names the step and the rank.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int r = 0, n = 0;
  if (int rc = MPI_Comm_rank(MPI_COMM_WORLD, &r))
    return Failed("MPI_Comm_rank", rc);
  if (int rc = MPI_Comm_size(MPI_COMM_WORLD, &n))
    return Failed("MPI_Comm_size", rc);
  *rank = r;
  *world_size = n;
  return 0;
}

// 16-bit floats as float and back (round to nearest even, NaN kept).
float Bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
float HalfToFloat(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}
uint16_t FloatToHalf(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

// MPI counts are int: collectives of more elements go in pieces of at
// most this many (and at most INT_MAX in all across the ranks).
constexpr int64_t kMaxPiece = INT_MAX / 2;

int WorldSize() {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  return world;
}

int32_t SumInPlace(void *buffer, int64_t count, MPI_Datatype type, int64_t element_bytes) {
  char *p = static_cast<char *>(buffer);
  for (int64_t done = 0; done < count;) {
    int piece = static_cast<int>(std::min<int64_t>(count - done, kMaxPiece));
    if (int rc = MPI_Allreduce(MPI_IN_PLACE, p + done * element_bytes, piece, type, MPI_SUM,
                               MPI_COMM_WORLD))
      return Failed("MPI_Allreduce", rc);
    done += piece;
  }
  return 0;
}

// This rank's part (`count` elements) of the sum of every rank's `send`
// (world * count elements) into `recv`.
int32_t SumScattered(const void *send, void *recv, int64_t count, MPI_Datatype type,
                     int64_t element_bytes) {
  int world = WorldSize();
  if (count <= INT_MAX / world) {
    if (int rc = MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), type, MPI_SUM,
                                          MPI_COMM_WORLD))
      return Failed("MPI_Reduce_scatter_block", rc);
    return 0;
  }
  // Too many for one call: each rank's part is reduced to it in pieces.
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *in = static_cast<const char *>(send);
  char *out = static_cast<char *>(recv);
  for (int64_t done = 0; done < count;) {
    int piece = static_cast<int>(std::min<int64_t>(count - done, kMaxPiece));
    for (int root = 0; root < world; ++root)
      if (int rc = MPI_Reduce(in + (root * count + done) * element_bytes,
                              root == rank ? out + done * element_bytes : nullptr, piece, type,
                              MPI_SUM, root, MPI_COMM_WORLD))
        return Failed("MPI_Reduce", rc);
    done += piece;
  }
  return 0;
}

template <typename T> void Scale(T *values, int64_t count, double factor) {
  for (int64_t i = 0; i < count; ++i)
    values[i] = static_cast<T>(values[i] * factor);
}

double ReductionFactor(tcc_reduction reduction) {
  return reduction == TCC_REDUCE_MEAN ? 1.0 / WorldSize() : 1.0;
}

// bf16 and f16 are summed in f32 (MPI has no 16-bit float) and rounded
// once at the end, scaled by `factor` (the mean).
std::vector<float> Widen(const void *halves, int64_t count, bool bf16) {
  const uint16_t *h = static_cast<const uint16_t *>(halves);
  std::vector<float> wide(count);
  for (int64_t i = 0; i < count; ++i)
    wide[i] = bf16 ? Bf16ToFloat(h[i]) : HalfToFloat(h[i]);
  return wide;
}
void Narrow(const std::vector<float> &wide, double factor, bool bf16, void *halves) {
  uint16_t *h = static_cast<uint16_t *>(halves);
  for (size_t i = 0; i < wide.size(); ++i) {
    float v = static_cast<float>(wide[i] * factor);
    h[i] = bf16 ? FloatToBf16(v) : FloatToHalf(v);
  }
}

int32_t RefuseDtype(const char *collective, tcc_dtype dtype) {
  LastError() = std::string(collective) + ": dtype " + std::to_string(dtype) +
                " is not a floating-point type (f32, f64, bf16, f16)";
  return 1;
}

int32_t AllReduce(void *, void *buffer, int64_t count, tcc_dtype dtype, tcc_reduction reduction,
                  void *) {
  double factor = ReductionFactor(reduction);
  switch (dtype) {
  case TCC_DTYPE_F32:
    if (int32_t rc = SumInPlace(buffer, count, MPI_FLOAT, 4))
      return rc;
    if (factor != 1.0)
      Scale(static_cast<float *>(buffer), count, factor);
    return 0;
  case TCC_DTYPE_F64:
    if (int32_t rc = SumInPlace(buffer, count, MPI_DOUBLE, 8))
      return rc;
    if (factor != 1.0)
      Scale(static_cast<double *>(buffer), count, factor);
    return 0;
  case TCC_DTYPE_BF16:
  case TCC_DTYPE_F16: {
    bool bf16 = dtype == TCC_DTYPE_BF16;
    std::vector<float> wide = Widen(buffer, count, bf16);
    if (int32_t rc = SumInPlace(wide.data(), count, MPI_FLOAT, 4))
      return rc;
    Narrow(wide, factor, bf16, buffer);
    return 0;
  }
  default:
    return RefuseDtype("all_reduce", dtype);
  }
}

int32_t ReduceScatter(void *, const void *send, void *recv, int64_t recv_count, tcc_dtype dtype,
                      tcc_reduction reduction, void *) {
  if (recv_count < 0) {
    LastError() = "reduce_scatter: negative count " + std::to_string(recv_count);
    return 1;
  }
  double factor = ReductionFactor(reduction);
  switch (dtype) {
  case TCC_DTYPE_F32:
    if (int32_t rc = SumScattered(send, recv, recv_count, MPI_FLOAT, 4))
      return rc;
    if (factor != 1.0)
      Scale(static_cast<float *>(recv), recv_count, factor);
    return 0;
  case TCC_DTYPE_F64:
    if (int32_t rc = SumScattered(send, recv, recv_count, MPI_DOUBLE, 8))
      return rc;
    if (factor != 1.0)
      Scale(static_cast<double *>(recv), recv_count, factor);
    return 0;
  case TCC_DTYPE_BF16:
  case TCC_DTYPE_F16: {
    bool bf16 = dtype == TCC_DTYPE_BF16;
    std::vector<float> wide = Widen(send, recv_count * WorldSize(), bf16);
    std::vector<float> part(recv_count);
    if (int32_t rc = SumScattered(wide.data(), part.data(), recv_count, MPI_FLOAT, 4))
      return rc;
    Narrow(part, factor, bf16, recv);
    return 0;
  }
  default:
    return RefuseDtype("reduce_scatter", dtype);
  }
}

int32_t AllGather(const void *mine, int64_t bytes, void *all) {
  if (bytes < 0) {
    LastError() = "all_gather: negative size " + std::to_string(bytes);
    return 1;
  }
  int world = WorldSize();
  if (bytes <= INT_MAX / world) {
    if (int rc = MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all,
                               static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD))
      return Failed("MPI_Allgather", rc);
    return 0;
  }
  // Too many for one call: each rank broadcasts its part in pieces.
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char *out = static_cast<char *>(all);
  std::memcpy(out + rank * bytes, mine, static_cast<size_t>(bytes));
  for (int root = 0; root < world; ++root)
    for (int64_t done = 0; done < bytes;) {
      int piece = static_cast<int>(std::min<int64_t>(bytes - done, kMaxPiece));
      if (int rc = MPI_Bcast(out + root * bytes + done, piece, MPI_BYTE, root, MPI_COMM_WORLD))
        return Failed("MPI_Bcast", rc);
      done += piece;
    }
  return 0;
}

int32_t Broadcast(void *buffer, int64_t count, int32_t root) {
  if (count > INT_MAX) {
    LastError() = "broadcast: more than INT_MAX bytes";
    return 1;
  }
  if (int rc = MPI_Bcast(buffer, static_cast<int>(count), MPI_BYTE, root, MPI_COMM_WORLD))
    return Failed("MPI_Bcast", rc);
  return 0;
}

int32_t Finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    if (int rc = MPI_Finalize())
      return Failed("MPI_Finalize", rc);
  return 0;
}

void Abort(int32_t code) { MPI_Abort(MPI_COMM_WORLD, code); }

const char *ErrorText() { return LastError().c_str(); }

const char *LibraryVersion() {
  static std::string version;
  if (version.empty()) {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int length = 0;
    MPI_Get_library_version(text, &length);
    version = text;
    version = version.substr(0, version.find_first_of("\n\r"));
  }
  return version.c_str();
}

const tcc_mpi_plugin kPlugin = {sizeof(tcc_mpi_plugin), Init,     AllReduce, AllGather,
                                Broadcast,              Finalize, Abort,     ErrorText,
                                LibraryVersion,         ReduceScatter};

} // namespace

extern "C" __attribute__((visibility("default"))) const tcc_mpi_plugin *tcc_mpi_plugin_get(void) {
  return &kPlugin;
}
