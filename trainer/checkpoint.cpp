// Checkpoints; the format is described in checkpoint.h.
#include "trainer/checkpoint.h"

#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "trainer/serialization/atomic_file.h"
#include "trainer/crc32c.h"
#include "trainer/torch_compat.h"
#include "wavetrain_build_config.h"

namespace wavetrain {
namespace {

using serialization::SerializationError;
using serialization::Value;
using Kind = Value::Kind;

constexpr const char* kFormat = "wavetrain-checkpoint";
constexpr int64_t kFormatVersion = 1;
constexpr const char* kChecksumRecord = "wavetrain_checksum";

Value str(const std::string& s) { return Value::string(s); }
Value::Entry entry(const std::string& k, Value v) { return {str(k), std::move(v)}; }

// CRC-32C over the records that hold the content, in name order: data.pkl and data/*.
uint32_t content_checksum(std::vector<std::pair<std::string, std::string>> records) {
  std::sort(records.begin(), records.end());
  uint32_t crc = 0;
  for (const auto& [name, bytes] : records) {
    if (name != "data.pkl" && name.rfind("data/", 0) != 0) continue;
    crc = crc32c(name, crc);
    crc = crc32c(bytes, crc);
  }
  return crc;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08" PRIx32, v);
  return buf;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---- optimizer state ---------------------------------------------------------------------

auto param_key(const at::Tensor& p) { return compat::optimizer_state_key(p); }

// Adam and AdamW share their options and per-parameter state, under different C++ types.
template <class Options>
Value adam_like_group(const Options& o) {
  return Value::dict({entry("lr", Value::floating(o.lr())),
                      entry("betas", Value::tuple({Value::floating(std::get<0>(o.betas())),
                                                   Value::floating(std::get<1>(o.betas()))})),
                      entry("eps", Value::floating(o.eps())), entry("weight_decay", Value::floating(o.weight_decay())),
                      entry("amsgrad", Value::boolean(o.amsgrad()))});
}

template <class ParamState>
Value adam_like_state(const ParamState& st) {
  Value s = Value::dict({entry("step", Value::integer(st.step())), entry("exp_avg", Value::tensor(st.exp_avg())),
                         entry("exp_avg_sq", Value::tensor(st.exp_avg_sq()))});
  if (st.max_exp_avg_sq().defined()) s.entries().push_back(entry("max_exp_avg_sq", Value::tensor(st.max_exp_avg_sq())));
  return s;
}

template <class ParamState, class Check>
std::unique_ptr<ParamState> restore_adam_like(const Value& s, const Check& check, const std::string& where);

double number(const Value& v) { return v.kind() == Kind::Int ? static_cast<double>(v.as_int()) : v.as_float(); }

const Value& field(const Value& dict, const std::string& key, const std::string& where) {
  const Value* v = dict.kind() == Kind::Dict ? dict.find(key) : nullptr;
  if (!v) throw std::runtime_error(where + ": missing '" + key + "'");
  return *v;
}

template <class ParamState, class Check>
std::unique_ptr<ParamState> restore_adam_like(const Value& s, const Check& check, const std::string& where) {
  auto st = std::make_unique<ParamState>();
  st->step(field(s, "step", where).as_int());
  st->exp_avg(check("exp_avg"));
  st->exp_avg_sq(check("exp_avg_sq"));
  if (s.find("max_exp_avg_sq")) st->max_exp_avg_sq(check("max_exp_avg_sq"));
  return st;
}

}  // namespace

// The generic generator API covers CUDA without CUDA headers: one code path for every build.
RngState capture_rng() {
  RngState s;
  at::Generator cpu = at::globalContext().defaultGenerator(at::Device(at::kCPU));
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    s.cpu = cpu.get_state();
  }
  const int gpus = compat::cuda_built() ? static_cast<int>(torch::cuda::device_count()) : 0;
  for (int i = 0; i < gpus; ++i) {
    at::Generator g = at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(g.mutex());
    s.cuda.push_back(g.get_state());
  }
  return s;
}

void restore_rng(const RngState& state) {
  if (state.cpu.defined()) {
    at::Generator cpu = at::globalContext().defaultGenerator(at::Device(at::kCPU));
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(state.cpu);
  }
  const size_t gpus = compat::cuda_built() ? torch::cuda::device_count() : 0;
  for (size_t i = 0; i < state.cuda.size() && i < gpus; ++i) {
    at::Generator g = at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state.cuda[i]);
  }
}

