// Weights interop; see weights.h.
#include "trainer/weights.h"

#include <torch/nn/module.h>

#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace wavetrain {
namespace {

const std::string kPrefix = "module.";

bool has_prefix(const std::string& s) { return s.compare(0, kPrefix.size(), kPrefix) == 0; }

std::string shape(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The file's names mapped to the module's naming: as is, with `module.` stripped, or added.
enum class Mapping { AsIs, Strip, Add };

std::string mapped(const std::string& name, Mapping m) {
  if (m == Mapping::Strip && has_prefix(name)) return name.substr(kPrefix.size());
  if (m == Mapping::Add) return kPrefix + name;
  return name;
}

}  // namespace

StateDict module_state_dict(const torch::nn::Module& module, bool module_prefix) {
  StateDict out;
  const std::string base = module_prefix ? kPrefix : "";
  for (const auto& item : module.named_modules("", /*include_self=*/true)) {
    const std::string owner = item.key().empty() ? base : base + item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false))
      out.emplace_back(owner + p.key(), p.value().detach());
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false))
      out.emplace_back(owner + b.key(), b.value().detach());
  }
  return out;
}

std::string LoadReport::describe() const {
  std::string s;
  if (!missing.empty()) s += "  missing keys (in the model, not in the file): " + join(missing) + "\n";
  if (!unexpected.empty()) s += "  unexpected keys (in the file, not in the model): " + join(unexpected) + "\n";
  if (!mismatched.empty()) s += "  shape mismatches: " + join(mismatched) + "\n";
  return s;
}

LoadReport load_state_dict(torch::nn::Module& module, const StateDict& state_in, bool strict, const std::string& source) {
  const auto* renames = dynamic_cast<const RenamesOldState*>(&module);
  const StateDict state = renames ? renames->renamed_old_state(state_in) : state_in;
  std::map<std::string, at::Tensor> targets;
  for (auto& [name, tensor] : module_state_dict(module)) targets.emplace(name, tensor);

  // Pick the mapping of names that matches the most keys (ties: as is).
  Mapping best = Mapping::AsIs;
  size_t best_hits = 0;
  for (Mapping m : {Mapping::AsIs, Mapping::Strip, Mapping::Add}) {
    size_t hits = 0;
    for (const auto& [name, tensor] : state) hits += targets.count(mapped(name, m));
    if (hits > best_hits) {
      best = m;
      best_hits = hits;
    }
  }

  LoadReport report;
  if (best == Mapping::Strip) report.prefix_note = "removed the 'module.' prefix (a DataParallel/DDP state dict)";
  if (best == Mapping::Add) report.prefix_note = "added the 'module.' prefix the model's names carry";

  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (destination, source)
  std::set<std::string> seen;
  for (const auto& [name, tensor] : state) {
    const std::string target = mapped(name, best);
    auto it = targets.find(target);
    if (it == targets.end()) {
      report.unexpected.push_back(name);
      continue;
    }
    seen.insert(target);
    if (!it->second.sizes().equals(tensor.sizes())) {
      report.mismatched.push_back(target + ": file " + shape(tensor) + ", model " + shape(it->second));
      continue;
    }
    copies.emplace_back(it->second, tensor);
  }
  for (const auto& [name, tensor] : targets)
    if (!seen.count(name)) report.missing.push_back(name);

  if (strict && !report.complete())
    throw std::runtime_error(source + " does not fit the model" +
                             (report.prefix_note.empty() ? "" : " (" + report.prefix_note + ")") + ":\n" +
                             report.describe());
  at::NoGradGuard no_grad;
  for (auto& [dst, src] : copies) dst.copy_(src);
  return report;
}

LoadReport load_weights(const std::string& path, torch::nn::Module& module, bool strict) {
  const serialization::Value file = serialization::load_torch_file(path);
  // A wavetrain checkpoint keeps the weights under "model"; a plain state dict is the whole file.
  const serialization::Value* weights = &file;
  if (file.kind() == serialization::Value::Kind::Dict)
    if (const serialization::Value* model = file.find("model");
        model && file.find("format") && model->kind() == serialization::Value::Kind::Dict)
      weights = model;
  return load_state_dict(module, serialization::to_state_dict(*weights, path), strict, path);
}

void save_weights(const std::string& path, const torch::nn::Module& module, bool module_prefix) {
  serialization::save_torch_file(path, serialization::from_state_dict(module_state_dict(module, module_prefix)));
}

}  // namespace wavetrain
