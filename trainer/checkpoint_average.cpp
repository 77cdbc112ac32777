// The average of a run's last epoch checkpoints (checkpoint_average.h).
#include "trainer/checkpoint_average.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include "trainer/checkpoint.h"

namespace fs = std::filesystem;

namespace wavetrain {

std::vector<std::string> epoch_checkpoints_up_to(const std::string& dir, int64_t last_step, int64_t count) {
  if (count < 1) throw std::runtime_error("averaging needs at least one checkpoint, got " + std::to_string(count));
  // Only the per-epoch files: a top-k file (epoch=E-step=S-val_wer=X.ckpt) repeats one of them.
  static const std::regex name(R"(epoch=(\d+)-step=(\d+)\.ckpt)");
  std::vector<std::pair<int64_t, std::string>> found;  // (step, path)
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::smatch m;
    const std::string file = it->path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    const int64_t step = std::stoll(m[2].str());
    if (step <= last_step) found.emplace_back(step, it->path().string());
  }
  std::sort(found.begin(), found.end());
  if (static_cast<int64_t>(found.size()) < count) {
    std::string have;
    for (const auto& [step, path] : found) have += (have.empty() ? "" : ", ") + fs::path(path).filename().string();
    throw std::runtime_error("averaging " + std::to_string(count) + " checkpoints needs " + std::to_string(count) +
                             " epoch checkpoints (epoch=E-step=S.ckpt) up to step " + std::to_string(last_step) + " in " + dir +
                             "; it has " + std::to_string(found.size()) + (have.empty() ? "" : " (" + have + ")") +
                             ". Train with trainer.checkpoint.every_n_epochs=1 to keep one per epoch");
  }
  std::vector<std::string> out;
  for (size_t i = found.size() - static_cast<size_t>(count); i < found.size(); ++i) out.push_back(found[i].second);
  return out;
}

serialization::StateDict average_state_dicts(const std::vector<serialization::StateDict>& states,
                                             const std::vector<std::string>& sources) {
  if (states.empty()) throw std::runtime_error("averaging needs at least one state dict");
  const serialization::StateDict& first = states.front();
  std::vector<at::Tensor> sums;
  for (const auto& [key, t] : first) sums.push_back(t.is_floating_point() ? t.to(at::kDouble) : t.clone());
  for (size_t s = 1; s < states.size(); ++s) {
    const serialization::StateDict& other = states[s];
    const std::string source = s < sources.size() ? sources[s] : "state dict " + std::to_string(s);
    if (other.size() != first.size())
      throw std::runtime_error(source + ": " + std::to_string(other.size()) + " tensors where " +
                               (sources.empty() ? std::string("the first") : sources[0]) + " has " + std::to_string(first.size()));
    for (size_t i = 0; i < first.size(); ++i) {
      const auto& [key, t] = other[i];
      if (key != first[i].first) throw std::runtime_error(source + ": tensor " + std::to_string(i) + " is " + key + ", expected " + first[i].first);
      if (t.sizes() != first[i].second.sizes() || t.scalar_type() != first[i].second.scalar_type())
        throw std::runtime_error(source + ": " + key + " is " + std::string(c10::toString(t.scalar_type())) + " " + c10::str(t.sizes()) +
                                 ", expected " + std::string(c10::toString(first[i].second.scalar_type())) + " " +
                                 c10::str(first[i].second.sizes()));
      if (t.is_floating_point()) sums[i] += t.to(at::kDouble);
      else sums[i] = t.clone();  // the last one's
    }
  }
  serialization::StateDict out;
  const double n = static_cast<double>(states.size());
  for (size_t i = 0; i < first.size(); ++i) {
    const at::Tensor& t = first[i].second;
    out.emplace_back(first[i].first, t.is_floating_point() ? (sums[i] / n).to(t.scalar_type()) : sums[i]);
  }
  return out;
}

serialization::StateDict averaged_model(const std::string& dir, int64_t last_step, int64_t count, std::vector<std::string>* used) {
  const std::vector<std::string> files = epoch_checkpoints_up_to(dir, last_step, count);
  std::vector<serialization::StateDict> states;
  for (const std::string& f : files) states.push_back(Checkpoint::load(f).model);
  if (used) *used = files;
  return average_state_dicts(states, files);
}

}  // namespace wavetrain
