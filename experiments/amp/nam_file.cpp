// .nam files, versions 0.5 to 0.7 (nam_file.h).
#include "experiments/amp/nam_file.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "experiments/amp/nam_json.h"
#include "trainer/serialization/atomic_file.h"

namespace wavetrain::experiments::amp {
namespace {

// `where` is the key's whole path from the top of the file ("config.layers[0].channels").
[[noreturn]] void fail(const std::string& where, const std::string& what) { throw NamKeyError(where, what); }

std::string join(const std::string& where, const std::string& key) {
  return where.empty() ? key : key.empty() ? where : key[0] == '[' ? where + key : where + "." + key;
}

std::string hz(double rate) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.9g Hz", rate);
  return text;
}

// The weights as float32, each checked: JSON numbers past float32's range would become inf (and
// could not be written back: JSON has no inf or NaN).
std::vector<float> weights_from(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) fail(where, "expected a list of numbers, found " + nam_json_found(j));
  std::vector<float> w(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number()) fail(where + "[" + std::to_string(i) + "]", "expected a number, found " + nam_json_found(j[i]));
    const double v = j[i].get<double>();
    if (!(std::abs(v) <= std::numeric_limits<float>::max())) {
      char text[32];
      std::snprintf(text, sizeof(text), "%.9g", v);
      fail(where + "[" + std::to_string(i) + "]", std::string("is ") + text + ", not a finite float32 value");
    }
    w[i] = static_cast<float>(v);
  }
  return w;
}

}  // namespace

bool nam_sample_rate_supported(double rate) { return rate >= kNamMinSampleRate && rate <= kNamMaxSampleRate; }

std::string nam_sample_rate_problem(double rate) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g Hz is outside %g to %g Hz", rate, kNamMinSampleRate, kNamMaxSampleRate);
  return text;
}

bool nam_version_supported(const std::string& version) {
  // Three dot-separated integers, 0.5.0 to 0.7.x.
  int parts = 0;
  size_t digits = 0;
  for (char ch : version) {
    if (ch >= '0' && ch <= '9') {
      ++digits;
    } else if (ch == '.' && digits > 0) {
      ++parts, digits = 0;
    } else {
      return false;
    }
  }
  if (parts != 2 || digits == 0 || digits > 9) return false;
  for (const char* prefix : {"0.5.", "0.6.", "0.7."})
    if (version.rfind(prefix, 0) == 0) return true;
  return false;
}

int64_t NamFileModel::output_channels() const {
  if (architecture == "WaveNet") return wavenet.output_channels();
  if (architecture == "LSTM" || architecture == "ConvNet" || architecture == "Linear") return 1;
  return default_model().output_channels();
}

int64_t NamFileModel::receptive_field() const {
  if (architecture == "WaveNet") return nam_receptive_field(wavenet);
  if (architecture == "LSTM") return 1;
  if (architecture == "ConvNet") return convnet.receptive_field();
  if (architecture == "Linear") return linear.receptive_field;
  return default_model().receptive_field();
}

const NamFileModel& NamFileModel::default_model() const {
  if (architecture == "SlimmableContainer" && !submodels.empty()) return submodels.back().model->default_model();
  return *this;
}

namespace {

// An LSTM's config, checked key by key before lstm_config_from_json (which names no file path).
void check_lstm_config(const nlohmann::json& config, const std::string& where) {
  if (!config.is_object()) fail(where, "expected an object {input_size, hidden_size, num_layers}, found " + nam_json_found(config));
  for (const char* key : {"input_size", "hidden_size", "num_layers"}) {
    if (!config.contains(key)) fail(where, std::string("no '") + key + "'");
    const int64_t v = nam_integer(config.at(key), join(where, key));
    if (v < 1) fail(join(where, key), "must be >= 1, found " + std::to_string(v));
  }
  if (const int64_t input = nam_integer(config.at("input_size"), join(where, "input_size")); input != 1)
    fail(join(where, "input_size"), std::to_string(input) + "; an amp model's LSTM takes 1 input");
  for (const char* key : {"in_channels", "out_channels"})
    if (config.contains(key) && nam_integer(config.at(key), join(where, key)) != 1)
      fail(join(where, key), nam_json_found(config.at(key)) + "; an amp model has one input and one output channel");
}

}  // namespace

