#include "runtime/initializers/Initializers.h"

#include "runtime/initializers/Dtypes.h"
#include "tcc/counter_rng.h"

#include "absl/strings/str_cat.h"

#include <cmath>

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

float Normal(double scale, uint64_t key, int64_t index) {
  uint64_t pair = static_cast<uint64_t>(index) / 2;
  double u1 = tcc_rng_unit_double(tcc_rng_key_bits(key, 2 * pair));
  double u2 = tcc_rng_unit_double(tcc_rng_key_bits(key, 2 * pair + 1));
  double radius = std::sqrt(-2.0 * std::log(1.0 - u1)); // 1 - u1 is in (0, 1]
  double theta = kTwoPi * u2;
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

} // namespace

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
                              void *data, int64_t first_index) {
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
  uint64_t key = InitKey(t, run_seed);
  for (int64_t i = 0; i < t.num_elements; ++i)
    values[i] = ValueAt(t, key, first_index + i);
  return absl::OkStatus();
}

} // namespace tcc::trun
