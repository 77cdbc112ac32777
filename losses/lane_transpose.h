// Internal to losses/: the layout changes of the lanes kernel of the mutual-information recursion
// (mutual_information_lanes.cpp): kTransposeLanes rows of the items, one per vector lane, to and
// from rows of [column][lane]. AVX2 8 x 8 transposes for float where the CPU has AVX2 (and the
// kernels are not capped below it, mutual_information.h), plain loops otherwise.
#pragma once

#include <cstdint>

namespace wavetrain::losses::detail {

constexpr int64_t kTransposeLanes = 8;

// dst[t * 8 + l] for t in [0, Tc): src[l][t - shift] where src[l] != nullptr and shift <= t < hi[l],
// `fill` elsewhere.
void gather_lanes(const float* const* src, const int64_t* hi, int64_t shift, float fill, float* dst, int64_t Tc);
void gather_lanes(const double* const* src, const int64_t* hi, int64_t shift, double fill, double* dst, int64_t Tc);
// dst[l][t] = src[t * 8 + l] for t in [0, hi[l]) where dst[l] != nullptr; hi[l] <= Tc.
void scatter_lanes(const float* src, float* const* dst, const int64_t* hi, int64_t Tc);
void scatter_lanes(const double* src, double* const* dst, const int64_t* hi, int64_t Tc);

}  // namespace wavetrain::losses::detail