Value optimizer_state(torch::optim::Optimizer& optimizer) {
  if (auto* custom = dynamic_cast<CheckpointedOptimizer*>(&optimizer))
    return Value::dict({entry("type", str(custom->type())), entry("state", custom->state_value())});
  std::string type;
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) type = "adamw";
  else if (dynamic_cast<torch::optim::Adam*>(&optimizer)) type = "adam";
  else if (dynamic_cast<torch::optim::SGD*>(&optimizer)) type = "sgd";
  else throw std::runtime_error("checkpoint: cannot save the state of this optimizer type (Adam, AdamW and SGD only)");

  std::vector<Value> groups;
  std::vector<Value::Entry> states;
  int64_t index = 0;
  for (auto& group : optimizer.param_groups()) {
    Value g;
    if (type == "sgd") {
      const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
      g = Value::dict({entry("lr", Value::floating(o.lr())), entry("momentum", Value::floating(o.momentum())),
                       entry("dampening", Value::floating(o.dampening())),
                       entry("weight_decay", Value::floating(o.weight_decay())),
                       entry("nesterov", Value::boolean(o.nesterov()))});
    } else if (type == "adamw") {
      g = adam_like_group(static_cast<const torch::optim::AdamWOptions&>(group.options()));
    } else {
      g = adam_like_group(static_cast<const torch::optim::AdamOptions&>(group.options()));
    }
    std::vector<Value> ids;
    for (const at::Tensor& p : group.params()) {
      ids.push_back(Value::integer(index));
      auto it = optimizer.state().find(param_key(p));
      if (it != optimizer.state().end()) {
        Value s;
        if (type == "sgd") {
          const auto& st = static_cast<const torch::optim::SGDParamState&>(*it->second);
          s = Value::dict({entry("momentum_buffer", st.momentum_buffer().defined() ? Value::tensor(st.momentum_buffer())
                                                                                   : Value::none())});
        } else if (type == "adamw") {
          s = adam_like_state(static_cast<const torch::optim::AdamWParamState&>(*it->second));
        } else {
          s = adam_like_state(static_cast<const torch::optim::AdamParamState&>(*it->second));
        }
        states.emplace_back(Value::integer(index), std::move(s));
      }
      ++index;
    }
    g.entries().push_back(entry("params", Value::list(std::move(ids))));
    groups.push_back(std::move(g));
  }
  return Value::dict({entry("type", str(type)), entry("state", Value::dict(std::move(states))),
                      entry("param_groups", Value::list(std::move(groups)))});
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const Value& saved, const std::string& source) {
  const std::string where = source + ": optimizer";
  const std::string type = field(saved, "type", where).as_string();
  if (auto* custom = dynamic_cast<CheckpointedOptimizer*>(&optimizer)) {
    if (type != custom->type())
      throw std::runtime_error(where + " state is for " + type + ", but the run uses " + custom->type());
    custom->load_state_value(field(saved, "state", where), source);
    return;
  }
  const Value current = optimizer_state(optimizer);
  if (type != current.find("type")->as_string())
    throw std::runtime_error(where + " state is for " + type + ", but the run uses " + current.find("type")->as_string());
  const auto& groups = field(saved, "param_groups", where).items();
  if (groups.size() != optimizer.param_groups().size())
    throw std::runtime_error(where + " has " + std::to_string(groups.size()) + " parameter groups, the run " +
                             std::to_string(optimizer.param_groups().size()));
  const Value& states = field(saved, "state", where);

  int64_t index = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    auto& group = optimizer.param_groups()[gi];
    const Value& g = groups[gi];
    if (field(g, "params", where).items().size() != group.params().size())
      throw std::runtime_error(where + " group " + std::to_string(gi) + " has " +
                               std::to_string(field(g, "params", where).items().size()) + " parameters, the run " +
                               std::to_string(group.params().size()));
    group.options().set_lr(number(field(g, "lr", where)));
    for (const at::Tensor& p : group.params()) {
      const Value* s = nullptr;
      for (const Value::Entry& e : states.entries())
        if (e.first.kind() == Kind::Int && e.first.as_int() == index) s = &e.second;
      ++index;
      if (!s) continue;
      auto check = [&](const char* name) {
        const at::Tensor& t = field(*s, name, where).as_tensor();
        if (!t.sizes().equals(p.sizes()))
          throw std::runtime_error(where + " state '" + name + "' of parameter " + std::to_string(index - 1) +
                                   " has shape " + c10::str(t.sizes()) + ", the parameter " + c10::str(p.sizes()));
        return t.to(p.device(), p.scalar_type()).clone();
      };
      if (type == "sgd") {
        auto st = std::make_unique<torch::optim::SGDParamState>();
        if (!field(*s, "momentum_buffer", where).is_none()) st->momentum_buffer(check("momentum_buffer"));
        optimizer.state()[param_key(p)] = std::move(st);
      } else if (type == "adamw") {
        optimizer.state()[param_key(p)] = restore_adam_like<torch::optim::AdamWParamState>(*s, check, where);
      } else {
        optimizer.state()[param_key(p)] = restore_adam_like<torch::optim::AdamParamState>(*s, check, where);
      }
    }
  }
}

