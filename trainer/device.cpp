// Device choice and the backend report behind `wavetrain devices`. See device.h for the rules.
#include "trainer/device.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <torch/cuda.h>

#include "trainer/threads.h"
#include "trainer/torch_compat.h"

namespace wavetrain {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const char* kAccepted = "auto, cpu, cuda, cuda:N, mps";

std::string format_bytes(int64_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return out.str();
}

}  // namespace

DeviceRequest DeviceRequest::parse(const std::string& text) {
  const std::string s = lower(text);
  const auto colon = s.find(':');
  const std::string kind = s.substr(0, colon);
  DeviceRequest r;
  if (kind == "auto") r.kind = DeviceKind::Auto;
  else if (kind == "cpu") r.kind = DeviceKind::Cpu;
  else if (kind == "cuda") r.kind = DeviceKind::Cuda;
  else if (kind == "mps") r.kind = DeviceKind::Mps;
  else throw DeviceError("Unknown device '" + text + "'. Expected one of: " + kAccepted);
  if (colon == std::string::npos) return r;

  const std::string index = s.substr(colon + 1);
  const bool digits = !index.empty() && index.size() <= 4 &&
                      std::all_of(index.begin(), index.end(), [](unsigned char c) { return std::isdigit(c); });
  if (r.kind != DeviceKind::Cuda || !digits)
    throw DeviceError("Invalid device '" + text + "': only cuda takes an index (cuda:N with N >= 0). Expected one of: " +
                      kAccepted);
  r.index = std::stoi(index);
  return r;
}

std::string DeviceRequest::str() const {
  switch (kind) {
    case DeviceKind::Auto: return "auto";
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Mps: return "mps";
    case DeviceKind::Cuda: return index < 0 ? "cuda" : "cuda:" + std::to_string(index);
  }
  return "?";
}

DeviceChoice choose_device(const DeviceRequest& request, const Availability& a) {
  const c10::Device cpu(c10::DeviceType::CPU);
  const bool cuda_usable = a.cuda_built && a.cuda_device_count > 0;
  const bool mps_usable = a.mps_built && a.mps_available;

  switch (request.kind) {
    case DeviceKind::Cpu:
      return {cpu, {}};

    case DeviceKind::Auto:
      if (cuda_usable) return {c10::Device(c10::DeviceType::CUDA, 0), {}};
      if (mps_usable) return {c10::Device(c10::DeviceType::MPS), {}};
      return {cpu, {}};

    case DeviceKind::Cuda: {
      const std::string asked = "device '" + request.str() + "' was requested but ";
      if (!a.cuda_built)
        return {cpu, {asked + "this LibTorch (" + a.torch_version + ") was built without CUDA; using cpu"}};
      if (a.cuda_device_count == 0)
        return {cpu, {asked + "no CUDA device is available (LibTorch has CUDA, but the driver reports 0 devices; "
                              "check the driver and CUDA_VISIBLE_DEVICES); using cpu"}};
      const int index = std::max(request.index, 0);
      if (index >= a.cuda_device_count) {
        const std::string n = std::to_string(a.cuda_device_count);
        throw DeviceError("device '" + request.str() + "' was requested but only " + n + " CUDA device" +
                          (a.cuda_device_count == 1 ? " is" : "s are") + " available (valid: cuda:0" +
                          (a.cuda_device_count > 1 ? " .. cuda:" + std::to_string(a.cuda_device_count - 1) : "") + ")");
      }
      return {c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index)), {}};
    }

    case DeviceKind::Mps: {
      const std::string asked = "device 'mps' was requested but ";
      if (!a.mps_built)
        return {cpu, {asked + "this LibTorch (" + a.torch_version +
                      ") was built without MPS (MPS exists only in macOS builds); using cpu"}};
      if (!a.mps_available)
        return {cpu, {asked + "MPS is not available at run time (LibTorch has MPS, but this macOS version or "
                              "machine provides no Metal device for it); using cpu"}};
      return {c10::Device(c10::DeviceType::MPS), {}};
    }
  }
  return {cpu, {}};
}

Availability probe_availability() {
  Availability a;
  a.torch_version = compat::torch_version();
  a.cuda_built = compat::cuda_built();
  a.cuda_device_count = a.cuda_built ? static_cast<int>(torch::cuda::device_count()) : 0;
  a.mps_built = compat::mps_built();
  a.mps_available = compat::mps_available();
  return a;
}

std::vector<BackendInfo> describe_backends(const Availability& a) {
  std::vector<BackendInfo> rows;

  {
    const ThreadSettings threads = current_thread_settings();
    std::ostringstream d;
    d << usable_cpu_count() << " usable cores, " << threads.intra_op << " intra-op thread"
      << (threads.intra_op == 1 ? "" : "s") << " (" << threads.source << "), OMP_WAIT_POLICY="
      << (threads.omp_wait_policy.empty() ? "(unset)" : threads.omp_wait_policy);
    if (threads.openblas_threads >= 0) d << ", OpenBLAS " << threads.openblas_threads << " thread" << (threads.openblas_threads == 1 ? "" : "s");
    rows.push_back({"cpu", true, true, d.str()});
  }

  {
    BackendInfo cuda{"cuda", a.cuda_built, a.cuda_built && a.cuda_device_count > 0, ""};
    if (!a.cuda_built) {
      cuda.details = "LibTorch built without CUDA";
    } else if (a.cuda_device_count == 0) {
      cuda.details = "no CUDA device visible";
    } else {
      std::ostringstream d;
      for (int i = 0; i < a.cuda_device_count; ++i) {
        const compat::CudaDeviceProperties p = compat::cuda_device_properties(i);
        d << (i ? "; " : "") << "cuda:" << i << " " << p.name << ", " << format_bytes(p.total_memory_bytes)
          << ", compute " << p.major << "." << p.minor;
      }
      cuda.details = d.str();
    }
    rows.push_back(cuda);
  }

  {
    BackendInfo mps{"mps", a.mps_built, a.mps_built && a.mps_available, ""};
    if (!a.mps_built) mps.details = "LibTorch built without MPS (macOS builds only)";
    else if (!a.mps_available) mps.details = "built, but no Metal device at run time";
    else mps.details = std::string("Metal device; autocast ") +
                       (compat::autocast_supported(c10::DeviceType::MPS) ? "supported" : "needs LibTorch 2.5+");
    rows.push_back(mps);
  }
  return rows;
}

std::string check_cuda_memory_fraction(double fraction, const c10::Device& device) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    std::ostringstream msg;
    msg << "CUDA memory fraction must be in (0, 1], got " << fraction;
    throw DeviceError(msg.str());
  }
  if (device.is_cuda() || fraction == 1.0) return "";
  return "a CUDA memory fraction was set but the device is " + device.str() + "; it is ignored";
}

void apply_cuda_memory_fraction(double fraction, const c10::Device& device) {
  check_cuda_memory_fraction(fraction, device);
  if (device.is_cuda()) compat::set_cuda_memory_fraction(fraction, device.has_index() ? device.index() : 0);
}

}  // namespace wavetrain
