// The .nam WaveNet config, 0.5 to 0.7 (nam_wavenet.h).
#include "experiments/amp/nam_wavenet.h"

#include <algorithm>
#include <stdexcept>

#include "experiments/amp/nam_file.h"
#include "experiments/amp/nam_json.h"

namespace wavetrain::experiments::amp {
namespace {

// `where` is the key's path within the config; nam_model_from_json puts "config." in front.
[[noreturn]] void fail(const std::string& where, const std::string& what) { throw NamKeyError(where, what); }

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The parameters each type takes, in the order ActivationSpec::params holds them, with defaults
// (PyTorch's, which the core uses too).
struct ActivationInfo {
  const char* type;
  std::vector<std::pair<const char*, double>> params;
};
const std::vector<ActivationInfo>& activation_table() {
  static const std::vector<ActivationInfo> table = {
      {"Tanh", {}},
      {"Fasttanh", {}},
      {"Hardtanh", {}},  // clamp to [-1, 1]; the core takes no parameters
      {"LeakyHardtanh", {{"min_val", -1.0}, {"max_val", 1.0}, {"min_slope", 0.01}, {"max_slope", 0.01}}},
      {"ReLU", {}},
      {"LeakyReLU", {{"negative_slope", 0.01}}},
      {"PReLU", {}},  // negative_slope or negative_slopes, read below
      {"Sigmoid", {}},
      {"SiLU", {}},
      {"Hardswish", {}},
      {"Softsign", {}},
  };
  return table;
}

double number(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number()) fail(where, "expected a number, found " + nam_json_found(v));
  return v.get<double>();
}

// A per-layer value given once or as a list of one per layer.
std::vector<nlohmann::json> per_layer(const nlohmann::json& v, size_t layers, const std::string& where) {
  if (!v.is_array()) return std::vector<nlohmann::json>(layers, v);
  if (v.size() != layers)
    fail(where, "has " + std::to_string(v.size()) + " entries for " + std::to_string(layers) + " layers (one per dilation)");
  return std::vector<nlohmann::json>(v.begin(), v.end());
}

Gating gating_from(const nlohmann::json& v, const std::string& where) {
  if (!v.is_string()) fail(where, "expected one of none, gated, blended, found " + nam_json_found(v));
  const std::string s = v.get<std::string>();
  if (s == "none") return Gating::None;
  if (s == "gated") return Gating::Gated;
  if (s == "blended") return Gating::Blended;
  fail(where, "'" + s + "' is not one of none, gated, blended");
}
const char* gating_name(Gating g) { return g == Gating::None ? "none" : g == Gating::Gated ? "gated" : "blended"; }

// Absent or false: off; an object: on unless "active" says otherwise (the core's defaults).
FilmSpec film_from(const nlohmann::json& v, const std::string& where) {
  FilmSpec f;
  if (v.is_boolean() && !v.get<bool>()) return f;
  if (!v.is_object()) fail(where, "expected false or an object {active, shift, groups}, found " + nam_json_found(v));
  f.active = v.contains("active") ? nam_boolean(v.at("active"), where + ".active") : true;
  if (v.contains("shift")) f.shift = nam_boolean(v.at("shift"), where + ".shift");
  f.groups = nam_positive(v, "groups", where, 1);
  return f;
}

void check_groups(int64_t in, int64_t out, int64_t groups, const std::string& where) {
  if (in % groups != 0 || out % groups != 0)
    fail(where, std::to_string(groups) + " groups do not divide " + std::to_string(in) + " inputs and " + std::to_string(out) + " outputs");
}

NamLayerArraySpec array_from(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object (a layer array), found " + nam_json_found(j));
  NamLayerArraySpec a;
  a.input_size = nam_positive(j, "input_size", where);
  a.condition_size = nam_positive(j, "condition_size", where);
  a.channels = nam_positive(j, "channels", where);
  a.bottleneck = nam_positive(j, "bottleneck", where, a.channels);
  const std::vector<int64_t> dilations = nam_integers(nam_required(j, "dilations", where), where + ".dilations");
  if (dilations.empty()) fail(where + ".dilations", "is empty: a layer array needs at least one layer");
  const size_t n = dilations.size();
  if (static_cast<int64_t>(n) > kWaveNetLimits.layers_per_array)
    fail(where + ".dilations", std::to_string(n) + " layers; the limit is " + std::to_string(kWaveNetLimits.layers_per_array));
  // Sizes within their limits before anything is made from them.
  for (const auto& [name, value] : std::vector<std::pair<const char*, int64_t>>{
           {"input_size", a.input_size}, {"condition_size", a.condition_size}, {"channels", a.channels}, {"bottleneck", a.bottleneck}})
    if (value > kWaveNetLimits.channels) fail(where, std::string(name) + " " + std::to_string(value) + "; the limit is " + std::to_string(kWaveNetLimits.channels));
  for (size_t i = 0; i < n; ++i)
    if (dilations[i] < 1) fail(where + ".dilations[" + std::to_string(i) + "]", "must be >= 1, found " + std::to_string(dilations[i]));
  // Kernel sizes: one for all layers (kernel_size) or one per layer (kernel_sizes, 0.6+).
  std::vector<int64_t> kernels;
  if (j.contains("kernel_sizes") == j.contains("kernel_size"))
    fail(where, j.contains("kernel_size") ? "give kernel_size or kernel_sizes, not both" : "no 'kernel_size' or 'kernel_sizes'");
  if (j.contains("kernel_sizes")) {
    kernels = nam_integers(j.at("kernel_sizes"), where + ".kernel_sizes");
    if (kernels.size() != n) fail(where + ".kernel_sizes", "has " + std::to_string(kernels.size()) + " entries for " + std::to_string(n) + " dilations");
  } else {
    kernels.assign(n, nam_positive(j, "kernel_size", where));
  }
  for (size_t i = 0; i < n; ++i)
    if (kernels[i] < 1) fail(where + ".kernel_sizes[" + std::to_string(i) + "]", "must be >= 1, found " + std::to_string(kernels[i]));
  // The head: an object (0.6+) or head_size and head_bias.
  if (j.contains("head") && !j.at("head").is_null()) {
    const nlohmann::json& h = j.at("head");
    if (!h.is_object()) fail(where + ".head", "expected an object {out_channels, kernel_size, bias}, found " + nam_json_found(h));
    a.head_size = nam_positive(h, "out_channels", where + ".head");
    a.head_kernel = nam_positive(h, "kernel_size", where + ".head");
    a.head_dilation = nam_positive(h, "head_dilation", where + ".head", 1);
    if (a.head_dilation > kWaveNetLimits.dilation)
      fail(where + ".head", "head_dilation " + std::to_string(a.head_dilation) + "; the limit is " + std::to_string(kWaveNetLimits.dilation));
    a.head_bias = nam_boolean(nam_required(h, "bias", where + ".head"), where + ".head.bias");
  } else {
    a.head_size = nam_positive(j, "head_size", where);
    a.head_bias = nam_boolean(nam_required(j, "head_bias", where), where + ".head_bias");
  }
  // Activations and gating, per layer.
  const std::vector<nlohmann::json> activations = per_layer(nam_required(j, "activation", where), n, where + ".activation");
  std::vector<Gating> gating(n, Gating::None);
  if (j.contains("gating_mode") && !j.at("gating_mode").is_null()) {
    const std::vector<nlohmann::json> g = per_layer(j.at("gating_mode"), n, where + ".gating_mode");
    for (size_t i = 0; i < n; ++i) gating[i] = gating_from(g[i], where + ".gating_mode" + (j.at("gating_mode").is_array() ? "[" + std::to_string(i) + "]" : ""));
  } else if (j.contains("gated") && !j.at("gated").is_null()) {  // 0.5: gated with Sigmoid gates
    if (nam_boolean(j.at("gated"), where + ".gated")) gating.assign(n, Gating::Gated);
  }
  std::vector<nlohmann::json> secondary(n, nullptr);
  if (j.contains("secondary_activation") && !j.at("secondary_activation").is_null())
    secondary = per_layer(j.at("secondary_activation"), n, where + ".secondary_activation");
  for (size_t i = 0; i < n; ++i) {
    NamLayerSpec l;
    l.kernel_size = kernels[i];
    l.dilation = dilations[i];
    const std::string list = j.at("activation").is_array() ? "[" + std::to_string(i) + "]" : "";
    l.activation = activation_from_json(activations[i], where + ".activation" + list);
    l.gating = gating[i];
    if (l.gating != Gating::None && !secondary[i].is_null())  // never read for ungated layers
      l.secondary = activation_from_json(secondary[i], where + ".secondary_activation" + (j.at("secondary_activation").is_array() ? "[" + std::to_string(i) + "]" : ""));
    a.layers.push_back(l);
  }
  a.groups_input = nam_positive(j, "groups_input", where, 1);
  a.groups_input_mixin = nam_positive(j, "groups_input_mixin", where, 1);
  if (j.contains("layer1x1") && !j.at("layer1x1").is_null()) {
    const nlohmann::json& o = j.at("layer1x1");
    if (!o.is_object()) fail(where + ".layer1x1", "expected an object {active, groups}, found " + nam_json_found(o));
    a.layer1x1 = nam_boolean(nam_required(o, "active", where + ".layer1x1"), where + ".layer1x1.active");
    a.layer1x1_groups = nam_positive(o, "groups", where + ".layer1x1");
  }
  if (j.contains("head1x1") && !j.at("head1x1").is_null()) {
    const nlohmann::json& o = j.at("head1x1");
    if (!o.is_object()) fail(where + ".head1x1", "expected an object {active, out_channels, groups}, found " + nam_json_found(o));
    a.head1x1 = nam_boolean(nam_required(o, "active", where + ".head1x1"), where + ".head1x1.active");
    a.head1x1_out = nam_positive(o, "out_channels", where + ".head1x1");
    a.head1x1_groups = nam_positive(o, "groups", where + ".head1x1");
  }
  for (int s = 0; s < kFilmSites; ++s)
    if (j.contains(film_key(s))) a.film[static_cast<size_t>(s)] = film_from(j.at(film_key(s)), where + "." + film_key(s));
  // Slimmable: the allowed channel counts (the plugin plays the full model unless asked otherwise).
  const bool slimmable_method = j.contains("slimmable") && j.at("slimmable").is_object() && j.at("slimmable").contains("method") &&
                                !(j.at("slimmable").at("method").is_string() && j.at("slimmable").at("method").get<std::string>().empty()) &&
                                !j.at("slimmable").at("method").is_null();
  if (slimmable_method) {
    const nlohmann::json& s = j.at("slimmable");
    const std::string w = where + ".slimmable";
    if (!s.at("method").is_string() || s.at("method") != "slice_channels_uniform")
      fail(w + ".method", "expected slice_channels_uniform (the one method supported), found " + nam_json_found(s.at("method")));
    const nlohmann::json kw = s.value("kwargs", nlohmann::json::object());
    if (kw.is_object() && kw.contains("allowed_channels")) {
      a.slimmable_channels = nam_integers(kw.at("allowed_channels"), w + ".kwargs.allowed_channels");
    } else {
      for (int64_t c = 1; c <= a.channels; ++c) a.slimmable_channels.push_back(c);
    }
    const std::vector<int64_t>& allowed = a.slimmable_channels;
    if (allowed.empty() || allowed.back() != a.channels)
      fail(w + ".kwargs.allowed_channels", "must end with the full channel count (" + std::to_string(a.channels) + ")");
    for (size_t i = 0; i < allowed.size(); ++i)
      if (allowed[i] < 1 || (i > 0 && allowed[i] <= allowed[i - 1])) fail(w + ".kwargs.allowed_channels", "must be ascending and >= 1");
  }
  // What a file may ask for (kWaveNetLimits, wavenet.h): checked before anything is allocated.
  const WaveNetLimits& lim = kWaveNetLimits;
  for (const auto& [name, value] : std::vector<std::pair<const char*, int64_t>>{{"input_size", a.input_size}, {"condition_size", a.condition_size},
                                                                                  {"channels", a.channels}, {"bottleneck", a.bottleneck},
                                                                                  {"head size", a.head_size}, {"head1x1 out_channels", a.head1x1_out}})
    if (value > lim.channels) fail(where, std::string(name) + " " + std::to_string(value) + "; the limit is " + std::to_string(lim.channels));
  if (static_cast<int64_t>(n) > lim.layers_per_array)
    fail(where + ".dilations", std::to_string(n) + " layers; the limit is " + std::to_string(lim.layers_per_array));
  for (size_t i = 0; i < n; ++i) {
    if (kernels[i] > lim.kernel_size) fail(where, "kernel size " + std::to_string(kernels[i]) + "; the limit is " + std::to_string(lim.kernel_size));
    if (dilations[i] > lim.dilation) fail(where, "dilation " + std::to_string(dilations[i]) + "; the limit is " + std::to_string(lim.dilation));
  }
  if (a.head_kernel > lim.kernel_size) fail(where + ".head", "kernel size " + std::to_string(a.head_kernel) + "; the limit is " + std::to_string(lim.kernel_size));
  // Shapes that must agree.
  for (size_t i = 0; i < n; ++i) {
    const NamLayerSpec& l = a.layers[i];
    const int64_t m = l.gating == Gating::None ? a.bottleneck : 2 * a.bottleneck;
    check_groups(a.channels, m, a.groups_input, where + ".groups_input");
    check_groups(a.condition_size, m, a.groups_input_mixin, where + ".groups_input_mixin");
    for (const auto& [f, key] : {std::pair<const ActivationSpec*, const char*>{&l.activation, ".activation"}, {&l.secondary, ".secondary_activation"}})
      if (f->type == "PReLU" && f->params.size() != 1 && static_cast<int64_t>(f->params.size()) != a.bottleneck)
        fail(where + key, "PReLU has " + std::to_string(f->params.size()) + " slopes for a bottleneck of " + std::to_string(a.bottleneck) +
                              " (give one, or one per channel)");
    const int64_t film_dims[kFilmSites] = {a.channels, m, a.condition_size, m, m, a.bottleneck, a.channels, a.head1x1_out};
    for (int s = 0; s < kFilmSites; ++s) {
      const FilmSpec& f = a.film[static_cast<size_t>(s)];
      if (f.active) check_groups(a.condition_size, (f.shift ? 2 : 1) * film_dims[s], f.groups, where + "." + film_key(s) + ".groups");
    }
  }
  if (a.layer1x1) check_groups(a.bottleneck, a.channels, a.layer1x1_groups, where + ".layer1x1.groups");
  else if (a.bottleneck != a.channels)
    fail(where, "without layer1x1 the bottleneck (" + std::to_string(a.bottleneck) + ") must equal channels (" + std::to_string(a.channels) + ")");
  if (a.head1x1) check_groups(a.bottleneck, a.head1x1_out, a.head1x1_groups, where + ".head1x1.groups");
  if (a.film[kLayer1x1Post].active && !a.layer1x1) fail(where, "layer1x1_post_film is active without layer1x1");
  if (a.film[kHead1x1Post].active && !a.head1x1) fail(where, "head1x1_post_film is active without head1x1");
  return a;
}

}  // namespace

