// The one place that knows LibTorch versions. Everything else in wavetrain calls these wrappers.
//
// Differences handled here (checked against 1.13 headers on Debian and PyTorch's 2.x sources):
//  - Autocast state: 1.13 .. 2.3 have one function pair per backend (is_enabled() is CUDA,
//    is_cpu_enabled(), get_autocast_gpu_dtype(), ...). 2.4 added is_autocast_enabled(DeviceType)
//    and friends and deprecated the old names (calling them warns at compile and at run time).
//  - MPS autocast exists from 2.5 (DispatchKey::AutocastMPS).
//  - <torch/mps.h> (torch::mps::is_available, manual_seed) exists from 2.1 on every platform; before
//    that only at::hasMPS(). The MPS calls are compiled wherever the header exists.
//  - torch::optim::Optimizer::state() is keyed by the parameter's TensorImpl address: printed to a
//    string up to 2.1 (c10::guts::to_string), the void* itself from 2.2 on (pytorch#108480).
//  - CUDA-only calls are keyed on WAVETRAIN_WITH_CUDA (set by CMake when LibTorch has torch_cuda),
//    not on __has_include: Debian's CPU-only package installs the c10/cuda headers too.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <torch/version.h>

#include <string>

#include "wavetrain_build_config.h"

#if defined(WAVETRAIN_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#define WAVETRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if WAVETRAIN_TORCH_AT_LEAST(2, 1) && __has_include(<torch/mps.h>)
#define WAVETRAIN_HAS_MPS_HEADER 1
#else
#define WAVETRAIN_HAS_MPS_HEADER 0
#endif

#if WAVETRAIN_HAS_MPS_HEADER
#include <torch/mps.h>
#endif

// MPS kernels exist only in LibTorch's macOS builds.
#if defined(__APPLE__)
#define WAVETRAIN_MPS_BUILT 1
#else
#define WAVETRAIN_MPS_BUILT 0
#endif

