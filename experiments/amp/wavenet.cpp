// NAM's WaveNet (wavenet.h).
#include "experiments/amp/wavenet.h"

#include <torch/nn/functional/activation.h>

#include "experiments/amp/nam_json.h"
#include "experiments/amp/wavenet_cpu.h"

#include <stdexcept>

namespace wavetrain::experiments::amp {
namespace {

std::vector<int64_t> powers_of_two(int64_t from, int64_t to) {
  std::vector<int64_t> d;
  for (int64_t x = from; x <= to; x *= 2) d.push_back(x);
  return d;
}

// NAM's presets: two layer arrays; the second array's dilations repeat for the smaller models.
WaveNetConfig two_arrays(int64_t channels, int64_t head, const std::vector<int64_t>& first,
                         const std::vector<int64_t>& second) {
  WaveNetConfig c;
  LayerArrayConfig a;
  a.input_size = 1;
  a.condition_size = 1;
  a.channels = channels;
  a.head_size = head;
  a.dilations = first;
  a.head_bias = false;
  LayerArrayConfig b;
  b.input_size = channels;
  b.condition_size = 1;
  b.channels = head;
  b.head_size = 1;
  b.dilations = second;
  b.head_bias = true;
  c.layers = {a, b};
  c.head_scale = 0.02;
  return c;
}

nlohmann::json require(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw std::invalid_argument("WaveNet config: " + where + " has no '" + key + "'");
  return j.at(key);
}

}  // namespace

std::vector<std::string> wavenet_preset_names() { return {"standard", "lite", "feather", "nano"}; }

WaveNetConfig wavenet_preset(const std::string& name) {
  const std::vector<int64_t> ten = powers_of_two(1, 512);
  std::vector<int64_t> lite_second = {128, 256, 512};
  const std::vector<int64_t> lite_first = powers_of_two(1, 64);
  lite_second.insert(lite_second.end(), ten.begin(), ten.end());
  if (name == "standard") return two_arrays(16, 8, ten, ten);
  if (name == "lite") return two_arrays(12, 6, lite_first, lite_second);
  if (name == "feather") return two_arrays(8, 4, lite_first, lite_second);
  if (name == "nano") return two_arrays(4, 2, lite_first, lite_second);
  throw std::invalid_argument("WaveNet preset '" + name + "' is not one of standard, lite, feather, nano");
}

nlohmann::json wavenet_config_to_json(const WaveNetConfig& c) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerArrayConfig& a : c.layers)
    layers.push_back({{"input_size", a.input_size}, {"condition_size", a.condition_size}, {"head_size", a.head_size},
                      {"channels", a.channels}, {"kernel_size", a.kernel_size}, {"dilations", a.dilations},
                      {"activation", a.activation}, {"gated", a.gated}, {"head_bias", a.head_bias}});
  return {{"layers", layers}, {"head", nullptr}, {"head_scale", c.head_scale}};
}

WaveNetConfig wavenet_config_from_json(const nlohmann::json& j) {
  WaveNetConfig c;
  const nlohmann::json layers = require(j, "layers", "config");
  if (!layers.is_array() || layers.empty()) throw std::invalid_argument("WaveNet config: 'layers' must be a non-empty list");
  if (j.contains("head") && !j.at("head").is_null())
    throw std::invalid_argument("WaveNet config: a post-head ('head' not null) is not supported");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "layers[" + std::to_string(i) + "]";
    const nlohmann::json& l = layers[i];
    LayerArrayConfig a;
    try {
      a.input_size = nam_integer(require(l, "input_size", where), "WaveNet config: " + where + ".input_size");
      a.condition_size = nam_integer(require(l, "condition_size", where), "WaveNet config: " + where + ".condition_size");
      a.head_size = nam_integer(require(l, "head_size", where), "WaveNet config: " + where + ".head_size");
      a.channels = nam_integer(require(l, "channels", where), "WaveNet config: " + where + ".channels");
      a.kernel_size = nam_integer(require(l, "kernel_size", where), "WaveNet config: " + where + ".kernel_size");
      a.dilations = nam_integers(require(l, "dilations", where), "WaveNet config: " + where + ".dilations");
      a.activation = require(l, "activation", where).get<std::string>();
      if (a.activation != "Tanh" && a.activation != "ReLU" && a.activation != "Sigmoid" && a.activation != "Hardtanh")
        throw std::invalid_argument("WaveNet config: " + where + ".activation '" + a.activation +
                                    "' is not one of Tanh, ReLU, Sigmoid, Hardtanh");
      a.gated = require(l, "gated", where).get<bool>();
      a.head_bias = require(l, "head_bias", where).get<bool>();
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument("WaveNet config: " + where + ": " + e.what());
    }
    c.layers.push_back(a);
  }
  c.head_scale = require(j, "head_scale", "config").get<double>();
  check_wavenet_limits(c);
  return c;
}