const char* film_key(int site) {
  static const char* const keys[kFilmSites] = {"conv_pre_film",       "conv_post_film",      "input_mixin_pre_film", "input_mixin_post_film",
                                               "activation_pre_film", "activation_post_film", "layer1x1_post_film",  "head1x1_post_film"};
  return keys[site];
}

std::vector<std::string> activation_names() {
  std::vector<std::string> v;
  for (const ActivationInfo& i : activation_table()) v.push_back(i.type);
  return v;
}

ActivationSpec activation_from_json(const nlohmann::json& j, const std::string& where) {
  ActivationSpec a;
  const nlohmann::json* object = nullptr;
  if (j.is_string()) {
    a.type = j.get<std::string>();
    if (a.type == "LeakyHardTanh") a.type = "LeakyHardtanh";  // the core takes both spellings
  } else if (j.is_object() && j.contains("type") && j.at("type").is_string()) {
    a.type = j.at("type").get<std::string>();
    if (a.type == "LeakyHardTanh") a.type = "LeakyHardtanh";
    object = &j;
  } else {
    fail(where, "expected a name or an object with a \"type\", found " + nam_json_found(j));
  }
  const auto& table = activation_table();
  const auto info = std::find_if(table.begin(), table.end(), [&](const ActivationInfo& i) { return a.type == i.type; });
  if (info == table.end()) fail(where, "activation '" + a.type + "' is not supported; supported: " + join(activation_names()));
  if (a.type == "PReLU") {
    if (object && object->contains("negative_slopes")) {
      const nlohmann::json& s = object->at("negative_slopes");
      if (!s.is_array() || s.empty()) fail(where + ".negative_slopes", "expected a non-empty list of numbers, found " + nam_json_found(s));
      if (static_cast<int64_t>(s.size()) > kWaveNetLimits.channels)
        fail(where + ".negative_slopes", std::to_string(s.size()) + " slopes; the limit is " + std::to_string(kWaveNetLimits.channels));
      for (size_t i = 0; i < s.size(); ++i) a.params.push_back(number(s[i], where + ".negative_slopes[" + std::to_string(i) + "]"));
    } else {
      a.params.push_back(object && object->contains("negative_slope") ? number(object->at("negative_slope"), where + ".negative_slope") : 0.01);
    }
    return a;
  }
  for (const auto& [key, fallback] : info->params)
    a.params.push_back(object && object->contains(key) ? number(object->at(key), where + "." + key) : fallback);
  return a;
}