NamFileModel nam_model_from_json(const nlohmann::json& j, const std::string& where, int depth) {
  if (!j.is_object()) fail(where, "expected a JSON object (a .nam model), found " + nam_json_found(j));
  for (const char* key : {"version", "architecture", "config"})
    if (!j.contains(key)) fail(where, std::string("no '") + key + "' (not a .nam model?)");
  NamFileModel m;
  if (!j.at("version").is_string()) fail(join(where, "version"), "expected a string such as \"0.5.4\", found " + nam_json_found(j.at("version")));
  m.version = j.at("version").get<std::string>();
  if (!nam_version_supported(m.version))
    fail(join(where, "version"), m.version + " is not supported; the NAM plugin's core reads " + kNamSupportedVersions);
  if (!j.at("architecture").is_string()) fail(join(where, "architecture"), "expected a string, found " + nam_json_found(j.at("architecture")));
  m.architecture = j.at("architecture").get<std::string>();
  if (m.architecture != "WaveNet" && m.architecture != "LSTM" && m.architecture != "ConvNet" && m.architecture != "Linear" &&
      m.architecture != "SlimmableContainer")
    fail(join(where, "architecture"),
         "'" + m.architecture + "' is not supported; supported: WaveNet, LSTM, ConvNet, Linear, SlimmableContainer");
  if (m.architecture == "SlimmableContainer" && (m.version.rfind("0.5.", 0) == 0 || m.version.rfind("0.6.", 0) == 0))
    fail(join(where, "version"), m.version + ": SlimmableContainer needs 0.7.x");
  const nlohmann::json& config = j.at("config");
  const std::string config_where = join(where, "config");
  if (m.architecture == "WaveNet") {
    try {
      m.wavenet = nam_wavenet_from_json(config, m.version, depth);
    } catch (const NamKeyError& e) {  // its keys are within the config (a condition_dsp's too)
      fail(join(config_where, e.key()), e.problem());
    }
  } else if (m.architecture == "ConvNet" || m.architecture == "Linear") {
    try {
      if (m.architecture == "ConvNet") m.convnet = convnet_config_from_json(config, "");
      else m.linear = linear_config_from_json(config, "");
    } catch (const NamKeyError& e) {
      fail(join(config_where, e.key()), e.problem());
    }
  } else if (m.architecture == "LSTM") {
    check_lstm_config(config, config_where);
    try {
      m.lstm = lstm_config_from_json(config);
    } catch (const std::invalid_argument& e) {  // its limits
      fail(config_where, e.what());
    }
  } else {
    const std::string submodels_where = join(config_where, "submodels");
    if (!config.is_object() || !config.contains("submodels") || !config.at("submodels").is_array() || config.at("submodels").empty())
      fail(submodels_where, "expected a non-empty list of {max_value, model}, found " +
                                (config.is_object() && config.contains("submodels") ? nam_json_found(config.at("submodels")) : "none"));
    const nlohmann::json& subs = config.at("submodels");
    double previous = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < subs.size(); ++i) {
      const std::string w = submodels_where + "[" + std::to_string(i) + "]";
      if (!subs[i].is_object() || !subs[i].contains("max_value") || !subs[i].contains("model"))
        fail(w, "expected an object {max_value, model}, found " + nam_json_found(subs[i]));
      if (!subs[i].at("max_value").is_number()) fail(w + ".max_value", "expected a number, found " + nam_json_found(subs[i].at("max_value")));
      NamFileModel::Submodel s;
      s.max_value = subs[i].at("max_value").get<double>();
      if (!(s.max_value > previous)) fail(w + ".max_value", "must be larger than the one before it");
      previous = s.max_value;
      if (depth >= kNamNestingLimit) fail(w + ".model", "nested more than " + std::to_string(kNamNestingLimit) + " deep");
      s.model = std::make_shared<NamFileModel>(nam_model_from_json(subs[i].at("model"), w + ".model", depth + 1));
      if (s.model->sample_rate && !m.submodels.empty() && m.submodels.front().model->sample_rate &&
          *s.model->sample_rate != *m.submodels.front().model->sample_rate)
        fail(w + ".model.sample_rate", hz(*s.model->sample_rate) + " differs from submodels[0]'s " + hz(*m.submodels.front().model->sample_rate));
      if (s.model->architecture == "SlimmableContainer") fail(w + ".model", "a SlimmableContainer inside a SlimmableContainer is not supported");
      m.submodels.push_back(s);
    }
    if (!(previous >= 1.0)) fail(submodels_where, "the last max_value must be at least 1 (the top of the size control)");
  }
  if (m.architecture != "SlimmableContainer") {
    if (!j.contains("weights")) fail(where, "no 'weights'");
    const int64_t expected = m.architecture == "WaveNet"   ? nam_wavenet_weight_count(m.wavenet)
                             : m.architecture == "ConvNet" ? m.convnet.weight_count()
                             : m.architecture == "Linear"  ? m.linear.weight_count()
                                                           : lstm_weight_count(m.lstm);
    const nlohmann::json& w = j.at("weights");
    if (w.is_array() && static_cast<int64_t>(w.size()) != expected)
      fail(join(where, "weights"), std::to_string(w.size()) + " weights, its config has " + std::to_string(expected));
    m.weights = weights_from(w, join(where, "weights"));
    if (m.architecture == "WaveNet" && m.wavenet.output_channels() != 1 && where.find("condition_dsp") == std::string::npos)
      fail(where, "the last layer array's head has " + std::to_string(m.wavenet.output_channels()) +
                      " channels; an amp model has one output (only a condition_dsp may have more)");
  }
  if (j.contains("sample_rate") && !j.at("sample_rate").is_null()) {
    if (!j.at("sample_rate").is_number()) fail(join(where, "sample_rate"), "expected a number (Hz), found " + nam_json_found(j.at("sample_rate")));
    const double rate = j.at("sample_rate").get<double>();
    if (!nam_sample_rate_supported(rate)) fail(join(where, "sample_rate"), nam_sample_rate_problem(rate));
    m.sample_rate = rate;
    m.sample_rate_float = j.at("sample_rate").is_number_float();
  }
  if (j.contains("metadata")) {
    // The plugin reads its loudness and levels from an object; anything else would fail there.
    if (!j.at("metadata").is_object() && !j.at("metadata").is_null())
      fail(join(where, "metadata"), "expected an object or null, found " + nam_json_found(j.at("metadata")));
    m.metadata = j.at("metadata");
  }
  for (const auto& [key, value] : j.items())
    if (key != "version" && key != "architecture" && key != "config" && key != "weights" && key != "sample_rate" && key != "metadata")
      m.extra[key] = value;
  if (m.architecture == "WaveNet" && m.wavenet.condition_dsp) {
    const NamFileModel& c = *m.wavenet.condition_dsp;
    if (c.sample_rate && m.sample_rate && *c.sample_rate != *m.sample_rate)
      fail(join(where, "config.condition_dsp.sample_rate"), hz(*c.sample_rate) + " differs from the model's " + hz(*m.sample_rate));
  }
  return m;
}

