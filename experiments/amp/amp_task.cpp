// The "amp" training task: a NAM model learns an amp from a capture store (capture.h).
//
// Training items are windows of the training split, as in the NAM trainer: `amp.segment` output
// samples (8192) each, with the model's context in front (the receptive field - 1 for WaveNet,
// `amp.burn_in` samples for the LSTM, whose state has no fixed context), starting every segment
// samples. A store with several training items (several captures of one amp) gives the windows
// of each in turn; no window straddles two items. Validation is one pass over the validation
// split's one item; ESR is computed on it as the NAM trainer reports it. The store is read and
// checked by read_capture (capture.h).
//
// Config: amp.data (the capture store, required), amp.segment, amp.burn_in, amp.loss.{mse, esr,
// dc, mrstft, pre_emphasis} (configs/experiment/amp.yaml has NAM's defaults), model.architecture
// (wavenet, lstm), model.preset.
#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "data/hdf5_store.h"
#include "experiments/amp/amp_model.h"
#include "experiments/amp/amp_task.h"
#include "experiments/amp/nam_file.h"
#include "experiments/amp/capture.h"
#include "losses/audio_losses.h"
#include "trainer/task.h"

namespace wavetrain::experiments::amp {
namespace {

losses::CombinedLoss loss_from_config(const config::Config& cfg) {
  std::vector<std::pair<std::string, double>> terms;
  for (const char* name : {"mse", "esr", "dc", "mrstft", "pre_emphasis"}) {
    const std::string key = std::string("amp.loss.") + name;
    if (cfg.has(key)) terms.emplace_back(name, cfg.get_float(key));
  }
  if (terms.empty()) terms = {{"mse", 1.0}};
  return losses::CombinedLoss(terms);
}

// amp.segment, checked against the loss: the STFT's own error named neither key. Bounded, since
// window starts are summed with it (2^31 samples is 12 hours at 48 kHz).
int64_t checked_segment(const config::Config& cfg, const losses::CombinedLoss& loss) {
  const int64_t segment = cfg.get_int_at_most("amp.segment", 8192, int64_t{1} << 31);
  if (segment < 1) throw config::ConfigError("amp.segment must be >= 1, got " + std::to_string(segment));
  if (segment < loss.min_length())
    throw config::ConfigError("amp.segment=" + std::to_string(segment) + " (" + cfg.value("amp.segment").origin().str() +
                              ") is too short for the loss: amp.loss." + loss.min_length_reason() + " needs segments of at least " +
                              std::to_string(loss.min_length()) + " samples");
  return segment;
}

class AmpTask : public Task {
 public:
  explicit AmpTask(const config::Config& cfg) : loss_(loss_from_config(cfg)), segment_(checked_segment(cfg, loss_)) {
    const std::string path = cfg.get_string("amp.data");
    const data::DatasetReader store = open_capture_store(cfg);
    CaptureData capture = read_capture(store);
    train_x_ = std::move(capture.train_input);
    train_y_ = std::move(capture.train_target);
    valid_x_ = capture.valid_input;
    valid_y_ = capture.valid_target;
    model_ = amp_model_from_config(cfg, &store);
    // Window starts are summed with it: bounded as amp.segment is.
    context_ = model_.is_convolutional() ? model_.receptive_field() - 1 : cfg.get_int_at_most("amp.burn_in", 4096, int64_t{1} << 31);
    int64_t longest = 0;
    for (size_t k = 0; k < train_x_.size(); ++k) {
      const int64_t n = train_x_[k].numel();
      longest = std::max(longest, n);
      for (int64_t start = 0; start + context_ + segment_ <= n; start += segment_) windows_.emplace_back(k, start);
    }
    if (windows_.empty())
      throw config::ConfigError(path + ": the training split (" + std::to_string(longest) + " samples" +
                                (train_x_.size() > 1 ? " in the longest of its " + std::to_string(train_x_.size()) + " items" : "") +
                                ") is shorter than one item (" + std::to_string(context_ + segment_) + ")");
    if (valid_x_.numel() <= context_)
      throw config::ConfigError(path + ": the validation split (" + std::to_string(valid_x_.numel()) +
                                " samples) is not longer than the model's context (" + std::to_string(context_) + ")");
  }

  torch::nn::Module& model() override { return model_.module(); }

  int64_t size(Split split) const override {
    return split == Split::Train ? static_cast<int64_t>(windows_.size()) : 1;
  }

  Batch make_batch(Split split, const std::vector<int64_t>& indices, const at::Device& device) override {
    if (split == Split::Validation)
      return {valid_x_.view({1, 1, -1}).to(device), valid_y_.narrow(0, context_, valid_y_.numel() - context_).view({1, 1, -1}).to(device), 1};
    std::vector<at::Tensor> xs, ys;
    for (int64_t i : indices) {
      const auto& [item, start] = windows_.at(static_cast<size_t>(i));
      xs.push_back(train_x_[item].narrow(0, start, context_ + segment_));
      ys.push_back(train_y_[item].narrow(0, start + context_, segment_));
    }
    return {at::stack(xs).unsqueeze(1).to(device), at::stack(ys).unsqueeze(1).to(device), static_cast<int64_t>(indices.size())};
  }

  at::Tensor forward(const Batch& batch) override {
    if (model_.is_convolutional()) return model_.forward(batch.input);
    const at::Tensor y = model_.lstm->forward(batch.input);
    return y.narrow(2, context_, y.size(2) - context_);
  }