nlohmann::json activation_to_json(const ActivationSpec& a) {
  if (a.params.empty()) return a.type;
  nlohmann::json j = {{"type", a.type}};
  if (a.type == "PReLU") {
    j["negative_slopes"] = a.params;
    return j;
  }
  const auto& table = activation_table();
  const auto info = std::find_if(table.begin(), table.end(), [&](const ActivationInfo& i) { return a.type == i.type; });
  for (size_t i = 0; i < a.params.size() && info != table.end() && i < info->params.size(); ++i) j[info->params[i].first] = a.params[i];
  return j;
}

NamWaveNetSpec nam_wavenet_from_json(const nlohmann::json& config, const std::string& version, int depth) {
  if (!config.is_object()) fail("", "expected an object, found " + nam_json_found(config));
  NamWaveNetSpec spec;
  spec.new_style = version.rfind("0.5.", 0) != 0;
  spec.source = config;
  const nlohmann::json& layers = nam_required(config, "layers", "");
  if (!layers.is_array() || layers.empty()) fail("layers", "expected a non-empty list of layer arrays, found " + nam_json_found(layers));
  if (static_cast<int64_t>(layers.size()) > kWaveNetLimits.arrays)
    fail("layers", std::to_string(layers.size()) + " layer arrays; the limit is " + std::to_string(kWaveNetLimits.arrays));
  for (size_t i = 0; i < layers.size(); ++i) spec.arrays.push_back(array_from(layers[i], "layers[" + std::to_string(i) + "]"));
  if (config.contains("in_channels") && nam_integer(config.at("in_channels"), "in_channels") != 1)
    fail("in_channels", nam_json_found(config.at("in_channels")) + "; an amp model takes one input channel");
  if (config.contains("head") && !config.at("head").is_null()) {
    const nlohmann::json& h = config.at("head");
    if (!h.is_object()) fail("head", "expected null or an object {channels, out_channels, kernel_sizes, activation}, found " + nam_json_found(h));
    NamPostHeadSpec p;
    p.channels = nam_positive(h, "channels", "head");
    p.out_channels = nam_positive(h, "out_channels", "head");
    p.kernel_sizes = nam_integers(nam_required(h, "kernel_sizes", "head"), "head.kernel_sizes");
    if (p.kernel_sizes.empty()) fail("head.kernel_sizes", "is empty");
    if (static_cast<int64_t>(p.kernel_sizes.size()) > kWaveNetLimits.layers_per_array)
      fail("head.kernel_sizes", std::to_string(p.kernel_sizes.size()) + " stages; the limit is " + std::to_string(kWaveNetLimits.layers_per_array));
    for (int64_t k : p.kernel_sizes)
      if (k < 1 || k > kWaveNetLimits.kernel_size) fail("head.kernel_sizes", std::to_string(k) + " is not within 1 to " + std::to_string(kWaveNetLimits.kernel_size));
    p.activation = activation_from_json(nam_required(h, "activation", "head"), "head.activation");
    if (p.activation.type == "PReLU" && p.activation.params.size() != 1)
      fail("head.activation", "PReLU in the head after the arrays takes one slope (its stages differ in width)");
    if (p.channels > kWaveNetLimits.channels || p.out_channels > kWaveNetLimits.channels) fail("head", "more channels than the limit of " + std::to_string(kWaveNetLimits.channels));
    if (h.contains("in_channels") && nam_integer(h.at("in_channels"), "head.in_channels") != spec.arrays.back().head_size)
      fail("head.in_channels", nam_json_found(h.at("in_channels")) + " differs from the last layer array's head size (" + std::to_string(spec.arrays.back().head_size) + ")");
    spec.post_head = p;
    for (const NamLayerArraySpec& a : spec.arrays)
      if (!a.slimmable_channels.empty()) fail("head", "a slimmable WaveNet cannot have a head after its layer arrays (the NAM core refuses it)");
  }
  spec.head_scale = number(nam_required(config, "head_scale", ""), "head_scale");
  if (config.contains("condition_dsp") && !config.at("condition_dsp").is_null()) {
    if (depth >= kNamNestingLimit) fail("condition_dsp", "nested more than " + std::to_string(kNamNestingLimit) + " deep");
    spec.condition_dsp = std::make_shared<NamFileModel>(nam_model_from_json(config.at("condition_dsp"), "condition_dsp", depth + 1));
    if (spec.condition_dsp->architecture != "WaveNet")
      fail("condition_dsp.architecture", "'" + spec.condition_dsp->architecture + "': wavetrain takes a WaveNet condition_dsp only");
    spec.source.erase("condition_dsp");  // regenerated from the nested model when written
  }
  // Sizes that must agree between arrays, and with the condition.
  const int64_t condition = spec.condition_dsp ? spec.condition_dsp->output_channels() : 1;
  for (size_t i = 0; i < spec.arrays.size(); ++i) {
    const NamLayerArraySpec& a = spec.arrays[i];
    const std::string where = "layers[" + std::to_string(i) + "]";
    if (a.condition_size != condition)
      fail(where + ".condition_size", std::to_string(a.condition_size) + ", but the condition (" +
                                          (spec.condition_dsp ? "condition_dsp's output" : "the input audio") + ") has " + std::to_string(condition) + " channels");
    const int64_t expected_input = i == 0 ? 1 : spec.arrays[i - 1].channels;
    if (a.input_size != expected_input)
      fail(where + ".input_size", std::to_string(a.input_size) + ", but " + (i == 0 ? std::string("the input audio has 1 channel") : "layers[" + std::to_string(i - 1) + "] has " + std::to_string(expected_input) + " channels"));
    if (i > 0 && spec.arrays[i - 1].head_size != a.channels)  // the core's rule
      fail(where + ".channels", std::to_string(a.channels) + " differs from layers[" + std::to_string(i - 1) + "]'s head size " +
                                    std::to_string(spec.arrays[i - 1].head_size) + " (the NAM core requires them equal)");
    if (i > 0 && spec.arrays[i - 1].head_size != a.head_in())
      fail(where, "its head sum has " + std::to_string(a.head_in()) + " channels but layers[" + std::to_string(i - 1) + "]'s head gives " +
                      std::to_string(spec.arrays[i - 1].head_size));
  }
  if (const int64_t rf = nam_receptive_field(spec); rf > kWaveNetLimits.receptive_field)
    fail("", "receptive field " + std::to_string(rf) + " samples; the limit is " + std::to_string(kWaveNetLimits.receptive_field));
  // The real-time engine keeps each layer's recent input: channels x (kernel - 1) x dilation floats.
  int64_t state = 0;
  for (const NamLayerArraySpec& a : spec.arrays) {
    for (const NamLayerSpec& l : a.layers) state += a.channels * (l.kernel_size - 1) * l.dilation;
    state += a.head_in() * (a.head_kernel - 1) * a.head_dilation;
  }
  int64_t rows = 0;  // signal rows the engine keeps a block of (plus history) for
  for (const NamLayerArraySpec& a : spec.arrays) {
    rows += static_cast<int64_t>(a.layers.size()) * a.channels * (a.film[kConvPre].active ? 2 : 1);
    rows += a.head_in();
  }
  if (rows > kNamRowsLimit)
    fail("", "the layers carry " + std::to_string(rows) + " signal rows in all; the limit is " + std::to_string(kNamRowsLimit));
  if (state > kNamStateLimit)
    fail("", "the layers' history would hold " + std::to_string(state) + " values; the limit is " + std::to_string(kNamStateLimit));
  if (const int64_t w = nam_wavenet_weight_count(spec); w > kWaveNetLimits.weights)
    fail("", std::to_string(w) + " weights; the limit is " + std::to_string(kWaveNetLimits.weights));
  return spec;
}