void check_wavenet_limits(const WaveNetConfig& c) {
  auto within = [](const std::string& what, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo || value > hi)
      throw std::invalid_argument("WaveNet config: " + what + " is " + std::to_string(value) + "; the limit is " + std::to_string(lo) +
                                  " to " + std::to_string(hi));
  };
  within("the number of layer arrays", static_cast<int64_t>(c.layers.size()), 1, kWaveNetLimits.arrays);
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerArrayConfig& a = c.layers[i];
    const std::string w = "layers[" + std::to_string(i) + "].";
    within(w + "input_size", a.input_size, 1, kWaveNetLimits.channels);
    within(w + "condition_size", a.condition_size, 1, kWaveNetLimits.channels);
    within(w + "head_size", a.head_size, 1, kWaveNetLimits.channels);
    within(w + "channels", a.channels, 1, kWaveNetLimits.channels);
    within(w + "kernel_size", a.kernel_size, 1, kWaveNetLimits.kernel_size);
    within(w + "dilations' length", static_cast<int64_t>(a.dilations.size()), 1, kWaveNetLimits.layers_per_array);
    for (size_t k = 0; k < a.dilations.size(); ++k)
      within(w + "dilations[" + std::to_string(k) + "]", a.dilations[k], 1, kWaveNetLimits.dilation);
  }
  // Every value is bounded now, so these sums cannot overflow.
  within("the receptive field (samples)", receptive_field_of(c), 1, kWaveNetLimits.receptive_field);
  within("the number of weights", wavenet_weight_count(c), 1, kWaveNetLimits.weights);
}

int64_t receptive_field_of(const WaveNetConfig& c) {
  int64_t rf = 1;
  for (const LayerArrayConfig& a : c.layers)
    for (int64_t d : a.dilations) rf += (a.kernel_size - 1) * d;
  return rf;
}

int64_t wavenet_weight_count(const WaveNetConfig& c) {
  int64_t n = 1;  // head_scale
  for (const LayerArrayConfig& a : c.layers) {
    const int64_t mid = a.gated ? 2 * a.channels : a.channels;
    n += a.input_size * a.channels;  // rechannel
    const int64_t layer = a.channels * mid * a.kernel_size + mid + a.condition_size * mid + a.channels * a.channels + a.channels;
    n += layer * static_cast<int64_t>(a.dilations.size());
    n += a.channels * a.head_size + (a.head_bias ? a.head_size : 0);  // head rechannel
  }
  return n;
}

WaveNetImpl::WaveNetImpl(WaveNetConfig config) : config_(std::move(config)) {
  namespace nn = torch::nn;
  for (size_t i = 0; i < config_.layers.size(); ++i) {
    const LayerArrayConfig& c = config_.layers[i];
    if (c.dilations.empty() || c.channels < 1 || c.kernel_size < 1)
      throw std::invalid_argument("WaveNet: layer array " + std::to_string(i) + " needs dilations, channels >= 1 and kernel_size >= 1");
    for (int64_t d : c.dilations)
      if (d < 1) throw std::invalid_argument("WaveNet: layer array " + std::to_string(i) + " has dilation " + std::to_string(d) + "; dilations must be >= 1");
    if (i > 0 && c.input_size != config_.layers[i - 1].channels)
      throw std::invalid_argument("WaveNet: layer array " + std::to_string(i) + " takes input_size " + std::to_string(c.input_size) +
                                  " but the previous array has " + std::to_string(config_.layers[i - 1].channels) + " channels");
    if (i > 0 && config_.layers[i - 1].head_size != c.channels)
      throw std::invalid_argument("WaveNet: layer array " + std::to_string(i - 1) + "'s head_size must equal array " +
                                  std::to_string(i) + "'s channels (its head is summed into it)");
    const int64_t mid = c.gated ? 2 * c.channels : c.channels;
    const std::string p = "layers" + std::to_string(i) + "_";
    Array a;
    a.rechannel = register_module(p + "rechannel", nn::Conv1d(nn::Conv1dOptions(c.input_size, c.channels, 1).bias(false)));
    for (size_t k = 0; k < c.dilations.size(); ++k) {
      const std::string q = p + "layer" + std::to_string(k) + "_";
      Layer l;
      l.conv = register_module(q + "conv", nn::Conv1d(nn::Conv1dOptions(c.channels, mid, c.kernel_size).dilation(c.dilations[k])));
      l.input_mixer = register_module(q + "input_mixer", nn::Conv1d(nn::Conv1dOptions(c.condition_size, mid, 1).bias(false)));
      l.one_by_one = register_module(q + "1x1", nn::Conv1d(nn::Conv1dOptions(c.channels, c.channels, 1)));
      a.layers.push_back(l);
    }
    a.head_rechannel = register_module(p + "head_rechannel", nn::Conv1d(nn::Conv1dOptions(c.channels, c.head_size, 1).bias(c.head_bias)));
    arrays_.push_back(a);
  }
}

int64_t WaveNetImpl::receptive_field() const { return receptive_field_of(config_); }

