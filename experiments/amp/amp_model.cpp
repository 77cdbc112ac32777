// Amp models, .nam files and long-audio processing (amp_model.h).
#include "experiments/amp/amp_model.h"
#include "experiments/amp/wavenet_stream.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace wavetrain::experiments::amp {
namespace {

constexpr const char* kNamVersion = "0.5.4";

[[noreturn]] void bad_file(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

}  // namespace

torch::nn::Module& AmpModel::module() {
  if (wavenet) return *wavenet;
  return *lstm;
}

int64_t AmpModel::receptive_field() const { return wavenet ? wavenet->receptive_field() : 1; }

int64_t AmpModel::parameters() const {
  int64_t n = 0;
  for (const at::Tensor& p : (wavenet ? wavenet->parameters() : lstm->parameters())) n += p.numel();
  return n;
}

AmpModel make_amp_model(const std::string& architecture, const std::string& preset, double sample_rate) {
  AmpModel m;
  m.sample_rate = sample_rate;
  if (architecture == "wavenet") {
    m.architecture = "WaveNet";
    m.wavenet = WaveNet(wavenet_preset(preset));
  } else if (architecture == "lstm") {
    m.architecture = "LSTM";
    m.lstm = Lstm(lstm_preset(preset));
  } else {
    throw std::invalid_argument("model.architecture '" + architecture + "' is not one of wavenet, lstm");
  }
  return m;
}

void write_nam(const std::string& path, const AmpModel& m) {
  nlohmann::json j;
  const std::vector<float> weights = m.wavenet ? m.wavenet->export_weights() : m.lstm->export_weights();
  for (size_t i = 0; i < weights.size(); ++i)  // JSON has no NaN or infinity: the file would not load
    if (!std::isfinite(weights[i])) bad_file(path, "not written: weight " + std::to_string(i) + " is " + std::to_string(weights[i]));
  j["version"] = m.nam_version.empty() ? kNamVersion : m.nam_version;
  j["architecture"] = m.architecture;
  j["config"] = m.wavenet ? wavenet_config_to_json(m.wavenet->config()) : lstm_config_to_json(m.lstm->config());
  j["weights"] = weights;
  j["sample_rate"] = m.sample_rate;
  nlohmann::json meta = m.metadata;
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  if (!meta.contains("date"))
    meta["date"] = {{"year", tm.tm_year + 1900}, {"month", tm.tm_mon + 1}, {"day", tm.tm_mday},
                    {"hour", tm.tm_hour},         {"minute", tm.tm_min},    {"second", tm.tm_sec}};
  j["metadata"] = meta;
  const std::filesystem::path target(path);
  const std::string temporary = (target.parent_path() / ("." + target.filename().string() + ".partial")).string();
  {
    std::ofstream out(temporary);
    out << j.dump();
    if (!out) bad_file(path, "cannot be written");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, target, ec);
  if (ec) bad_file(path, "cannot be put in place: " + ec.message());
}

AmpModel read_nam(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad_file(path, "cannot be opened");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    bad_file(path, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) bad_file(path, "is JSON but not an object (not a .nam file?)");
  for (const char* key : {"version", "architecture", "config", "weights"})
    if (!j.contains(key)) bad_file(path, std::string("no '") + key + "' (not a .nam file?)");
  AmpModel m;
  // Everything below reads values whose type the file decides: a wrong type is a JSON type error,
  // reported with the file's name like any other problem.
  try {
    const std::string version = j.at("version").get<std::string>();
    if (version.rfind("0.5.", 0) != 0) bad_file(path, "version " + version + "; this reader takes 0.5.x");
    m.nam_version = version;
    m.architecture = j.at("architecture").get<std::string>();
    const nlohmann::json& weights = j.at("weights");
    if (!weights.is_array()) bad_file(path, "'weights' is not a list");
    // The config is checked against its limits and the weight count against it before any
    // module is built: a file cannot make the reader allocate more than its weights' worth.
    int64_t expected = 0;
    if (m.architecture == "WaveNet") {
      const WaveNetConfig c = wavenet_config_from_json(j.at("config"));
      expected = wavenet_weight_count(c);
      if (static_cast<int64_t>(weights.size()) == expected) m.wavenet = WaveNet(c);
    } else if (m.architecture == "LSTM") {
      const LstmConfig c = lstm_config_from_json(j.at("config"));
      expected = lstm_weight_count(c);
      if (static_cast<int64_t>(weights.size()) == expected) m.lstm = Lstm(c);
    } else {
      bad_file(path, "architecture '" + m.architecture + "' is not WaveNet or LSTM");
    }
    if (static_cast<int64_t>(weights.size()) != expected)
      bad_file(path, std::to_string(weights.size()) + " weights, its config has " + std::to_string(expected));
    // As doubles first: a value past float32's range would not convert (and JSON has no inf/NaN
    // to write it back with; fuzzing found 7.7e81 read as inf and written as null).
    const std::vector<double> values = weights.get<std::vector<double>>();
    std::vector<float> w(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (!(std::abs(values[i]) <= std::numeric_limits<float>::max())) {
        char text[32];
        std::snprintf(text, sizeof(text), "%.9g", values[i]);
        bad_file(path, "weights[" + std::to_string(i) + "] is " + text + ", not a finite float32 value");
      }
      w[i] = static_cast<float>(values[i]);
    }
    if (m.wavenet) m.wavenet->import_weights(w);
    else m.lstm->import_weights(w);
    if (j.contains("sample_rate") && !j.at("sample_rate").is_null()) m.sample_rate = j.at("sample_rate").get<double>();
  } catch (const std::invalid_argument& e) {
    bad_file(path, e.what());
  } catch (const nlohmann::json::exception& e) {
    bad_file(path, e.what());
  }
  if (!(m.sample_rate >= 1000 && m.sample_rate <= 768000))
    bad_file(path, "sample_rate " + std::to_string(m.sample_rate) + " is outside 1000 to 768000 Hz");
  if (j.contains("metadata") && j["metadata"].is_object()) m.metadata = j["metadata"];
  return m;
}

at::Tensor process(AmpModel& m, const at::Tensor& audio, const ProcessOptions& o) {
  if (audio.dim() != 1) throw std::invalid_argument("process: audio must be mono [samples], got " + c10::str(audio.sizes()));
  if (o.chunk < 1) throw std::invalid_argument("process: chunk must be >= 1");
  torch::NoGradGuard no_grad;
  m.module().eval();
  const at::Tensor x = audio.to(at::kFloat).contiguous();
  const int64_t n = x.numel(), rf = m.receptive_field();
  at::Tensor out = at::empty({n}, at::kFloat);
  auto run_fresh = [&](const at::Tensor& in) {  // [L] -> [L], zero context / initial state
    if (m.wavenet) return m.wavenet->forward(at::cat({at::zeros({rf - 1}), in}).view({1, 1, -1})).view({-1});
    return m.lstm->forward(in.view({1, 1, -1})).view({-1});
  };
  if (o.mode == "exact") {
    const at::Tensor padded = at::cat({at::zeros({rf - 1}), x});
    LstmImpl::State state;
    if (m.wavenet) {
      // Chunks are independent given their context: full ones go through in batches of one per
      // thread (the CPU kernels run a batch's items in parallel; at most 16, to bound memory),
      // then the short last one.
      const int64_t full = n / o.chunk, per_batch = std::clamp(at::get_num_threads(), 1, 16);
      for (int64_t c = 0; c < full; c += per_batch) {
        const int64_t count = std::min(per_batch, full - c);
        const at::Tensor windows = padded.narrow(0, c * o.chunk, (count - 1) * o.chunk + o.chunk + rf - 1)
                                       .unfold(0, o.chunk + rf - 1, o.chunk)  // [count][chunk + rf - 1]
                                       .unsqueeze(1);
        out.narrow(0, c * o.chunk, count * o.chunk).copy_(m.wavenet->forward(windows.contiguous()).view({-1}));
      }
      if (const int64_t s = full * o.chunk; s < n)
        out.narrow(0, s, n - s).copy_(m.wavenet->forward(padded.narrow(0, s, n - s + rf - 1).view({1, 1, -1})).view({-1}));
      return out;
    }
    for (int64_t s = 0; s < n; s += o.chunk) {
      const int64_t len = std::min(o.chunk, n - s);
      out.narrow(0, s, len).copy_(m.lstm->forward(x.narrow(0, s, len).view({1, 1, -1}), state).view({-1}));
    }
    return out;
  }
  if (o.mode == "stream") {  // real-time buffers of `chunk` samples
    if (m.wavenet && WaveNetStream::can_stream(m.wavenet->config())) {
      WaveNetStream stream(*m.wavenet, std::min<int64_t>(o.chunk, 4096));
      for (int64_t s = 0; s < n; s += o.chunk) {
        const int64_t len = std::min(o.chunk, n - s);
        stream.process(x.data_ptr<float>() + s, out.data_ptr<float>() + s, len);
      }
      return out;
    }
    ProcessOptions exact = o;  // the LSTM streams by carrying its state: exact mode does that
    exact.mode = "exact";
    return process(m, audio, exact);
  }
  if (o.mode != "crossfade") throw std::invalid_argument("process: mode '" + o.mode + "' is not exact, stream or crossfade");
  for (int64_t s = 0; s < n; s += o.chunk) {
    const int64_t len = std::min(o.chunk, n - s), lead = std::min(o.overlap, s);
    const at::Tensor y = run_fresh(x.narrow(0, s - lead, len + lead));
    out.narrow(0, s, len).copy_(y.narrow(0, lead, len));
    if (lead > 0) {  // blend the early start into the previous chunk's tail
      const at::Tensor ramp = (at::arange(lead, at::kFloat) + 1) / static_cast<double>(lead + 1);
      const at::Tensor prev = out.narrow(0, s - lead, lead);
      prev.copy_(prev * (1 - ramp) + y.narrow(0, 0, lead) * ramp);
    }
  }
  return out;
}

}  // namespace wavetrain::experiments::amp