nlohmann::json nam_wavenet_to_json(const NamWaveNetSpec& spec) {
  if (!spec.source.is_null()) {
    nlohmann::json config = spec.source;
    if (spec.condition_dsp) config["condition_dsp"] = nam_model_to_json(*spec.condition_dsp);
    return config;
  }
  // 0.5 spellings only where they can say everything (the classic WaveNet).
  const bool old_style = !spec.new_style && classic_of(spec).has_value();
  nlohmann::json layers = nlohmann::json::array();
  for (const NamLayerArraySpec& a : spec.arrays) {
    nlohmann::json j;
    j["input_size"] = a.input_size;
    j["condition_size"] = a.condition_size;
    j["channels"] = a.channels;
    std::vector<int64_t> kernels, dilations;
    nlohmann::json activations = nlohmann::json::array(), gating = nlohmann::json::array(), secondary = nlohmann::json::array();
    for (const NamLayerSpec& l : a.layers) {
      kernels.push_back(l.kernel_size);
      dilations.push_back(l.dilation);
      activations.push_back(activation_to_json(l.activation));
      gating.push_back(gating_name(l.gating));
      secondary.push_back(l.gating == Gating::None ? nlohmann::json(nullptr) : activation_to_json(l.secondary));
    }
    j["dilations"] = dilations;
    if (old_style) {  // 0.5 spellings: the same for every layer, gated means Sigmoid gates
      j["kernel_size"] = kernels[0];
      j["activation"] = a.layers[0].activation.type;
      j["gated"] = a.layers[0].gating == Gating::Gated;
      j["head_size"] = a.head_size;
      j["head_bias"] = a.head_bias;
    } else {
      j["kernel_sizes"] = kernels;
      j["activation"] = activations;
      j["gating_mode"] = gating;
      j["secondary_activation"] = secondary;
      j["head"] = {{"out_channels", a.head_size}, {"kernel_size", a.head_kernel}, {"bias", a.head_bias}};
      if (a.head_dilation != 1) j["head"]["head_dilation"] = a.head_dilation;
      j["bottleneck"] = a.bottleneck;
      j["groups_input"] = a.groups_input;
      j["groups_input_mixin"] = a.groups_input_mixin;
      j["layer1x1"] = {{"active", a.layer1x1}, {"groups", a.layer1x1_groups}};
      j["head1x1"] = {{"active", a.head1x1}, {"out_channels", a.head1x1 ? a.head1x1_out : a.bottleneck}, {"groups", a.head1x1_groups}};
      for (int s = 0; s < kFilmSites; ++s) {
        const FilmSpec& f = a.film[static_cast<size_t>(s)];
        j[film_key(s)] = {{"active", f.active}, {"shift", f.shift}, {"groups", f.groups}};
      }
      j["slimmable"] = a.slimmable_channels.empty() ? nlohmann::json(nullptr)
                                                    : nlohmann::json{{"method", "slice_channels_uniform"}, {"kwargs", {{"allowed_channels", a.slimmable_channels}}}};
    }
    layers.push_back(j);
  }
  nlohmann::json config = {{"layers", layers}, {"head", nullptr}, {"head_scale", spec.head_scale}};
  if (spec.post_head)
    config["head"] = {{"channels", spec.post_head->channels},
                      {"out_channels", spec.post_head->out_channels},
                      {"kernel_sizes", spec.post_head->kernel_sizes},
                      {"activation", activation_to_json(spec.post_head->activation)}};
  if (spec.condition_dsp) config["condition_dsp"] = nam_model_to_json(*spec.condition_dsp);
  return config;
}

