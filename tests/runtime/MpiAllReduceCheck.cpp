// The MPI back end's collectives (trun's libtcc_mpi.so, through
// JoinMpiRanks and the tcc_collectives table a step calls) against a
// float64 reference, on fresh random inputs (the seed, from the clock or
// $MPI_CHECK_SEED, is printed): run under mpirun with 2 or more ranks (ctest
// runs it with 2). Every rank makes every rank's input from (seed, rank),
// so each can compute the exact sum and mean in float64 and check its
// result:
//   all_reduce and reduce_scatter: f32 and f64 sums and means (all_reduce
//   of 1, 1000 and 1 << 20 elements, reduce_scatter to 1, 3, 1000 and
//   1 << 19 elements per rank); bf16 and f16, summed in f32 and rounded
//   once (within one rounding of the reference); a dtype the back end
//   refuses (i32), its error kept for trun's message (LastCollectiveError);
//   all_gather of every dtype, byte for byte, and an unknown dtype refused.
// Also SumOnHost and AllGather, which trun uses between steps.
// Prints one line per case; exit 0 when every rank passed.
#include "runtime/initializers/Dtypes.h"
#include "runtime/trun/dist/LaunchEnvironment.h"
#include "runtime/trun/dist/RankGroup.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace tcc::trun;

uint16_t ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
double FromBf16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t ToHalf(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
double FromHalf(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<double>(h);
}

// Rank r's input: n values in [-1, 1) from (seed, r).
std::vector<double> Input(uint64_t seed, int rank, int64_t n) {
  std::mt19937_64 rng(seed * 1000003 + rank);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double &x : v)
    x = u(rng);
  return v;
}

int failures = 0;

void Report(int rank, const std::string &what, double worst, double tolerance) {
  bool ok = worst <= tolerance;
  failures += !ok;
  if (rank == 0 || !ok)
    std::printf("rank %d: %s: %s, max error %.3g (tolerance %.3g)\n", rank, what.c_str(),
                ok ? "ok" : "FAIL", worst, tolerance);
}

enum class Collective { kAllReduce, kReduceScatter };

// all_reduce of n elements, or reduce_scatter to n elements per rank (of
// world * n), checked against the float64 sum or mean of what every rank
// fed: its input rounded to T.
template <typename T, typename Store, typename Load>
void Check(const tcc_collectives &c, Collective collective, tcc_dtype dtype, const char *name,
           int64_t n, tcc_reduction reduction, uint64_t seed, Store store, Load load,
           double relative) {
  const int world = c.world_size;
  const bool scatter = collective == Collective::kReduceScatter;
  const int64_t total = scatter ? world * n : n;
  const int64_t first = scatter ? c.rank * n : 0; // of this rank's result
  std::vector<double> reference(total, 0.0);
  std::vector<T> mine(total);
  for (int r = 0; r < world; ++r) {
    std::vector<double> in = Input(seed, r, total);
    for (int64_t i = 0; i < total; ++i) {
      T stored = store(in[i]);
      reference[i] += load(stored);
      if (r == c.rank)
        mine[i] = stored;
    }
  }
  if (reduction == TCC_REDUCE_MEAN)
    for (double &x : reference)
      x /= world;
  std::string what = std::string(scatter ? "reduce_scatter " : "all_reduce ") + name +
                     (reduction == TCC_REDUCE_MEAN ? " mean" : " sum") +
                     (scatter ? " to " : " of ") + std::to_string(n);
  std::vector<T> result;
  int32_t rc = 0;
  bool send_changed = false;
  if (scatter) {
    const std::vector<T> sent = mine;
    result.assign(n, store(12345.0)); // not a possible result
    rc = c.reduce_scatter(c.context, mine.data(), result.data(), n, dtype, reduction, nullptr);
    send_changed = std::memcmp(sent.data(), mine.data(), total * sizeof(T)) != 0;
  } else {
    result = mine;
    rc = c.all_reduce(c.context, result.data(), n, dtype, reduction, nullptr);
  }
  if (rc) {
    std::printf("rank %d: %s: failed (%d): %s\n", c.rank, what.c_str(), rc,
                LastCollectiveError().c_str());
    ++failures;
    return;
  }
  if (send_changed) {
    std::printf("rank %d: %s: FAIL, the send buffer changed\n", c.rank, what.c_str());
    ++failures;
  }
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    worst = std::max(worst, std::fabs(load(result[i]) - reference[first + i]) /
                                std::max(1.0, std::fabs(reference[first + i])));
  Report(c.rank, what, worst, relative);
}