  at::Tensor loss(const at::Tensor& prediction, const Batch& batch, Metrics& logged) override {
    std::vector<std::pair<std::string, double>> parts;
    const at::Tensor l = loss_(prediction, batch.target, &parts);
    for (const auto& [name, value] : parts) logged.emplace_back("train/" + name, value);
    return l;
  }

  Metrics validation_metrics(const at::Tensor& prediction, const Batch& batch) override {
    return {{"val/esr", losses::esr(prediction, batch.target).item<double>()},
            {"val/mse", losses::mse(prediction, batch.target).item<double>()}};
  }

  // Seconds of target audio trained on per second ("52.3 s audio/s"): an item is one segment of
  // output samples (its context in front is input only). Items/s would hide the segment length,
  // and "samples/s" reads as audio samples to the people who use this task.
  ThroughputUnit throughput_unit() const override {
    return {"s audio", static_cast<double>(segment_) / model_.sample_rate};
  }

  // The model's rate came from the capture store unless amp.sample_rate gave it: recorded, so that
  // export nam, infer and eval of the checkpoint do not look for the capture (relative to wherever
  // they run) to learn it.
  void add_to_recorded_config(config::Node& recorded) const override {
    if (!recorded.find_path("amp.sample_rate")) recorded.set_path("amp.sample_rate", config::Node::floating(model_.sample_rate));
  }

 private:
  losses::CombinedLoss loss_;
  AmpModel model_;
  std::vector<at::Tensor> train_x_, train_y_;  // one per training item
  at::Tensor valid_x_, valid_y_;
  std::vector<std::pair<size_t, int64_t>> windows_;  // (training item, first input sample) of each window
  int64_t segment_ = 8192, context_ = 0;
};

}  // namespace

std::unique_ptr<Task> make_amp_task(const config::Config& cfg) { return std::make_unique<AmpTask>(cfg); }

void check_amp_config(const config::Config& cfg) { checked_segment(cfg, loss_from_config(cfg)); }

std::vector<config::KeySpec> amp_config_keys() {
  using config::ValueType;
  const ValueType Int = ValueType::Int, Num = ValueType::Number, Str = ValueType::String;
  return {{"amp.data", Str},           {"amp.segment", Int},          {"amp.burn_in", Int},          {"amp.sample_rate", Num},
          {"amp.loss.mse", Num},       {"amp.loss.esr", Num},         {"amp.loss.dc", Num},          {"amp.loss.mrstft", Num},
          {"amp.loss.pre_emphasis", Num}, {"model.architecture", Str}, {"model.preset", Str},        {"model.activation", Str},
          {"model.gating", Str}};
}

double capture_sample_rate(const data::DatasetReader& store) { return capture_store_sample_rate(store); }

data::DatasetReader open_capture_store(const config::Config& cfg, size_t cache_items) {
  const std::string path = cfg.get_string("amp.data");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    // A relative amp.data is relative to where the training ran; eval may run anywhere else.
    const std::filesystem::path looked = std::filesystem::absolute(path, ec);
    throw config::ConfigError("amp.data: the capture store '" + path + "' does not exist" +
                              (looked.string() != path ? " (looked for " + looked.string() + ")" : std::string()) +
                              "; give its path with amp.data=PATH");
  }
  return data::DatasetReader(path, cache_items);
}

AmpModel amp_model_from_config(const config::Config& cfg, const data::DatasetReader* store) {
  AmpModel m;
  if (cfg.has("nam.file"))
    throw config::ConfigError("model: this checkpoint holds an imported .nam model the trainer does not build (" +
                              cfg.get_string("model.architecture", "nam_file") + "); infer and export nam read it, training cannot start from it");
  if (cfg.has("model.nam_config")) {  // an imported .nam model that matches no preset: its config
    const nlohmann::json j = nlohmann::json::parse(cfg.get_string("model.nam_config"));
    const std::string architecture = cfg.get_string("model.architecture");
    if (architecture == "lstm") {
      m.architecture = "LSTM";
      m.lstm = Lstm(lstm_config_from_json(j));
    } else if (architecture == "convnet") {
      m.architecture = "ConvNet";
      m.convnet = ConvNetModule(convnet_config_from_json(j, "model.nam_config"));
    } else if (architecture == "linear") {
      m.architecture = "Linear";
      m.linear = LinearModule(linear_config_from_json(j, "model.nam_config"));
    } else {
      m = wavenet_model_of(nam_wavenet_from_json(j, cfg.get_string("nam.version", "0.5.4")));
    }
  } else {
    try {
      m = make_amp_model(cfg.get_string("model.architecture", "wavenet"), cfg.get_string("model.preset", "standard"), 48000,
                         cfg.get_string("model.activation", ""), cfg.get_string("model.gating", ""));
    } catch (const std::invalid_argument& e) {
      throw config::ConfigError(e.what());
    }
  }
  std::string rate_from = "the default 48000 Hz";
  if (cfg.has("amp.sample_rate")) {
    m.sample_rate = cfg.get_float("amp.sample_rate");
    rate_from = "amp.sample_rate (" + cfg.value("amp.sample_rate").origin().str() + ")";
  } else if (store) {
    m.sample_rate = capture_sample_rate(*store);
    rate_from = "the capture store's sample_rate";
  } else if (cfg.has("amp.data")) {
    m.sample_rate = capture_sample_rate(open_capture_store(cfg, 0));
    rate_from = cfg.get_string("amp.data") + ": sample_rate";
  }
  // A model at a rate no .nam file may have could be trained but never exported or played.
  if (!nam_sample_rate_supported(m.sample_rate))
    throw config::ConfigError(rate_from + ": " + nam_sample_rate_problem(m.sample_rate));
  return m;
}

}  // namespace wavetrain::experiments::amp
