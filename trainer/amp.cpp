// Mixed-precision policy and the autocast guard; see amp.h.
#include "trainer/amp.h"

#include <stdexcept>

#include "trainer/torch_compat.h"

namespace wavetrain {

Precision parse_precision(const std::string& text) {
  if (text == "32") return Precision::Fp32;
  if (text == "16-mixed") return Precision::Fp16Mixed;
  if (text == "bf16-mixed") return Precision::Bf16Mixed;
  throw std::invalid_argument("trainer.precision='" + text + "' is not a precision: expected 32, 16-mixed or bf16-mixed");
}

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32: return "32";
    case Precision::Fp16Mixed: return "16-mixed";
    case Precision::Bf16Mixed: return "bf16-mixed";
  }
  return "?";
}

std::string AmpPolicy::describe() const {
  std::string s = std::string(c10::DeviceTypeName(device_type, /*lower_case=*/true)) + ": ";
  if (!autocast) return s + "fp32 (precision " + precision_name(requested) + ")";
  s += dtype == at::kHalf ? "fp16 autocast" : "bf16 autocast";
  return s + (grad_scaler ? " with gradient scaling" : "") + " (precision " + precision_name(requested) + ")";
}

AmpPolicy resolve_amp_policy(Precision precision, bool amp_on_mps, c10::DeviceType device, const AmpCapabilities& caps) {
  AmpPolicy p;
  p.device_type = device;
  p.requested = precision;
  if (precision == Precision::Fp32) return p;
  const std::string asked = "precision " + precision_name(precision);

  switch (device) {
    case c10::DeviceType::CUDA:
      if (precision == Precision::Bf16Mixed && !caps.cuda_bf16)
        throw std::invalid_argument(asked + " needs a GPU with bfloat16 (compute capability 8.0 or newer); " +
                                    (caps.cuda_name.empty() ? std::string("this one") : caps.cuda_name) +
                                    " has none. Use trainer.precision=16-mixed");
      p.autocast = true;
      p.dtype = precision == Precision::Fp16Mixed ? at::kHalf : at::kBFloat16;
      p.grad_scaler = precision == Precision::Fp16Mixed;  // fp16 gradients underflow without it
      return p;

    case c10::DeviceType::MPS:
      if (!amp_on_mps) {
        p.warnings.push_back(asked + " is ignored on mps: it runs fp32 unless trainer.amp_on_mps=true");
        return p;
      }
      if (!caps.mps_autocast) {
        p.warnings.push_back(asked + " with amp_on_mps needs LibTorch 2.5 or newer for MPS autocast; running fp32");
        return p;
      }
      p.autocast = true;
      p.dtype = precision == Precision::Fp16Mixed ? at::kHalf : at::kBFloat16;
      p.grad_scaler = precision == Precision::Fp16Mixed;
      return p;

    case c10::DeviceType::CPU:
      if (precision == Precision::Fp16Mixed)
        p.warnings.push_back(asked + " is not available on cpu (CPU autocast is bfloat16); using bf16-mixed");
      p.autocast = true;
      p.dtype = at::kBFloat16;
      return p;

    default:
      p.warnings.push_back(asked + " is not supported on " + c10::DeviceTypeName(device, true) + "; running fp32");
      return p;
  }
}

AmpCapabilities probe_amp_capabilities(const c10::Device& device) {
  AmpCapabilities caps;
  caps.mps_autocast = compat::autocast_supported(c10::DeviceType::MPS);
  if (device.is_cuda() && compat::cuda_built()) {
    const int index = device.has_index() ? device.index() : 0;
    caps.cuda_bf16 = compat::cuda_supports_bf16(index);
    caps.cuda_name = compat::cuda_device_properties(index).name;
  }
  return caps;
}

AutocastGuard::AutocastGuard(const AmpPolicy& policy) : type_(policy.device_type) {
  if (!policy.autocast) return;
  active_ = true;
  previous_enabled_ = compat::autocast_enabled(type_);
  previous_dtype_ = compat::autocast_dtype(type_);
  compat::set_autocast_dtype(type_, policy.dtype);
  compat::set_autocast_enabled(type_, true);
  compat::autocast_increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // Cached low-precision weight copies are only valid while the weights do not change, i.e.
  // within one forward pass: drop them when the outermost region ends.
  if (compat::autocast_decrement_nesting() == 0) compat::autocast_clear_cache();
  compat::set_autocast_enabled(type_, previous_enabled_);
  compat::set_autocast_dtype(type_, previous_dtype_);
}

at::Tensor reduced_to_fp32(const at::Tensor& x) {
  const at::ScalarType t = x.scalar_type();
  return (t == at::kHalf || t == at::kBFloat16) ? x.to(at::kFloat) : x;
}

}  // namespace wavetrain