int64_t nam_wavenet_weight_count(const NamWaveNetSpec& spec) {
  int64_t n = 1;  // head_scale
  for (const NamLayerArraySpec& a : spec.arrays) {
    const int64_t C = a.channels, B = a.bottleneck, cond = a.condition_size;
    n += C * a.input_size;  // rechannel
    for (const NamLayerSpec& l : a.layers) {
      const int64_t M = l.gating == Gating::None ? B : 2 * B;
      n += M * (C / a.groups_input) * l.kernel_size + M;  // conv
      n += M * (cond / a.groups_input_mixin);             // mixer
      if (a.layer1x1) n += C * (B / a.layer1x1_groups) + C;
      if (a.head1x1) n += a.head1x1_out * (B / a.head1x1_groups) + a.head1x1_out;
      const int64_t film_dims[kFilmSites] = {C, M, cond, M, M, B, C, a.head1x1_out};
      for (int s = 0; s < kFilmSites; ++s) {
        const FilmSpec& f = a.film[static_cast<size_t>(s)];
        if (!f.active) continue;
        const int64_t out = (f.shift ? 2 : 1) * film_dims[s];
        n += out * (cond / f.groups) + out;
      }
    }
    n += a.head_size * a.head_in() * a.head_kernel + (a.head_bias ? a.head_size : 0);
  }
  if (spec.post_head) {
    const NamPostHeadSpec& p = *spec.post_head;
    int64_t in = spec.arrays.back().head_size;
    for (size_t i = 0; i < p.kernel_sizes.size(); ++i) {
      const int64_t out = i + 1 == p.kernel_sizes.size() ? p.out_channels : p.channels;
      n += out * in * p.kernel_sizes[i] + out;
      in = out;
    }
  }
  return n;
}

