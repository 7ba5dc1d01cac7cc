// The MPI back end's all-reduce (trun's libtcc_mpi.so, through JoinMpiRanks
// and the tcc_collectives table a step calls) against a float64 reference,
// on fresh random inputs: run under mpirun with 2 or more ranks (ctest runs
// it with 2). Every rank makes every rank's input from (seed, rank), so each
// can compute the exact sum and mean in float64 and check its result:
//   f32 and f64 sums and means, counts of 1, 1000 and 1 << 20 elements;
//   bf16 and f16, summed in f32 and rounded once (within one rounding of
//   the reference), and a dtype the back end refuses (i32), its error kept
//   for trun's message (LastCollectiveError).
// Also SumOnHost and AllGather, which trun uses between steps.
// Prints one line per case; exit 0 when every rank passed.
#include "runtime/trun/dist/LaunchEnvironment.h"
#include "runtime/trun/dist/RankGroup.h"

#include <cmath>
#include <cstdio>
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

template <typename T, typename Store, typename Load>
void Check(const tcc_collectives &c, tcc_dtype dtype, const char *name, int64_t n,
           tcc_reduction reduction, uint64_t seed, Store store, Load load, double relative) {
  const int world = c.world_size;
  // What each rank feeds: its input rounded to T (the reference sums those).
  std::vector<double> reference(n, 0.0);
  std::vector<T> mine(n);
  for (int r = 0; r < world; ++r) {
    std::vector<double> in = Input(seed, r, n);
    for (int64_t i = 0; i < n; ++i) {
      T stored = store(in[i]);
      reference[i] += load(stored);
      if (r == c.rank)
        mine[i] = stored;
    }
  }
  if (reduction == TCC_REDUCE_MEAN)
    for (double &x : reference)
      x /= world;
  if (int32_t rc = c.all_reduce(c.context, mine.data(), n, dtype, reduction, nullptr)) {
    std::printf("rank %d: %s: all_reduce failed (%d)\n", c.rank, name, rc);
    ++failures;
    return;
  }
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    worst = std::max(worst, std::fabs(load(mine[i]) - reference[i]) /
                                std::max(1.0, std::fabs(reference[i])));
  Report(c.rank, std::string(name) + (reduction == TCC_REDUCE_MEAN ? " mean" : " sum") +
                     " of " + std::to_string(n),
         worst, relative);
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
  uint64_t seed = 7;
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20})
    for (tcc_reduction reduction : {TCC_REDUCE_SUM, TCC_REDUCE_MEAN}) {
      ++seed;
      Check<float>(c, TCC_DTYPE_F32, "f32", n, reduction, seed,
                   [](double x) { return static_cast<float>(x); },
                   [](float x) { return static_cast<double>(x); }, 1e-6);
      Check<double>(c, TCC_DTYPE_F64, "f64", n, reduction, seed,
                    [](double x) { return x; }, [](double x) { return x; }, 1e-14);
      // One rounding to 8 (bf16) or 11 (f16) significant bits at the end:
      // half an ulp, 2^-8 or 2^-11 of a value in [1, 2), plus the f32
      // sum's own error (the 5% slack).
      Check<uint16_t>(c, TCC_DTYPE_BF16, "bf16", n, reduction, seed,
                      [](double x) { return ToBf16(static_cast<float>(x)); }, FromBf16,
                      1.05 * std::ldexp(1.0, -8));
      Check<uint16_t>(c, TCC_DTYPE_F16, "f16", n, reduction, seed,
                      [](double x) { return ToHalf(static_cast<float>(x)); }, FromHalf,
                      1.05 * std::ldexp(1.0, -11));
    }
  int32_t dummy[4] = {1, 2, 3, 4};
  bool refused = c.all_reduce(c.context, dummy, 4, TCC_DTYPE_I32, TCC_REDUCE_SUM, nullptr) != 0;
  Report(rank, "i32 refused", refused ? 0.0 : 1.0, 0.0);
  // trun's message for the failed step call names the back end's error.
  Report(rank, "the refusal recorded for trun's message",
         LastCollectiveError().find("MPI all-reduce of 4 elements: all_reduce: dtype") == 0 ? 0.0
                                                                                           : 1.0,
         0.0);

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
