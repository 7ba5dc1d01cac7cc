#include "runtime/initializers/Initializers.h"

#include "runtime/initializers/Dtypes.h"
#include "support/AffinityCpus.h"
#include "tcc/counter_rng.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

namespace tcc::trun {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

float Uniform(double scale, uint64_t key, int64_t index) {
  double u = tcc_rng_unit_double(tcc_rng_key_bits(key, index));
  float value = static_cast<float>(scale * (2.0 * u - 1.0));
  // Rounding to float can reach +scale; the spec says [-scale, scale).
  float limit = static_cast<float>(scale);
  if (value >= limit && limit > 0)
    value = std::nextafter(limit, 0.0f);
  return value;
}

// Box-Muller's radius and angle of pair `pair` (elements 2 pair, 2 pair + 1).
void NormalPair(uint64_t key, uint64_t pair, double &radius, double &theta) {
  double u1 = tcc_rng_unit_double(tcc_rng_key_bits(key, 2 * pair));
  double u2 = tcc_rng_unit_double(tcc_rng_key_bits(key, 2 * pair + 1));
  radius = std::sqrt(-2.0 * std::log(1.0 - u1)); // 1 - u1 is in (0, 1]
  theta = kTwoPi * u2;
}

float Normal(double scale, uint64_t key, int64_t index) {
  double radius, theta;
  NormalPair(key, static_cast<uint64_t>(index) / 2, radius, theta);
  double z =
      index % 2 == 0 ? radius * std::cos(theta) : radius * std::sin(theta);
  return static_cast<float>(scale * z);
}

// The key is computed once per tensor, not once per element.
float ValueAt(const tcc_tensor_desc &t, uint64_t key, int64_t index) {
  switch (t.init_kind) {
  case TCC_INIT_ONES:
    return 1.0f;
  case TCC_INIT_CONSTANT:
    return static_cast<float>(t.init_scale);
  case TCC_INIT_NORMAL:
    return Normal(t.init_scale, key, index);
  case TCC_INIT_UNIFORM:
    return Uniform(t.init_scale, key, index);
  case TCC_INIT_ZEROS:
  default: // ValidateDescriptor rejects unknown kinds
    return 0.0f;
  }
}

uint64_t InitKey(const tcc_tensor_desc &t, uint64_t run_seed) {
  return tcc_rng_stream_key(run_seed, TCC_RNG_DOMAIN_PARAM_INIT, t.init_seed);
}

// values[i] = element first_index + i for i in [begin, end): ValueAt's
// values, a normal pair's radius and angle computed once for both of its
// elements (the same expressions, so the same floats).
void FillRange(const tcc_tensor_desc &t, uint64_t key, float *values, int64_t first_index,
               int64_t begin, int64_t end) {
  int64_t i = begin;
  if (t.init_kind == TCC_INIT_NORMAL) {
    if (i < end && (first_index + i) % 2 != 0) {
      values[i] = ValueAt(t, key, first_index + i);
      ++i;
    }
    for (; i + 1 < end; i += 2) {
      double radius, theta;
      NormalPair(key, static_cast<uint64_t>(first_index + i) / 2, radius, theta);
      double even = radius * std::cos(theta), odd = radius * std::sin(theta);
      values[i] = static_cast<float>(t.init_scale * even);
      values[i + 1] = static_cast<float>(t.init_scale * odd);
    }
  }
  for (; i < end; ++i)
    values[i] = ValueAt(t, key, first_index + i);
}

} // namespace

int InitializerThreads() {
  // trun sets OMP_NUM_THREADS before a step loads (--threads, else the
  // CPUs it may use under its cgroup's quota): the fill then keeps within
  // what the run was given. A list ("4,2") or junk is not a count.
  if (const char *env = std::getenv("OMP_NUM_THREADS"); env != nullptr && *env != '\0') {
    char *end = nullptr;
    errno = 0;
    const long n = std::strtol(env, &end, 10);
    if (errno == 0 && *end == '\0' && n > 0)
      return static_cast<int>(std::min<long>(n, 64));
  }
  return std::clamp(tcc::AffinityCpus(), 1, 64);
}

std::string InitKindName(int32_t kind) {
  switch (kind) {
  case TCC_INIT_ZEROS:
    return "zeros";
  case TCC_INIT_ONES:
    return "ones";
  case TCC_INIT_NORMAL:
    return "normal";
  case TCC_INIT_UNIFORM:
    return "uniform";
  case TCC_INIT_CONSTANT:
    return "constant";
  default:
    return absl::StrCat("init(", kind, ")");
  }
}

float InitialValue(const tcc_tensor_desc &t, uint64_t run_seed, int64_t index) {
  return ValueAt(t, InitKey(t, run_seed), index);
}

absl::Status InitializeTensor(const tcc_tensor_desc &t, uint64_t run_seed,
                              void *data, int64_t first_index, int threads) {
  // An integer buffer (batch norm's num_batches_tracked) starts at 0 or 1.
  if (t.dtype == TCC_DTYPE_I64 &&
      (t.init_kind == TCC_INIT_ZEROS || t.init_kind == TCC_INIT_ONES)) {
    for (int64_t i = 0; i < t.num_elements; ++i)
      static_cast<int64_t *>(data)[i] = t.init_kind == TCC_INIT_ONES ? 1 : 0;
    return absl::OkStatus();
  }
  if (t.dtype != TCC_DTYPE_F32)
    return absl::UnimplementedError(
        absl::StrCat("cannot initialize '", t.name, "': dtype ",
                     DtypeName(t.dtype), " (this trun initializes f32 only)"));
  float *values = static_cast<float *>(data);
  const uint64_t key = InitKey(t, run_seed);
  const int64_t n = t.num_elements;
  // Chunks of 2^20 elements (even, so pairs stay whole) taken in turn by
  // the threads: each element's value depends on its index alone, so the
  // threads change nothing but the time (a 1B-parameter model: ~40 s of
  // Box-Muller on one core, 2026-12-07).
  constexpr int64_t kChunk = int64_t{1} << 20;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int wanted = static_cast<int>(
      std::min<int64_t>(threads > 0 ? threads : InitializerThreads(), chunks));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c = next++; c < chunks; c = next++)
      FillRange(t, key, values, first_index, c * kChunk, std::min(n, (c + 1) * kChunk));
  };
  std::vector<std::thread> helpers;
  for (int k = 1; k < wanted; ++k) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error &) {
      break; // no more threads to be had: the ones started (and this one) do the rest
    }
  }
  work();
  for (std::thread &h : helpers)
    h.join();
  return absl::OkStatus();
}

} // namespace tcc::trun