int64_t nam_receptive_field(const NamWaveNetSpec& spec) {
  int64_t rf = 1;
  for (const NamLayerArraySpec& a : spec.arrays) {
    for (const NamLayerSpec& l : a.layers) rf += (l.kernel_size - 1) * l.dilation;
    rf += (a.head_kernel - 1) * a.head_dilation;
  }
  if (spec.post_head)
    for (int64_t k : spec.post_head->kernel_sizes) rf += k - 1;
  if (spec.condition_dsp) rf += spec.condition_dsp->receptive_field() - 1;
  return rf;
}

std::string nam_wavenet_min_version(const NamWaveNetSpec& spec) {
  std::string why;
  return classic_of(spec, &why) ? "0.5.4" : "0.7.0";  // written with 0.7's spellings (kernel_sizes, head objects)
}

std::string plain_array_problem(const NamLayerArraySpec& a) {
  if (a.bottleneck != a.channels) return "has a bottleneck";
  if (a.groups_input != 1 || a.groups_input_mixin != 1 || a.layer1x1_groups != 1) return "has grouped convolutions";
  if (!a.layer1x1) return "has no layer1x1";
  if (a.head1x1) return "has a head1x1";
  for (const FilmSpec& f : a.film)
    if (f.active) return "has FiLM";
  if (!a.slimmable_channels.empty()) return "is slimmable";
  return "";
}

