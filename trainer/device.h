// Device choice: which device a run uses, as a pure function of what was asked for and what this
// process can use, so every branch is testable on a machine without CUDA or MPS.
//
//   auto       -> cuda:0 if CUDA is built and has a device, else mps if available, else cpu
//   cuda[:N]   -> cuda:N; CUDA not built or no device -> cpu with a warning; N out of range -> error
//   mps        -> mps; not built or not available now -> cpu with a warning
//   cpu        -> cpu
#pragma once

#include <c10/core/Device.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace wavetrain {

class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class DeviceKind { Auto, Cpu, Cuda, Mps };

struct DeviceRequest {
  DeviceKind kind = DeviceKind::Auto;
  int index = -1;  // cuda:N; -1 means "the default device" (0)

  // Accepts auto, cpu, cuda, cuda:N, mps (case-insensitive). Throws DeviceError otherwise.
  static DeviceRequest parse(const std::string& text);
  std::string str() const;
};

// What this process can use: the inputs of choose_device(). probe_availability() fills it.
struct Availability {
  std::string torch_version;
  bool cuda_built = false;
  int cuda_device_count = 0;
  bool mps_built = false;
  bool mps_available = false;
};

struct DeviceChoice {
  c10::Device device{c10::DeviceType::CPU};
  std::vector<std::string> warnings;  // why the device differs from the request, if it does
};

// Pure. Throws DeviceError for a request that cannot be right on any fallback (cuda:3 with 1 GPU).
DeviceChoice choose_device(const DeviceRequest& request, const Availability& available);

Availability probe_availability();

// One row of `wavetrain devices`.
struct BackendInfo {
  std::string backend;  // cpu, cuda, mps
  bool built = false;
  bool available = false;
  std::string details;  // human-readable: devices, memory, threads, or why it is unavailable
};

std::vector<BackendInfo> describe_backends(const Availability& available);

// Validates a fraction for the CUDA caching allocator; returns the warning to print when the
// device is not CUDA (the option is then ignored). Throws DeviceError for a fraction outside (0, 1].
std::string check_cuda_memory_fraction(double fraction, const c10::Device& device);
// Applies it (CUDA devices only; others are left alone after the check above).
void apply_cuda_memory_fraction(double fraction, const c10::Device& device);

}  // namespace wavetrain
