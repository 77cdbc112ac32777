// `wavetrain devices`: each backend (built into this LibTorch? available now? details) and what a
// device request resolves to, `auto` by default. --json prints the same facts as JSON.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "trainer/device.h"
#include "trainer/threads.h"
#include "trainer/torch_compat.h"

namespace wavetrain::cli {
namespace {

struct DevicesOptions {
  bool json = false;
  std::string request = "auto";
};

void run_devices(const DevicesOptions& opt) {
  DeviceRequest request;
  try {
    request = DeviceRequest::parse(opt.request);
  } catch (const DeviceError& e) {
    throw UsageError(std::string("--device: ") + e.what());
  }
  const Availability available = probe_availability();
  const std::vector<BackendInfo> backends = describe_backends(available);
  const DeviceChoice choice = choose_device(request, available);  // DeviceError: exit 1, printed by main
  const ThreadSettings threads = current_thread_settings();

  if (opt.json) {
    nlohmann::json j;
    j["wavetrain_version"] = WAVETRAIN_VERSION;
    j["torch_version"] = available.torch_version;
    for (const BackendInfo& b : backends)
      j["backends"].push_back({{"backend", b.backend}, {"built", b.built}, {"available", b.available},
                               {"details", b.details}});
    j["cuda_device_count"] = available.cuda_device_count;
    j["request"] = request.str();
    j["chosen"] = choice.device.str();
    j["warnings"] = choice.warnings;
    j["threads"] = {{"intra_op", threads.intra_op}, {"inter_op", threads.inter_op}, {"source", threads.source},
                    {"omp_wait_policy", threads.omp_wait_policy}, {"usable_cores", usable_cpu_count()},
                    {"openblas_threads", threads.openblas_threads}};
    std::cout << j.dump(2) << "\n";
    return;
  }

  std::cout << "wavetrain " << WAVETRAIN_VERSION << ", LibTorch " << available.torch_version << "\n\n";
  std::cout << std::left << std::setw(9) << "backend" << std::setw(7) << "built" << std::setw(11) << "available"
            << "details\n";
  for (const BackendInfo& b : backends)
    std::cout << std::setw(9) << b.backend << std::setw(7) << (b.built ? "yes" : "no") << std::setw(11)
              << (b.available ? "yes" : "no") << b.details << "\n";
  std::cout << "\n" << request.str() << " -> " << choice.device.str() << "\n";
  for (const std::string& w : choice.warnings) std::cerr << "warning: " << w << "\n";
}

}  // namespace

void add_devices_command(CLI::App& app) {
  auto opt = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand("devices", "Show the compute backends and which device a run would use");
  cmd->add_flag("--json", opt->json, "Print the report as JSON");
  cmd->add_option("--device", opt->request, "Device request to resolve: auto, cpu, cuda, cuda:N, mps")
      ->capture_default_str();
  cmd->callback([opt] { run_devices(*opt); });
}

}  // namespace wavetrain::cli
