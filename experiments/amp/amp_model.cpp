// Amp models, .nam files and long-audio processing (amp_model.h).
#include "experiments/amp/amp_model.h"
#include "experiments/amp/nam_dsp.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <charconv>
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

[[noreturn]] void bad_file(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

void check_options(const ProcessOptions& o) {
  if (o.chunk < 1) throw std::invalid_argument("process: chunk must be >= 1");
  if (o.overlap < 0) throw std::invalid_argument("process: overlap must be >= 0");
  if (o.mode != "exact" && o.mode != "stream" && o.mode != "crossfade")
    throw std::invalid_argument("process: mode '" + o.mode + "' is not exact, stream or crossfade");
}

// The chunks of a WaveNet that go through LibTorch at once: one per thread (the CPU
// kernels run a batch's items in parallel), at most 16, to bound memory.
int64_t chunks_per_batch() { return std::clamp(at::get_num_threads(), 1, 16); }

// The real-time engine's largest block: the chunk in stream mode (a host's buffer), else 8192.
int64_t engine_block(const ProcessOptions& o) {
  return std::min<int64_t>(std::min<int64_t>(o.chunk, o.mode == "stream" ? o.chunk : 8192), 65536);
}

// Crossfade mode: the `lead` samples a chunk computed early blend linearly into the previous
// output. One function for process() and AmpStream, so that both round alike.
void blend_lead(float* y, const float* fresh, int64_t lead) {
  for (int64_t i = 0; i < lead; ++i) {
    const float ramp = static_cast<float>(i + 1) / static_cast<float>(lead + 1);
    y[i] = y[i] * (1 - ramp) + fresh[i] * ramp;
  }
}

}  // namespace

torch::nn::Module& AmpModel::module() {
  if (wavenet) return *wavenet;
  if (lstm) return *lstm;
  if (convnet) return *convnet;
  if (linear) return *linear;
  throw std::invalid_argument("this " + architecture + " model is played from its .nam file; the trainer does not build it");
}

at::Tensor AmpModel::forward(const at::Tensor& x) {
  if (wavenet) return wavenet->forward(x);
  if (lstm) return lstm->forward(x);
  if (convnet) return convnet->forward(x);
  if (linear) return linear->forward(x);
  throw std::invalid_argument("this " + architecture + " model is played from its .nam file; the trainer does not build it");
}

int64_t AmpModel::receptive_field() const {
  if (wavenet) return wavenet->receptive_field();
  if (convnet) return convnet->receptive_field();
  if (linear) return linear->receptive_field();
  return file ? file->receptive_field() : 1;
}

std::vector<at::Tensor> AmpModel::module_parameters() const {
  if (wavenet) return wavenet->parameters();
  if (lstm) return lstm->parameters();
  if (convnet) return convnet->parameters();
  if (linear) return linear->parameters();
  return {};
}

int64_t AmpModel::parameters() const {
  if (!trainable()) {
    int64_t n = 0;
    const NamFileModel& f = file->default_model();
    n += static_cast<int64_t>(f.weights.size());
    return n;
  }
  int64_t n = 0;
  for (const at::Tensor& p : module_parameters()) n += p.numel();
  return n;
}

NamFileModel AmpModel::to_nam() const {
  NamFileModel f;
  if (file) {
    f = *file;
  } else {
    f.architecture = architecture;
    if (wavenet) {
      f.wavenet = wavenet->exported_spec();
      if (!nam_config.is_null()) f.wavenet.source = nam_config;
      f.weights = wavenet->export_weights();
      // The config's head_scale as NAM's trainer writes it: the float32 weight's shortest decimal
      // (0.02, not 0.019999999552965164); the plugin reads the weight.
      char text[32];
      const auto end = std::to_chars(text, text + sizeof(text), f.weights.back()).ptr;
      f.wavenet.head_scale = std::stod(std::string(text, end));
    } else if (convnet) {
      f.convnet = convnet->config();
      f.weights = convnet->export_weights();
    } else if (linear) {
      f.linear = linear->config();
      f.weights = linear->export_weights();
    } else {
      f.lstm = lstm->config();
      f.weights = lstm->export_weights();
    }
    f.extra = nam_extra;
  }
  f.version = nam_version.empty() ? nam_min_version(f) : nam_version;
  if (sample_rate_in_file) f.sample_rate = sample_rate;
  else f.sample_rate.reset();
  f.metadata = metadata;  // null: an imported file without metadata stays without
  return f;
}

AmpModel wavenet_model_of(const NamWaveNetSpec& spec) {
  AmpModel m;
  m.architecture = "WaveNet";
  m.wavenet = NamWaveNet(spec);
  return m;
}