nlohmann::json nam_model_to_json(const NamFileModel& m) {
  nlohmann::json j = m.extra;
  j["version"] = m.version.empty() ? nam_min_version(m) : m.version;
  if (!m.metadata.is_null()) j["metadata"] = m.metadata;
  j["architecture"] = m.architecture;
  if (m.architecture == "WaveNet") {
    NamWaveNetSpec spec = m.wavenet;
    spec.new_style = j["version"].get<std::string>().rfind("0.5.", 0) != 0;
    j["config"] = nam_wavenet_to_json(spec);
  } else if (m.architecture == "LSTM") {
    j["config"] = lstm_config_to_json(m.lstm);
  } else if (m.architecture == "ConvNet") {
    j["config"] = convnet_config_to_json(m.convnet);
  } else if (m.architecture == "Linear") {
    j["config"] = linear_config_to_json(m.linear);
  } else {
    nlohmann::json subs = nlohmann::json::array();
    for (const NamFileModel::Submodel& s : m.submodels) subs.push_back({{"max_value", s.max_value}, {"model", nam_model_to_json(*s.model)}});
    j["config"] = {{"submodels", subs}};
  }
  // A container's own weights are an empty list (the core requires the key).
  j["weights"] = m.architecture == "SlimmableContainer" ? std::vector<float>() : m.weights;
  if (m.sample_rate) {
    const double r = *m.sample_rate;
    if (r == std::floor(r) && !m.sample_rate_float) j["sample_rate"] = static_cast<int64_t>(r);  // 48000, as NAM writes it
    else j["sample_rate"] = r;
  }
  return j;
}

