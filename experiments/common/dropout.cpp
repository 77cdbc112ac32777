// Dropout from a counter-based hash (dropout.h).
#include "experiments/common/dropout.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/parallel_parts.h"

namespace wavetrain::experiments {
namespace {

// A 32-bit integer hash with good avalanche (the "lowbias32" constants found by Chris Wellons'
// hash-prospector); only 32-bit multiplies, so GCC vectorises the loop below.
inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x21f0aaadu;
  x ^= x >> 15;
  x *= 0xd35a2d97u;
  x ^= x >> 15;
  return x;
}

// m[j - first] for counters j in [first, end) of one 2^32 block. Compiled twice: with AVX2 (eight
// 32-bit multiplies at once) and for the baseline x86-64, whose SSE2 has no 32-bit lane multiply
// and leaves the loop scalar; the loader picks the one the CPU runs.
__attribute__((target_clones("avx2", "default"))) void fill_mask(float* m, uint32_t first, uint32_t count, uint32_t key,
                                                                 uint32_t threshold, float keep) {
  for (uint32_t i = 0; i < count; ++i) m[i] = hash32((first + i) * 0x9E3779B1u + key) >= threshold ? keep : 0.0f;
}

}  // namespace

at::Tensor dropout_mask(int64_t numel, double p, uint64_t seed) {
  if (!(p >= 0 && p < 1)) throw std::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p));
  at::Tensor mask = at::empty({numel}, at::kFloat);
  float* m = mask.data_ptr<float>();
  const float keep = static_cast<float>(1.0 / (1.0 - p));
  const uint32_t threshold = static_cast<uint32_t>(std::min(4294967295.0, std::floor(p * 4294967296.0)));
  at::parallel_for(0, numel, 1 << 16, [&](int64_t begin, int64_t end) {
    // Element j's counter is its low 32 bits, Weyl-stepped and offset by a key of the seed and its
    // high bits (a tensor of over 2^32 elements gets a fresh key per 2^32 block).
    for (int64_t block = begin; block < end;) {
      const int64_t block_end = std::min(end, ((block >> 32) + 1) << 32);
      const uint64_t k = seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>((block >> 32) + 1));
      const uint32_t key = hash32(static_cast<uint32_t>(k)) ^ static_cast<uint32_t>(k >> 32);
      fill_mask(m + block, static_cast<uint32_t>(block), static_cast<uint32_t>(block_end - block), key, threshold, keep);
      block = block_end;
    }
  });
  return mask;
}

at::Tensor dropout(const at::Tensor& x, double p) {
  if (p == 0) return x;
  if (!x.device().is_cpu()) return at::dropout(x, p, /*train=*/true);
  const at::Tensor mask = dropout_mask(x.numel(), p, next_random_seed()).view(x.sizes());
  return x * (x.scalar_type() == at::kFloat ? mask : mask.to(x.scalar_type()));
}

DropoutImpl::DropoutImpl(double p) : p_(p) {
  if (!(p >= 0 && p < 1)) throw std::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p));
}

at::Tensor DropoutImpl::forward(const at::Tensor& x) { return is_training() ? dropout(x, p_) : x; }

}  // namespace wavetrain::experiments
