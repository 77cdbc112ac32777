// The config of NAM's WaveNet (wavenet_config.h).
#include "experiments/amp/wavenet_config.h"

#include "experiments/amp/nam_json.h"

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

}  // namespace wavetrain::experiments::amp