std::string nam_min_version(const NamFileModel& m) {
  if (m.architecture == "SlimmableContainer") return "0.7.0";
  if (m.architecture == "WaveNet") return nam_wavenet_min_version(m.wavenet);
  return "0.5.4";
}

NamFileModel read_nam_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be opened");
  nlohmann::json j;
  try {
    // Refused while parsing: nesting deeper than any .nam file has (copies and dumps recurse).
    j = nlohmann::json::parse(in, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > 64) throw std::invalid_argument("JSON nested more than 64 deep");
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message without its "[json.exception.parse_error.101] " tag: "parse error at line
    // 1, column 5: syntax error while parsing value - invalid literal; last read: 'x'" (or a number
    // out of range: "number overflow parsing '1e999'").
    std::string what = e.what();
    if (const size_t tag = what.find("] "); what.rfind("[json.exception", 0) == 0 && tag != std::string::npos) what = what.substr(tag + 2);
    throw std::runtime_error(path + ": not JSON: " + what);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  try {
    return nam_model_from_json(j);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // a value read without its type checked first: a bug here
    throw std::runtime_error(path + ": a value of an unexpected JSON type (" + std::string(e.what()).substr(std::string(e.what()).find("] ") + 2) + ")");
  }
}

namespace {
// JSON has no NaN or infinity: a file holding one would not load. Nested models too.
void check_finite(const NamFileModel& m, const std::string& path, const std::string& where) {
  // A rate no reader takes (a model trained with amp.sample_rate 0) is not written either.
  if (m.sample_rate && !nam_sample_rate_supported(*m.sample_rate))
    throw std::runtime_error(path + ": not written: " + where + "sample_rate: " + nam_sample_rate_problem(*m.sample_rate));
  for (size_t i = 0; i < m.weights.size(); ++i)
    if (!std::isfinite(m.weights[i]))
      throw std::runtime_error(path + ": not written: " + where + "weights[" + std::to_string(i) + "] is " + std::to_string(m.weights[i]));
  if (m.architecture == "WaveNet" && m.wavenet.condition_dsp) check_finite(*m.wavenet.condition_dsp, path, where + "config.condition_dsp.");
  for (size_t i = 0; i < m.submodels.size(); ++i)
    check_finite(*m.submodels[i].model, path, where + "config.submodels[" + std::to_string(i) + "].model.");
}
}  // namespace

void write_nam_file(const std::string& path, const NamFileModel& m) {
  check_finite(m, path, "");
  write_file_atomic(path, nam_model_to_json(m).dump());
}

}  // namespace wavetrain::experiments::amp
