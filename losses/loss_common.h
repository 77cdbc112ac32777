// Helpers shared by the loss implementations in losses/ (not part of the public API).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <stdexcept>
#include <string>

namespace wavetrain::losses::detail {

// Autocast off for the duration (the same dispatch keys in every LibTorch version), and half or
// bfloat16 inputs lifted to fp32: these losses are not accurate in 16 bits.
struct Fp32Region {
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
};

inline at::Tensor full_precision(const at::Tensor& x) {
  const at::ScalarType t = x.scalar_type();
  return (t == at::kHalf || t == at::kBFloat16) ? x.to(at::kFloat) : x;
}

inline void check_pair(const at::Tensor& pred, const at::Tensor& target, const char* what) {
  if (!pred.sizes().equals(target.sizes()))
    throw std::invalid_argument(std::string(what) + ": prediction " + c10::str(pred.sizes()) + " and target " +
                                c10::str(target.sizes()) + " differ in shape");
  if (pred.dim() < 1 || pred.size(-1) < 1) throw std::invalid_argument(std::string(what) + ": empty signal");
}

}  // namespace wavetrain::losses::detail
