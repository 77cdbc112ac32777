// Mixed precision, decided per device at the trainer's call site and never inside a model.
//
//   precision    cuda                          mps (amp_on_mps=true)          cpu
//   32           fp32                          fp32                           fp32
//   16-mixed     fp16 autocast + grad scaler   fp16 autocast + grad scaler*   bf16 autocast (warning)
//   bf16-mixed   bf16 autocast (error if the   bf16 autocast*                 bf16 autocast
//                GPU lacks bf16)
//   * with LibTorch 2.5+ (MPS autocast); otherwise a warning and fp32. With amp_on_mps=false
//     (the default) MPS always runs fp32, with a warning if mixed precision was asked for.
//
// Losses run in fp32 outside autocast: the trainer enters AutocastGuard around the forward pass
// only. Debian's 1.13 CPU autocast leaves softmax, log_softmax, layer_norm, group_norm, sum and exp
// in whatever dtype arrives (bf16 after a Linear), so models pass such inputs through
// reduced_to_fp32() first.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace wavetrain {

enum class Precision { Fp32, Fp16Mixed, Bf16Mixed };

// "32", "16-mixed", "bf16-mixed"; throws std::invalid_argument naming trainer.precision otherwise.
Precision parse_precision(const std::string& text);
std::string precision_name(Precision p);

// What the device can do; the inputs of the policy besides the request. Probed at run time.
struct AmpCapabilities {
  bool cuda_bf16 = false;     // compute capability 8.0+
  bool mps_autocast = false;  // LibTorch 2.5+
  std::string cuda_name;      // for messages
};

struct AmpPolicy {
  c10::DeviceType device_type = c10::DeviceType::CPU;
  Precision requested = Precision::Fp32;
  bool autocast = false;
  at::ScalarType dtype = at::kFloat;  // the autocast dtype when autocast is on
  bool grad_scaler = false;
  std::vector<std::string> warnings;

  // One line for the log and the run directory: "cuda: fp16 autocast with gradient scaling".
  std::string describe() const;
};

// Pure. Throws std::invalid_argument for a combination that cannot run (bf16 on a GPU without it).
AmpPolicy resolve_amp_policy(Precision precision, bool amp_on_mps, c10::DeviceType device, const AmpCapabilities& caps);

AmpCapabilities probe_amp_capabilities(const c10::Device& device);

// Turns autocast on for the policy's device and dtype for its lifetime (no-op when the policy has
// no autocast). Saves and restores the previous state, so guards nest; the outermost exit clears
// the cast cache (the cached fp16/bf16 copies of the weights).
class AutocastGuard {
 public:
  explicit AutocastGuard(const AmpPolicy& policy);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType type_;
  bool active_ = false;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// `x` in fp32 if it is fp16 or bf16, else `x` itself: for ops that autocast leaves in low precision.
at::Tensor reduced_to_fp32(const at::Tensor& x);

}  // namespace wavetrain