void CheckFloatDtypes(const tcc_collectives &c, Collective collective, int64_t n,
                      tcc_reduction reduction, uint64_t seed) {
  Check<float>(c, collective, TCC_DTYPE_F32, "f32", n, reduction, seed,
               [](double x) { return static_cast<float>(x); },
               [](float x) { return static_cast<double>(x); }, 1e-6);
  Check<double>(c, collective, TCC_DTYPE_F64, "f64", n, reduction, seed,
                [](double x) { return x; }, [](double x) { return x; }, 1e-14);
  // One rounding to 8 (bf16) or 11 (f16) significant bits at the end:
  // half an ulp, 2^-8 or 2^-11 of a value in [1, 2), plus the f32 sum's
  // own error (the 5% slack).
  Check<uint16_t>(c, collective, TCC_DTYPE_BF16, "bf16", n, reduction, seed,
                  [](double x) { return ToBf16(static_cast<float>(x)); }, FromBf16,
                  1.05 * std::ldexp(1.0, -8));
  Check<uint16_t>(c, collective, TCC_DTYPE_F16, "f16", n, reduction, seed,
                  [](double x) { return ToHalf(static_cast<float>(x)); }, FromHalf,
                  1.05 * std::ldexp(1.0, -11));
}

// all_gather of `count` elements of `dtype` per rank: random bytes from
// (seed, rank), so every rank knows what each sent; exact.
void CheckAllGather(const tcc_collectives &c, tcc_dtype dtype, int64_t count, uint64_t seed) {
  const int64_t bytes = count * DtypeSize(dtype);
  auto bytes_of = [&](int r) {
    std::mt19937_64 rng(seed * 1000003 + r);
    std::vector<unsigned char> v(bytes);
    for (unsigned char &b : v)
      b = static_cast<unsigned char>(rng());
    return v;
  };
  std::vector<unsigned char> expected;
  for (int r = 0; r < c.world_size; ++r) {
    std::vector<unsigned char> part = bytes_of(r);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  const std::vector<unsigned char> mine = bytes_of(c.rank);
  std::vector<unsigned char> all(expected.size(), 0);
  std::string what = "all_gather " + DtypeName(dtype) + " of " + std::to_string(count);
  if (int32_t rc = c.all_gather(c.context, mine.data(), all.data(), count, dtype, nullptr)) {
    std::printf("rank %d: %s: failed (%d): %s\n", c.rank, what.c_str(), rc,
                LastCollectiveError().c_str());
    ++failures;
    return;
  }
  int64_t wrong = 0;
  for (size_t i = 0; i < all.size(); ++i)
    wrong += all[i] != expected[i];
  Report(c.rank, what + " (bytes wrong)", static_cast<double>(wrong), 0.0);
}

// A refused call returns nonzero, and trun's message for the failed step
// call names the back end's error (which starts with `error_start`).
void CheckRefused(int rank, const std::string &what, int32_t rc, const std::string &error_start) {
  Report(rank, what + " refused", rc != 0 ? 0.0 : 1.0, 0.0);
  bool recorded = LastCollectiveError().rfind(error_start, 0) == 0;
  if (!recorded)
    std::printf("rank %d: recorded error: %s\n", rank, LastCollectiveError().c_str());
  Report(rank, what + ": the refusal recorded for trun's message", recorded ? 0.0 : 1.0, 0.0);
}

} // namespace