AmpModel make_amp_model(const std::string& architecture, const std::string& preset, double sample_rate, const std::string& activation,
                        const std::string& gating) {
  AmpModel m;
  if (architecture == "wavenet") {
    const std::vector<std::string> beyond = nam_wavenet_preset_names();
    const bool is_beyond = std::find(beyond.begin(), beyond.end(), preset) != beyond.end();
    NamWaveNetSpec spec = is_beyond ? nam_wavenet_preset(preset) : nam_of(wavenet_preset(preset));
    set_activation(spec, activation, gating);
    m = wavenet_model_of(spec);
  } else if (architecture == "lstm") {
    m.architecture = "LSTM";
    if (!activation.empty() || !gating.empty()) throw std::invalid_argument("model.activation and model.gating are for WaveNets, not the LSTM");
    m.lstm = Lstm(lstm_preset(preset));
  } else if (architecture == "convnet") {
    m.architecture = "ConvNet";
    if (!gating.empty()) throw std::invalid_argument("model.gating is for WaveNets, not the ConvNet");
    ConvNetConfig c = convnet_preset(preset);
    if (!activation.empty()) c.activation = activation_from_json(activation, "model.activation");  // a name the core knows
    m.convnet = ConvNetModule(c);
  } else if (architecture == "linear") {
    m.architecture = "Linear";
    if (!activation.empty() || !gating.empty()) throw std::invalid_argument("model.activation and model.gating are not for the Linear model");
    m.linear = LinearModule(linear_preset(preset));
  } else {
    throw std::invalid_argument("model.architecture '" + architecture + "' is not one of wavenet, lstm, convnet, linear");
  }
  m.sample_rate = sample_rate;
  return m;
}

void write_nam(const std::string& path, const AmpModel& m) {
  NamFileModel f = m.to_nam();
  // A model made here gets the date it is written; an imported file's metadata stays as it was.
  if (m.nam_version.empty() && !f.metadata.is_object()) f.metadata = nlohmann::json::object();
  if (m.nam_version.empty() && !f.metadata.contains("date")) {
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&now, &tm);
    f.metadata["date"] = {{"year", tm.tm_year + 1900}, {"month", tm.tm_mon + 1}, {"day", tm.tm_mday},
                          {"hour", tm.tm_hour},         {"minute", tm.tm_min},    {"second", tm.tm_sec}};
  }
  write_nam_file(path, f);
}

AmpModel amp_model_of(const NamFileModel& f) {
  AmpModel m;
  m.architecture = f.architecture;
  m.nam_version = f.version;
  m.nam_extra = f.extra;
  m.metadata = f.metadata;
  m.sample_rate = f.default_model().sample_rate.value_or(f.sample_rate.value_or(48000.0));
  m.sample_rate_in_file = f.sample_rate.has_value();
  if (f.architecture == "WaveNet") {
    m.wavenet = NamWaveNet(f.wavenet);
    m.wavenet->import_weights(f.weights);
    return m;
  } else if (f.architecture == "LSTM") {
    m.lstm = Lstm(f.lstm);
    m.lstm->import_weights(f.weights);
    return m;
  } else if (f.architecture == "ConvNet") {
    m.convnet = ConvNetModule(f.convnet);
    m.convnet->import_weights(f.weights);
    return m;
  } else if (f.architecture == "Linear") {
    m.linear = LinearModule(f.linear);
    m.linear->import_weights(f.weights);
    return m;
  }
  m.file = std::make_shared<NamFileModel>(f);
  return m;
}

AmpModel read_nam(const std::string& path) {
  const NamFileModel f = read_nam_file(path);
  try {
    return amp_model_of(f);
  } catch (const c10::Error& e) {  // building a module: LibTorch's message, without its backtrace
    const std::string what = e.what_without_backtrace();
    bad_file(path, what.substr(0, what.find('\n')));
  } catch (const std::exception& e) {
    bad_file(path, e.what());
  }
}

at::Tensor process(AmpModel& m, const at::Tensor& audio, const ProcessOptions& o) {
  if (audio.dim() != 1) throw std::invalid_argument("process: audio must be mono [samples], got " + c10::str(audio.sizes()));
  // The whole audio as one piece of a stream: one implementation of every mode (AmpStream).
  const at::Tensor x = audio.to(at::kFloat).contiguous();
  AmpStream stream(m, o);
  std::vector<float> y;
  y.reserve(static_cast<size_t>(x.numel()));
  stream.push(x.data_ptr<float>(), x.numel(), y);
  stream.finish(y);
  return at::from_blob(y.data(), {static_cast<int64_t>(y.size())}, at::kFloat).clone();
}