void Checkpoint::save(const std::string& path, const TrainingState& s) {
  std::vector<Value::Entry> metrics;
  for (const auto& [name, v] : s.metrics) metrics.push_back(entry(name, Value::floating(v)));
  std::vector<Value> cuda_rng;
  for (const at::Tensor& t : s.rng.cuda) cuda_rng.push_back(Value::tensor(t));
  Value root = Value::dict({
      entry("format", str(kFormat)),
      entry("format_version", Value::integer(kFormatVersion)),
      entry("wavetrain_version", str(WAVETRAIN_VERSION)),
      entry("torch_version", str(compat::torch_version())),
      entry("model", serialization::from_state_dict(s.model)),
      entry("optimizer", s.optimizer),
      entry("scheduler", s.scheduler),
      entry("scaler", s.scaler ? Value::dict({entry("scale", Value::floating(s.scaler->scale)),
                                             entry("growth_tracker", Value::integer(s.scaler->growth_tracker))})
                               : Value::none()),
      entry("epoch", Value::integer(s.epoch)),
      entry("global_step", Value::integer(s.global_step)),
      entry("batch_in_epoch", Value::integer(s.batch_in_epoch)),
      entry("rng", Value::dict({entry("cpu", s.rng.cpu.defined() ? Value::tensor(s.rng.cpu) : Value::none()),
                                entry("cuda", Value::list(std::move(cuda_rng)))})),
      entry("config", str(s.config_yaml)),
      entry("metrics", Value::dict(std::move(metrics))),
      entry("train_seconds", Value::floating(s.train_seconds)),
      entry("early_stopping",
            s.early_stopping.monitor.empty()
                ? Value::none()
                : Value::dict({entry("monitor", str(s.early_stopping.monitor)),
                               entry("best", std::isnan(s.early_stopping.best) ? Value::none()
                                                                               : Value::floating(s.early_stopping.best)),
                               entry("wait", Value::integer(s.early_stopping.wait)),
                               entry("stopped", str(s.early_stopping.stopped))})),
  });
  // Only when a callback keeps state: files of runs without such callbacks stay as they were.
  if (!s.callbacks.empty()) {
    std::vector<Value::Entry> states;
    for (const auto& [name, state] : s.callbacks) states.push_back(entry(name, state));
    root.entries().push_back(entry("callbacks", Value::dict(std::move(states))));
  }
  const serialization::Pickled pickled = serialization::pickle(root);
  std::vector<std::pair<std::string, std::string>> records = {{"data.pkl", pickled.bytes}};
  for (size_t i = 0; i < pickled.storages.size(); ++i) {
    const at::Tensor& t = pickled.storages[i];
    records.emplace_back("data/" + std::to_string(i),
                         std::string(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size()));
  }
  const std::string checksum = hex32(content_checksum(records));
  write_file_atomic(path, serialization::write_archive(pickled, "archive", {{kChecksumRecord, checksum}}));
}