int main() {
  absl::StatusOr<RankInfo> info = ReadLaunchEnvironment(ProcessEnvironment());
  if (!info.ok() || info->world_size < 2) {
    std::fprintf(stderr, "run under mpirun with 2 or more ranks (%s)\n",
                 info.ok() ? "one rank" : std::string(info.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<RankGroup>> group = JoinMpiRanks(*info);
  if (!group.ok()) {
    std::fprintf(stderr, "%s\n", std::string(group.status().message()).c_str());
    return 1;
  }
  const tcc_collectives &c = *(*group)->step_collectives();
  const int rank = c.rank;
  // Fresh inputs each run: rank 0's clock (or $MPI_CHECK_SEED, to repeat a
  // run), shared through SumOnHost (exact below 2^53).
  std::vector<double> shared_seed = {0.0};
  if (rank == 0) {
    const char *fixed = std::getenv("MPI_CHECK_SEED");
    shared_seed[0] = fixed && *fixed
                         ? static_cast<double>(std::strtoull(fixed, nullptr, 10) % (1ull << 40))
                         : static_cast<double>(
                               std::chrono::system_clock::now().time_since_epoch().count() %
                               (1ll << 40));
  }
  if (absl::Status s = (*group)->SumOnHost(shared_seed); !s.ok()) {
    std::fprintf(stderr, "sharing the seed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  uint64_t seed = static_cast<uint64_t>(shared_seed[0]);
  if (rank == 0)
    std::printf("seed %llu (MPI_CHECK_SEED=%llu repeats this run)\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20})
    for (tcc_reduction reduction : {TCC_REDUCE_SUM, TCC_REDUCE_MEAN})
      CheckFloatDtypes(c, Collective::kAllReduce, n, reduction, ++seed);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{1} << 19})
    for (tcc_reduction reduction : {TCC_REDUCE_SUM, TCC_REDUCE_MEAN})
      CheckFloatDtypes(c, Collective::kReduceScatter, n, reduction, ++seed);
  for (tcc_dtype dtype : {TCC_DTYPE_F32, TCC_DTYPE_F64, TCC_DTYPE_I32, TCC_DTYPE_I64,
                          TCC_DTYPE_U8, TCC_DTYPE_BF16, TCC_DTYPE_F16})
    for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{1} << 18})
      CheckAllGather(c, dtype, count, ++seed);

  int32_t dummy[4] = {1, 2, 3, 4};
  CheckRefused(rank, "all_reduce i32",
               c.all_reduce(c.context, dummy, 4, TCC_DTYPE_I32, TCC_REDUCE_SUM, nullptr),
               "MPI all-reduce of 4 elements: all_reduce: dtype");
  std::vector<int32_t> sent(c.world_size, 1), received(c.world_size, 0);
  CheckRefused(rank, "reduce_scatter i32",
               c.reduce_scatter(c.context, sent.data(), received.data(), 1, TCC_DTYPE_I32,
                                TCC_REDUCE_SUM, nullptr),
               "MPI reduce-scatter to 1 elements per rank: reduce_scatter: dtype");
  CheckRefused(rank, "all_gather of an unknown dtype",
               c.all_gather(c.context, sent.data(), received.data(), 1, static_cast<tcc_dtype>(99),
                            nullptr),
               "MPI all-gather of 1 elements per rank: unknown dtype 99");

  std::vector<double> sums = {1.0 * rank, 0.5};
  absl::Status s = (*group)->SumOnHost(sums);
  double expect0 = c.world_size * (c.world_size - 1) / 2.0;
  Report(rank, "SumOnHost", s.ok() ? std::fabs(sums[0] - expect0) + std::fabs(sums[1] - 0.5 * c.world_size) : 1.0,
         0.0);
  absl::StatusOr<std::vector<std::string>> all =
      (*group)->AllGather(std::string(3, static_cast<char>('a' + rank)));
  double gathered_wrong = all.ok() ? 0.0 : 1.0;
  for (int r = 0; all.ok() && r < c.world_size; ++r)
    gathered_wrong += (*all)[r] != std::string(3, static_cast<char>('a' + r));
  Report(rank, "AllGather", gathered_wrong, 0.0);

  std::vector<double> total = {static_cast<double>(failures)};
  (void)(*group)->SumOnHost(total);
  if (rank == 0)
    std::printf("%s: %d failed checks over %d ranks\n", total[0] == 0 ? "PASS" : "FAIL",
                static_cast<int>(total[0]), c.world_size);
  (void)(*group)->Finish();
  return total[0] == 0 ? 0 : 1;
}
