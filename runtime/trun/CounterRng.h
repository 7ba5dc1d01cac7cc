// Counter-based random numbers: value i of a stream is a pure function of
// (key, i), so results never depend on threading or on visiting order.
//
// Definition (all arithmetic mod 2^64):
//   Mix64(z)   = splitmix64 finalizer:
//                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//                z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//                return z ^ (z >> 31)
//   StreamKey(seed, domain, id) = Mix64(Mix64(Mix64(seed) ^ domain) ^ id)
//   Bits(key, i) = Mix64(key + (i + 1) * 0x9E3779B97F4A7C15)
//                  (the i-th output of splitmix64 seeded with key)
//   UnitDouble(b) = (b >> 11) * 2^-53, in [0, 1)
#ifndef TCC_RUNTIME_TRUN_COUNTERRNG_H
#define TCC_RUNTIME_TRUN_COUNTERRNG_H

#include <cstdint>

namespace tcc::trun::rng {

inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// Domains keep the streams of different uses apart for the same seed.
enum Domain : uint64_t {
  kParamInitDomain = 1, // id = tcc_tensor_desc::init_seed
  kShuffleDomain = 2,   // id = 0-based epoch
  kTokenWindowDomain = 3, // id = 0-based batch number (TokenBatches.h)
  kSampleDomain = 4,      // id = 0 (Sampler.h)
};

inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t StreamKey(uint64_t seed, uint64_t domain, uint64_t id) {
  return Mix64(Mix64(Mix64(seed) ^ domain) ^ id);
}

inline uint64_t Bits(uint64_t key, uint64_t counter) {
  return Mix64(key + (counter + 1) * kGoldenGamma);
}

inline double UnitDouble(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

} // namespace tcc::trun::rng

#endif // TCC_RUNTIME_TRUN_COUNTERRNG_H