at::Tensor WaveNetImpl::activate(const LayerArrayConfig& c, const at::Tensor& z) const {
  auto f = [&](const at::Tensor& v) {
    if (c.activation == "Tanh") return at::tanh(v);
    if (c.activation == "ReLU") return at::relu(v);
    if (c.activation == "Sigmoid") return at::sigmoid(v);
    if (c.activation == "Hardtanh") return at::hardtanh(v);
    throw std::invalid_argument("WaveNet: activation '" + c.activation + "' is not one of Tanh, ReLU, Sigmoid, Hardtanh");
  };
  if (!c.gated) return f(z);
  return f(z.narrow(1, 0, c.channels)) * at::sigmoid(z.narrow(1, c.channels, c.channels));
}

at::Tensor WaveNetImpl::forward(const at::Tensor& x) {
  const int64_t rf = receptive_field();
  if (x.dim() != 3 || x.size(1) != 1)
    throw std::invalid_argument("WaveNet: input must be [batch][1][samples], got " + c10::str(x.sizes()));
  if (x.size(2) < rf)
    throw std::invalid_argument("WaveNet: " + std::to_string(x.size(2)) + " input samples are fewer than the receptive field (" +
                                std::to_string(rf) + ")");
  if (cpu_kernels_ && wavenet_cpu_supported(*this, x)) return wavenet_cpu_forward(*this, x);
  at::Tensor y = x, head;
  for (size_t i = 0; i < arrays_.size(); ++i) {
    const LayerArrayConfig& c = config_.layers[i];
    int64_t array_rf = 1;
    for (int64_t d : c.dilations) array_rf += (c.kernel_size - 1) * d;
    const int64_t out_length = y.size(2) - (array_rf - 1);
    at::Tensor z = arrays_[i].rechannel->forward(y);
    at::Tensor sum;  // this array's head sum, started from the previous array's head output
    if (head.defined()) sum = head.narrow(2, head.size(2) - out_length, out_length);
    for (Layer& l : arrays_[i].layers) {
      const at::Tensor conv = l.conv->forward(z);
      const at::Tensor mixed = l.input_mixer->forward(x);
      const at::Tensor post = activate(c, conv + mixed.narrow(2, mixed.size(2) - conv.size(2), conv.size(2)));
      z = z.narrow(2, z.size(2) - post.size(2), post.size(2)) + l.one_by_one->forward(post);
      const at::Tensor term = post.narrow(2, post.size(2) - out_length, out_length);
      sum = sum.defined() ? sum + term : term;
    }
    head = arrays_[i].head_rechannel->forward(sum);
    y = z;
  }
  return config_.head_scale * head;
}

std::vector<torch::nn::Conv1d> WaveNetImpl::convs_in_order() const {
  std::vector<torch::nn::Conv1d> out;
  for (const Array& a : arrays_) {
    out.push_back(a.rechannel);
    for (const Layer& l : a.layers) {
      out.push_back(l.conv);
      out.push_back(l.input_mixer);
      out.push_back(l.one_by_one);
    }
    out.push_back(a.head_rechannel);
  }
  return out;
}

std::vector<at::Tensor> WaveNetImpl::ordered_parameters() const {
  std::vector<at::Tensor> out;
  for (const torch::nn::Conv1d& c : convs_in_order())
    for (const at::Tensor& t : {c->weight, c->bias})
      if (t.defined()) out.push_back(t);
  return out;
}

std::vector<float> WaveNetImpl::export_weights() const {
  std::vector<float> w;
  for (const torch::nn::Conv1d& c : convs_in_order()) {
    for (const at::Tensor& t : {c->weight, c->bias}) {
      if (!t.defined()) continue;
      const at::Tensor flat = t.detach().to(at::kFloat).cpu().contiguous().view({-1});  // [out][in][k] row-major
      w.insert(w.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
    }
  }
  w.push_back(static_cast<float>(config_.head_scale));
  return w;
}

void WaveNetImpl::import_weights(const std::vector<float>& w) {
  size_t expected = 1;
  for (const torch::nn::Conv1d& c : convs_in_order())
    expected += static_cast<size_t>(c->weight.numel()) + (c->bias.defined() ? static_cast<size_t>(c->bias.numel()) : 0);
  if (w.size() != expected)
    throw std::invalid_argument("WaveNet: " + std::to_string(w.size()) + " weights given, this architecture has " +
                                std::to_string(expected) + " (parameters and head_scale)");
  torch::NoGradGuard no_grad;
  size_t at = 0;
  for (const torch::nn::Conv1d& c : convs_in_order())
    for (at::Tensor t : {c->weight, c->bias}) {
      if (!t.defined()) continue;
      const at::Tensor src = at::from_blob(const_cast<float*>(w.data() + at), t.sizes(), at::kFloat);
      t.copy_(src);
      at += static_cast<size_t>(t.numel());
    }
  config_.head_scale = w.back();
}

}  // namespace wavetrain::experiments::amp
