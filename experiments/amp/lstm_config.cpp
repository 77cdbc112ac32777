// The config of NAM's LSTM (lstm_config.h).
#include "experiments/amp/lstm_config.h"

#include "experiments/amp/nam_json.h"

#include <stdexcept>

namespace wavetrain::experiments::amp {

std::vector<std::string> lstm_preset_names() { return {"1x24", "2x8", "1x16", "1x12"}; }

LstmConfig lstm_preset(const std::string& name) {
  LstmConfig c;
  if (name == "1x24") c.hidden_size = 24;
  else if (name == "2x8") c = {1, 8, 2};
  else if (name == "1x16") c.hidden_size = 16;
  else if (name == "1x12") c.hidden_size = 12;
  else throw std::invalid_argument("LSTM preset '" + name + "' is not one of 1x24, 2x8, 1x16, 1x12");
  return c;
}

nlohmann::json lstm_config_to_json(const LstmConfig& c) {
  return {{"input_size", c.input_size}, {"hidden_size", c.hidden_size}, {"num_layers", c.num_layers}};
}

LstmConfig lstm_config_from_json(const nlohmann::json& j) {
  LstmConfig c;
  for (const char* key : {"input_size", "hidden_size", "num_layers"})
    if (!j.is_object() || !j.contains(key)) throw std::invalid_argument(std::string("LSTM config: no '") + key + "'");
  c.input_size = nam_integer(j.at("input_size"), "LSTM config: input_size");
  c.hidden_size = nam_integer(j.at("hidden_size"), "LSTM config: hidden_size");
  c.num_layers = nam_integer(j.at("num_layers"), "LSTM config: num_layers");
  if (c.input_size != 1 || c.hidden_size < 1 || c.num_layers < 1)
    throw std::invalid_argument("LSTM config: needs input_size 1, hidden_size >= 1 and num_layers >= 1");
  if (c.num_layers > kLstmLimits.num_layers || c.hidden_size > kLstmLimits.hidden_size)
    throw std::invalid_argument("LSTM config: num_layers " + std::to_string(c.num_layers) + " and hidden_size " + std::to_string(c.hidden_size) +
                                "; the limits are " + std::to_string(kLstmLimits.num_layers) + " layers and " +
                                std::to_string(kLstmLimits.hidden_size) + " hidden units");
  if (const int64_t n = lstm_weight_count(c); n > kLstmLimits.weights)
    throw std::invalid_argument("LSTM config: " + std::to_string(c.num_layers) + " layers of " + std::to_string(c.hidden_size) + " units have " +
                                std::to_string(n) + " weights; the limit is " + std::to_string(kLstmLimits.weights));
  return c;
}

int64_t lstm_weight_count(const LstmConfig& c) {
  const int64_t h = c.hidden_size;
  int64_t n = h + 1;  // head weight and bias
  for (int64_t i = 0; i < c.num_layers; ++i) n += 4 * h * ((i == 0 ? c.input_size : h) + h) + 4 * h + 2 * h;
  return n;
}

}  // namespace wavetrain::experiments::amp