namespace wavetrain::compat {

inline std::string torch_version() { return TORCH_VERSION; }

constexpr bool cuda_built() {
#if defined(WAVETRAIN_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

constexpr bool mps_built() { return WAVETRAIN_MPS_BUILT != 0; }

// DDP's engine, c10d::Reducer (trainer/ddp_reducer.cpp): its headers ship with the PyPI wheels, not
// with Debian's 1.13, and its constructor has changed between 2.x releases; the one used is 2.11's.
#if WAVETRAIN_TORCH_AT_LEAST(2, 11) && __has_include(<torch/csrc/distributed/c10d/reducer.hpp>)
#define WAVETRAIN_HAS_C10D_REDUCER 1
#else
#define WAVETRAIN_HAS_C10D_REDUCER 0
#endif

// at::_fused_adam_ (trainer/fused_adam.cpp's CUDA update) has a CPU kernel from LibTorch 2.4; 1.13
// has only the CUDA one.
constexpr bool fused_adam_kernel_on_cpu() { return WAVETRAIN_TORCH_AT_LEAST(2, 4); }

// True when this LibTorch can autocast on `type` at all (hardware presence is not checked).
constexpr bool autocast_supported(c10::DeviceType type) {
  switch (type) {
    case c10::DeviceType::CPU:
    case c10::DeviceType::CUDA:
      return true;
    case c10::DeviceType::MPS:
      return WAVETRAIN_TORCH_AT_LEAST(2, 5);
    default:
      return false;
  }
}

#if WAVETRAIN_TORCH_AT_LEAST(2, 4)

inline bool autocast_enabled(c10::DeviceType type) { return at::autocast::is_autocast_enabled(type); }
inline void set_autocast_enabled(c10::DeviceType type, bool on) { at::autocast::set_autocast_enabled(type, on); }
inline at::ScalarType autocast_dtype(c10::DeviceType type) { return at::autocast::get_autocast_dtype(type); }
inline void set_autocast_dtype(c10::DeviceType type, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(type, dtype);
}

#else  // 1.13 .. 2.3: one function per backend; MPS has no autocast.

inline bool autocast_enabled(c10::DeviceType type) {
  switch (type) {
    case c10::DeviceType::CPU: return at::autocast::is_cpu_enabled();
    case c10::DeviceType::CUDA: return at::autocast::is_enabled();
    default: return false;
  }
}
inline void set_autocast_enabled(c10::DeviceType type, bool on) {
  switch (type) {
    case c10::DeviceType::CPU: at::autocast::set_cpu_enabled(on); return;
    case c10::DeviceType::CUDA: at::autocast::set_enabled(on); return;
    default: TORCH_CHECK(!on, "autocast on ", c10::DeviceTypeName(type), " needs LibTorch 2.5 or newer");
  }
}
inline at::ScalarType autocast_dtype(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
inline void set_autocast_dtype(c10::DeviceType type, at::ScalarType dtype) {
  switch (type) {
    case c10::DeviceType::CPU: at::autocast::set_autocast_cpu_dtype(dtype); return;
    case c10::DeviceType::CUDA: at::autocast::set_autocast_gpu_dtype(dtype); return;
    default: TORCH_CHECK(false, "autocast on ", c10::DeviceTypeName(type), " needs LibTorch 2.5 or newer");
  }
}

#endif

// The key under which torch::optim::Optimizer::state() holds a parameter's state.
#if WAVETRAIN_TORCH_AT_LEAST(2, 2)
inline void* optimizer_state_key(const at::Tensor& param) { return param.unsafeGetTensorImpl(); }
#else
inline std::string optimizer_state_key(const at::Tensor& param) {
  return c10::guts::to_string(param.unsafeGetTensorImpl());
}
#endif

// Same names in every version; wrapped so callers include only this header.
inline int autocast_increment_nesting() { return at::autocast::increment_nesting(); }
inline int autocast_decrement_nesting() { return at::autocast::decrement_nesting(); }
inline void autocast_clear_cache() { at::autocast::clear_cache(); }

// MPS present at run time (macOS with a Metal device). 2.x declares torch::mps on every platform,
// so its calls are compiled by the Linux 2.x build too (and answer false there); before 2.1 there
// is only at::hasMPS(), on every platform as well. Each branch is compiled by one of the two builds.
inline bool mps_available() {
#if WAVETRAIN_HAS_MPS_HEADER
  return torch::mps::is_available();
#else
  return at::hasMPS();
#endif
}

// Seeds the MPS generator, which at::manual_seed leaves alone (Python's torch.manual_seed does both).
inline void mps_manual_seed(uint64_t seed) {
#if WAVETRAIN_HAS_MPS_HEADER
  if (torch::mps::is_available()) torch::mps::manual_seed(seed);
#else
  (void)seed;
#endif
}

struct CudaDeviceProperties {
  std::string name;
  int64_t total_memory_bytes = 0;
  int major = 0;
  int minor = 0;
  int multiprocessors = 0;
};

#if defined(WAVETRAIN_WITH_CUDA)
inline CudaDeviceProperties cuda_device_properties(int index) {
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
  return {p->name, static_cast<int64_t>(p->totalGlobalMem), p->major, p->minor, p->multiProcessorCount};
}
// Caps what the caching allocator may take on `index`; an allocation past it raises out-of-memory.
// CUDA starts lazily, and LibTorch 2.x's allocator refuses the cap before it has started ("Allocator
// not initialized for device", seen on an H200 with 2.11): an empty tensor on the device starts it,
// as Python's torch.cuda.set_per_process_memory_fraction does with its lazy init.
inline void set_cuda_memory_fraction(double fraction, int index) {
  (void)at::empty({0}, at::TensorOptions().device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index))));
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, static_cast<c10::DeviceIndex>(index));
}
// bf16 autocast on CUDA needs compute capability 8.0 (Ampere) or newer.
inline bool cuda_supports_bf16(int index) { return at::cuda::getDeviceProperties(index)->major >= 8; }
#else
inline CudaDeviceProperties cuda_device_properties(int) {
  TORCH_CHECK(false, "this LibTorch was built without CUDA");
}
inline void set_cuda_memory_fraction(double, int) { TORCH_CHECK(false, "this LibTorch was built without CUDA"); }
inline bool cuda_supports_bf16(int) { return false; }
#endif

}  // namespace wavetrain::compat