TrainingState Checkpoint::load(const std::string& path) {
  const std::string bytes = read_file(path);
  if (bytes.empty()) throw std::runtime_error(path + ": the file is empty (not a wavetrain checkpoint)");

  // Verify the checksum over the raw records before interpreting anything. read_records vets the
  // zip structure first (LibTorch's reader trusts it; see docs/fuzzing.md).
  std::vector<std::pair<std::string, std::string>> records;
  std::string stored;
  try {
    for (auto& [name, content] : serialization::read_records(bytes, path)) {
      if (name == kChecksumRecord) stored = content;
      else records.emplace_back(name, std::move(content));
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not a readable checkpoint (truncated, corrupted, or not a zip archive): " +
                             std::string(e.what()).substr(0, 300));
  }
  if (stored.empty())
    throw std::runtime_error(path + ": a PyTorch file but not a wavetrain checkpoint (no " + kChecksumRecord +
                             " record); load its weights with load_weights() or `wavetrain ckpt info`");
  const std::string actual = hex32(content_checksum(records));
  if (stored != actual)
    throw std::runtime_error(path + ": checksum mismatch (stored " + stored + ", computed " + actual +
                             "): the file is corrupted");

  const Value root = serialization::load_torch_bytes(bytes, path);
  if (root.kind() != Kind::Dict || !root.find("format") || root.find("format")->as_string() != kFormat)
    throw std::runtime_error(path + ": not a wavetrain checkpoint (no format: " + kFormat + ")");
  const int64_t version = field(root, "format_version", path).as_int();
  if (version > kFormatVersion)
    throw std::runtime_error(path + ": checkpoint format " + std::to_string(version) + " is newer than this wavetrain (" +
                             std::to_string(kFormatVersion) + ")");

  TrainingState s;
  try {
    s.wavetrain_version = field(root, "wavetrain_version", path).as_string();
    s.torch_version = field(root, "torch_version", path).as_string();
    s.model = serialization::to_state_dict(field(root, "model", path), path + ": model");
    s.optimizer = field(root, "optimizer", path);
    s.scheduler = field(root, "scheduler", path);
    if (const Value& sc = field(root, "scaler", path); !sc.is_none())
      s.scaler = GradScalerState{number(field(sc, "scale", path)), field(sc, "growth_tracker", path).as_int()};
    s.epoch = field(root, "epoch", path).as_int();
    s.global_step = field(root, "global_step", path).as_int();
    s.batch_in_epoch = field(root, "batch_in_epoch", path).as_int();
    const Value& rng = field(root, "rng", path);
    if (const Value& cpu = field(rng, "cpu", path); !cpu.is_none()) s.rng.cpu = cpu.as_tensor();
    for (const Value& t : field(rng, "cuda", path).items()) s.rng.cuda.push_back(t.as_tensor());
    s.config_yaml = field(root, "config", path).as_string();
    for (const Value::Entry& e : field(root, "metrics", path).entries())
      s.metrics.emplace_back(e.first.as_string(), number(e.second));
    if (const Value* t = root.find("train_seconds")) s.train_seconds = number(*t);
    if (const Value* es = root.find("early_stopping"); es && !es->is_none()) {
      const std::string where = path + ": early_stopping";
      s.early_stopping.monitor = field(*es, "monitor", where).as_string();
      if (const Value& best = field(*es, "best", where); !best.is_none()) s.early_stopping.best = number(best);
      s.early_stopping.wait = field(*es, "wait", where).as_int();
      s.early_stopping.stopped = field(*es, "stopped", where).as_string();
    }
    if (const Value* callbacks = root.find("callbacks"))
      for (const Value::Entry& e : callbacks->entries()) s.callbacks.emplace_back(e.first.as_string(), e.second);
  } catch (const SerializationError& e) {
    throw std::runtime_error(path + ": malformed checkpoint: " + e.what());
  }
  return s;
}

std::string Checkpoint::info(const std::string& path) {
  const Value root = serialization::load_torch_file(path);
  std::ostringstream out;
  auto tensors = [&](const Value& dict, const std::string& indent) {
    for (const Value::Entry& e : dict.entries()) {
      if (e.second.kind() != Kind::Tensor) continue;
      const at::Tensor& t = e.second.as_tensor();
      out << indent << std::left << std::setw(40) << e.first.as_string() << " " << std::setw(9)
          << c10::toString(t.scalar_type()) << " " << t.sizes() << "\n";
    }
  };
  const Value* format = root.kind() == Kind::Dict ? root.find("format") : nullptr;
  if (!format || format->kind() != Kind::String || format->as_string() != kFormat) {
    out << path << ": PyTorch state dict\n";
    if (root.kind() == Kind::Dict) tensors(root, "  ");
    return out.str();
  }
  const TrainingState s = load(path);
  size_t params = 0;
  for (const auto& [name, t] : s.model) params += static_cast<size_t>(t.numel());
  out << path << ": wavetrain checkpoint (format " << kFormatVersion << ")\n"
      << "  written by wavetrain " << s.wavetrain_version << ", LibTorch " << s.torch_version << "\n"
      << "  epoch " << s.epoch << ", global step " << s.global_step << ", batch in epoch " << s.batch_in_epoch
      << ", trained " << s.train_seconds << " s\n"
      << "  optimizer: " << (s.optimizer.is_none() ? "none" : s.optimizer.find("type")->as_string())
      << ", scaler: " << (s.scaler ? "scale " + std::to_string(s.scaler->scale) : std::string("none")) << "\n";
  out << "  metrics:";
  for (const auto& [name, v] : s.metrics) out << " " << name << "=" << v;
  out << (s.metrics.empty() ? " none\n" : "\n");
  if (!s.early_stopping.monitor.empty())
    out << "  early stopping: " << s.early_stopping.monitor << ", best " << s.early_stopping.best << ", wait "
        << s.early_stopping.wait << (s.early_stopping.stopped.empty() ? "" : ", stopped (" + s.early_stopping.stopped + ")") << "\n";
  if (!s.callbacks.empty()) {
    out << "  callbacks' state:";
    for (const auto& [name, state] : s.callbacks) out << " " << name;
    out << "\n";
  }
  out << "  model: " << s.model.size() << " tensors, " << params << " values\n";
  tensors(*root.find("model"), "    ");
  return out.str();
}

std::string Checkpoint::of_target(const std::string& target) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(target)) return target;
  for (const char* name : {"checkpoints/best.ckpt", "checkpoints/last.ckpt"})
    if (fs::exists(fs::path(target) / name)) return (fs::path(target) / name).string();
  throw std::runtime_error(target + ": no checkpoints/best.ckpt or checkpoints/last.ckpt in this directory");
}

}  // namespace wavetrain