std::optional<WaveNetConfig> classic_of(const NamWaveNetSpec& spec, std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<WaveNetConfig> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (spec.condition_dsp) return no("it has a condition_dsp");
  if (spec.post_head) return no("it has a head after the layer arrays");
  WaveNetConfig c;
  c.head_scale = spec.head_scale;
  for (size_t i = 0; i < spec.arrays.size(); ++i) {
    const NamLayerArraySpec& a = spec.arrays[i];
    const std::string array = "layer array " + std::to_string(i);
    if (const std::string problem = plain_array_problem(a); !problem.empty()) return no(array + " " + problem);
    if (a.head_kernel != 1 || a.head_dilation != 1) return no(array + "'s head has kernel size " + std::to_string(a.head_kernel));
    const NamLayerSpec& first = a.layers.front();
    for (const NamLayerSpec& l : a.layers) {
      if (l.kernel_size != first.kernel_size) return no(array + " has per-layer kernel sizes");
      if (!(l.activation == first.activation) || l.gating != first.gating) return no(array + " has per-layer activations");
    }
    if (first.gating == Gating::Blended) return no(array + " is blended");
    if (first.gating == Gating::Gated && !(first.secondary == ActivationSpec{"Sigmoid", {}})) return no(array + " gates with " + first.secondary.type);
    static const std::vector<std::string> classic = {"Tanh", "ReLU", "Sigmoid", "Hardtanh"};
    if (std::find(classic.begin(), classic.end(), first.activation.type) == classic.end())
      return no(array + " uses " + first.activation.type);
    LayerArrayConfig l;
    l.input_size = a.input_size;
    l.condition_size = a.condition_size;
    l.head_size = a.head_size;
    l.channels = a.channels;
    l.kernel_size = first.kernel_size;
    for (const NamLayerSpec& x : a.layers) l.dilations.push_back(x.dilation);
    l.activation = first.activation.type;
    l.gated = first.gating == Gating::Gated;
    l.head_bias = a.head_bias;
    c.layers.push_back(l);
  }
  return c;
}

NamWaveNetSpec nam_of(const WaveNetConfig& config) {
  NamWaveNetSpec spec;
  spec.head_scale = config.head_scale;
  for (const LayerArrayConfig& l : config.layers) {
    NamLayerArraySpec a;
    a.input_size = l.input_size;
    a.condition_size = l.condition_size;
    a.channels = l.channels;
    a.bottleneck = l.channels;
    a.head_size = l.head_size;
    a.head_bias = l.head_bias;
    for (int64_t d : l.dilations) {
      NamLayerSpec x;
      x.kernel_size = l.kernel_size;
      x.dilation = d;
      x.activation = ActivationSpec{l.activation, {}};
      x.gating = l.gated ? Gating::Gated : Gating::None;
      a.layers.push_back(x);
    }
    spec.arrays.push_back(a);
  }
  return spec;
}

}  // namespace wavetrain::experiments::amp