AmpStream::AmpStream(AmpModel& model, const ProcessOptions& o) : model_(model), options_(o) {
  check_options(o);
  if (o.mode == "exact" && model.wavenet && model.wavenet->cpu_kernels_cover() && !o.fast_tanh) {
    libtorch_ = true;
    model.module().eval();
    rf_ = model.receptive_field();
    per_batch_ = chunks_per_batch();
    context_.assign(static_cast<size_t>(rf_ - 1), 0.0f);  // WaveNet sees zeros before the first sample
  } else {
    file_ = std::make_unique<NamFileModel>(model.to_nam());
    dsp_ = std::make_unique<NamDsp>(*file_, engine_block(o), o.prewarm, o.fast_tanh);
  }
}

AmpStream::~AmpStream() = default;

void AmpStream::push(const float* in, int64_t n, std::vector<float>& out) {
  if (finished_) throw std::logic_error("AmpStream: push after finish");
  if (n < 0) throw std::invalid_argument("AmpStream: push of " + std::to_string(n) + " samples");
  pending_.insert(pending_.end(), in, in + n);
  drain(false, out);
}

void AmpStream::finish(std::vector<float>& out) {
  if (finished_) return;
  drain(true, out);
  finished_ = true;
}

void AmpStream::drain(bool at_end, std::vector<float>& out) {
  const int64_t avail = static_cast<int64_t>(pending_.size()), chunk = options_.chunk;
  int64_t pos = 0;  // input of pending_ processed by this call
  if (libtorch_) {
    // As process(): the same chunk grid and the same batches (full ones until the end), so the
    // same numbers.
    torch::NoGradGuard no_grad;
    const int64_t full = avail / chunk, chunks = at_end ? full : full / per_batch_ * per_batch_;
    if (chunks == 0 && !(at_end && avail > 0)) return;
    at::Tensor padded = at::empty({rf_ - 1 + avail}, at::kFloat);
    std::copy(context_.begin(), context_.end(), padded.data_ptr<float>());
    std::copy(pending_.begin(), pending_.end(), padded.data_ptr<float>() + (rf_ - 1));
    auto append = [&](const at::Tensor& y) {
      const at::Tensor flat = y.contiguous().view({-1});
      out.insert(out.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
    };
    for (int64_t c = 0; c < chunks; c += per_batch_) {
      const int64_t count = std::min(per_batch_, chunks - c);
      const at::Tensor windows = padded.narrow(0, c * chunk, count * chunk + rf_ - 1).unfold(0, chunk + rf_ - 1, chunk).unsqueeze(1);
      append(model_.wavenet->forward(windows.contiguous()));
    }
    pos = chunks * chunk;
    if (at_end && pos < avail) {
      append(model_.wavenet->forward(padded.narrow(0, pos, avail - pos + rf_ - 1).view({1, 1, -1})));
      pos = avail;
    }
    const float* p = padded.data_ptr<float>() + pos;  // the rf - 1 samples before the next input
    context_.assign(p, p + (rf_ - 1));
  } else if (options_.mode != "crossfade") {
    while (avail - pos >= chunk || (at_end && pos < avail)) {
      const int64_t len = std::min(chunk, avail - pos);
      const size_t at = out.size();
      out.resize(at + static_cast<size_t>(len));
      dsp_->process(pending_.data() + pos, out.data() + at, len);
      pos += len;
    }
  } else {
    // Each chunk restarts `lead` samples early (from context_) and blends into the output before
    // it, which is held back (held_) until no later chunk can reach it.
    const int64_t overlap = options_.overlap, kept = static_cast<int64_t>(context_.size());
    std::vector<float> source(context_);
    source.insert(source.end(), pending_.begin(), pending_.end());
    std::vector<float> y(held_);
    const int64_t held = static_cast<int64_t>(held_.size());
    std::vector<float> fresh;
    while (avail - pos >= chunk || (at_end && pos < avail)) {
      const int64_t len = std::min(chunk, avail - pos), lead = std::min(overlap, consumed_ + pos);
      fresh.resize(static_cast<size_t>(len + lead));
      dsp_->reset();
      dsp_->process(source.data() + kept + pos - lead, fresh.data(), len + lead);
      y.insert(y.end(), fresh.begin() + lead, fresh.end());
      blend_lead(y.data() + held + pos - lead, fresh.data(), lead);
      pos += len;
    }
    const int64_t keep = at_end ? 0 : std::min(overlap, consumed_ + pos);
    out.insert(out.end(), y.begin(), y.end() - keep);
    held_.assign(y.end() - keep, y.end());
    const int64_t context = std::min(overlap, consumed_ + pos);
    context_.assign(source.begin() + (kept + pos - context), source.begin() + (kept + pos));
  }
  pending_.erase(pending_.begin(), pending_.begin() + pos);
  consumed_ += pos;
}

}  // namespace wavetrain::experiments::amp
