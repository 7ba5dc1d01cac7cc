/*
 * Counter-based random bits shared by everything that must agree on them bit
 * for bit: the compiled CPU step, a GPU step, and the reference interpreter
 * (dropout masks). Value `counter` of a stream is a pure function of
 * (seed, stream, counter), so masks never depend on threads, visiting order
 * or the device. Plain C (static inline), usable from C and C++.
 *
 * Definition (all arithmetic on uint64_t, i.e. mod 2^64; G = 0x9E3779B97F4A7C15):
 *   mix64(z)   = splitmix64 finalizer:
 *                  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
 *                  z = (z ^ (z >> 27)) * 0x94D049BB133111EB
 *                  return z ^ (z >> 31)
 *   key_bits(key, counter)
 *              = mix64(key + (counter + 1) * G)
 *                (the counter-th output of splitmix64 seeded with key)
 *   bits(seed, stream, counter)
 *              = key_bits(mix64(mix64(seed) ^ stream), counter)
 *   uniform01(seed, stream, counter)
 *              = (bits >> 40) * 2^-24, a float in [0, 1): the top 24 bits,
 *                exact in float, so every device computes the same value.
 *
 * trun's host-side streams (parameter initializers, data order, token
 * windows, sampling) take their key from (seed, domain, id) and draw doubles:
 *   stream_key(seed, domain, id) = mix64(mix64(mix64(seed) ^ domain) ^ id)
 *   unit_double(b)               = (b >> 11) * 2^-53, in [0, 1)
 * value i of such a stream is key_bits(stream_key(...), i). The domain keeps
 * the streams of different uses apart for one seed (TCC_RNG_DOMAIN_* below).
 *
 * Dropout (tg.dropout, rate in [0, 1)) at row-major position i of its result:
 *   keep(i) = uniform01(rng_seed ^ mix64(op_id), step, i) >= rate
 *             (compared exactly, in double), equivalently
 *             (bits >> 40) >= ceil(rate * 2^24)
 *   out(i)  = keep(i) ? x(i) * (1 / (1 - rate)) : 0
 * rng_seed is the run's seed (tcc_step_args.rng_seed), step the 0-based
 * optimizer step, op_id the FNV-1a 64 hash of the model node's name
 * (tcc_fnv1a64 below), so each dropout node has its own mask every step and
 * the backward pass recomputes the forward's mask.
 */
#ifndef TCC_COUNTER_RNG_H
#define TCC_COUNTER_RNG_H

#include <stdint.h>

#define TCC_RNG_GAMMA 0x9E3779B97F4A7C15ull

static inline uint64_t tcc_rng_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline uint64_t tcc_rng_key_bits(uint64_t key, uint64_t counter) {
  return tcc_rng_mix64(key + (counter + 1) * TCC_RNG_GAMMA);
}

static inline uint64_t tcc_rng_bits(uint64_t seed, uint64_t stream,
                                    uint64_t counter) {
  return tcc_rng_key_bits(tcc_rng_mix64(tcc_rng_mix64(seed) ^ stream),
                          counter);
}

/* trun's domains (the id each one takes in parentheses). */
#define TCC_RNG_DOMAIN_PARAM_INIT 1ull   /* tcc_tensor_desc.init_seed */
#define TCC_RNG_DOMAIN_SHUFFLE 2ull      /* 0-based epoch */
#define TCC_RNG_DOMAIN_TOKEN_WINDOW 3ull /* 0-based batch number */
#define TCC_RNG_DOMAIN_SAMPLE 4ull       /* 0 (one stream per sampling run) */

static inline uint64_t tcc_rng_stream_key(uint64_t seed, uint64_t domain,
                                          uint64_t id) {
  return tcc_rng_mix64(tcc_rng_mix64(tcc_rng_mix64(seed) ^ domain) ^ id);
}

/* The top 53 bits of `bits` as a double in [0, 1) (exact: 2^-53 steps). */
static inline double tcc_rng_unit_double(uint64_t bits) {
  return (double)(bits >> 11) * (1.0 / 9007199254740992.0);
}

static inline float tcc_rng_uniform01(uint64_t seed, uint64_t stream,
                                      uint64_t counter) {
  return (float)(tcc_rng_bits(seed, stream, counter) >> 40) *
         (1.0f / 16777216.0f);
}

/* 1 if dropout keeps position `index`, 0 if it zeroes it. */
static inline int tcc_dropout_keep(uint64_t rng_seed, uint64_t op_id,
                                   uint64_t step, uint64_t index,
                                   double rate) {
  return (double)tcc_rng_uniform01(rng_seed ^ tcc_rng_mix64(op_id), step,
                                   index) >= rate;
}

/* FNV-1a, 64 bit, of `size` bytes: the op_id of a dropout node is this hash
 * of the node's name (stable across runs, compilers and machines). */
static inline uint64_t tcc_fnv1a64(const char *data, uint64_t size) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint64_t i = 0; i < size; ++i) {
    h ^= (uint64_t)(unsigned char)data[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

#endif /* TCC_COUNTER_RNG_H */
