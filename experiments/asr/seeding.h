// Seeds from tuples of integers, the same on every platform: splitmix64 applied along the tuple.
// The corpus draws an utterance's voice and text from (seed, split, index, stream), training draws
// an utterance's augmentation from (seed, epoch, item, stream): neither depends on thread counts,
// order of work, or the standard library's distributions.
#pragma once

#include <cstdint>
#include <random>

namespace wavetrain::experiments::asr {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t seed_of(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d);
}

// Uniform in [0, 1) and in [lo, hi) from the raw engine (the standard distributions differ
// between libraries, and a corpus or a batch must not).
inline double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0); }
inline double uniform(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * uniform01(rng); }

}  // namespace wavetrain::experiments::asr
