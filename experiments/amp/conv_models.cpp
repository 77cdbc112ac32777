// NAM's ConvNet and Linear (conv_models.h).
#include "experiments/amp/conv_models.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "experiments/amp/dsp_kernels.h"
#include "experiments/amp/nam_json.h"

namespace wavetrain::experiments::amp {
namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw NamKeyError(where, what); }

std::string at_key(const std::string& where, const std::string& key) { return where.empty() ? key : where + "." + key; }

// A .nam file's model has one input and one output channel; the core's optional keys must say so.
void check_mono(const nlohmann::json& j, const std::string& where) {
  for (const char* key : {"in_channels", "out_channels"})
    if (j.contains(key) && nam_integer(j.at(key), at_key(where, key)) != 1)
      fail(at_key(where, key), nam_json_found(j.at(key)) + "; an amp model has one input and one output channel");
}

// Sizes past these are no amp model (and their products would overflow the weight count).
constexpr int64_t kMaxChannels = 1 << 14, kMaxDilation = 1 << 20, kMaxBlocks = 1024, kMaxTaps = 1 << 22;

}  // namespace

int64_t ConvNetConfig::receptive_field() const {
  int64_t rf = 1;
  for (int64_t d : dilations) rf += d;
  return rf;
}

int64_t ConvNetConfig::weight_count() const {
  int64_t n = 0;
  for (size_t b = 0; b < dilations.size(); ++b) {
    const int64_t inputs = b == 0 ? 1 : channels;
    n += channels * inputs * 2 + (batchnorm ? 4 * channels + 1 : channels);
  }
  return n + channels + 1;
}

ConvNetConfig convnet_config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object {channels, dilations, batchnorm, activation}, found " + nam_json_found(j));
  ConvNetConfig c;
  c.source = j;
  c.channels = nam_positive(j, "channels", where);
  if (c.channels > kMaxChannels) fail(at_key(where, "channels"), std::to_string(c.channels) + " is more than " + std::to_string(kMaxChannels));
  c.dilations = nam_integers(nam_required(j, "dilations", where), at_key(where, "dilations"));
  if (c.dilations.empty()) fail(at_key(where, "dilations"), "expected at least one dilation (one per block)");
  if (static_cast<int64_t>(c.dilations.size()) > kMaxBlocks)
    fail(at_key(where, "dilations"), std::to_string(c.dilations.size()) + " blocks is more than " + std::to_string(kMaxBlocks));
  for (size_t i = 0; i < c.dilations.size(); ++i)
    if (c.dilations[i] < 1 || c.dilations[i] > kMaxDilation)
      fail(at_key(where, "dilations") + "[" + std::to_string(i) + "]", "must be 1 to " + std::to_string(kMaxDilation) + ", found " + std::to_string(c.dilations[i]));
  c.batchnorm = nam_boolean(nam_required(j, "batchnorm", where), at_key(where, "batchnorm"));
  c.activation = activation_from_json(nam_required(j, "activation", where), at_key(where, "activation"));
  RowActivation check;
  try {
    check.set(c.activation);
  } catch (const std::invalid_argument& e) {
    fail(at_key(where, "activation"), e.what());
  }
  if (j.contains("groups") && nam_integer(j.at("groups"), at_key(where, "groups")) != 1)
    fail(at_key(where, "groups"), nam_json_found(j.at("groups")) + "; grouped ConvNet convolutions are not supported (the NAM trainer writes none)");
  check_mono(j, where);
  return c;
}

nlohmann::json convnet_config_to_json(const ConvNetConfig& c) {
  if (!c.source.is_null()) return c.source;
  return {{"channels", c.channels}, {"dilations", c.dilations}, {"batchnorm", c.batchnorm}, {"activation", activation_to_json(c.activation)}};
}

LinearConfig linear_config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object {receptive_field, bias}, found " + nam_json_found(j));
  LinearConfig c;
  c.source = j;
  c.receptive_field = nam_positive(j, "receptive_field", where);
  if (c.receptive_field > kMaxTaps)
    fail(at_key(where, "receptive_field"), std::to_string(c.receptive_field) + " is more than " + std::to_string(kMaxTaps));
  c.bias = nam_boolean(nam_required(j, "bias", where), at_key(where, "bias"));
  if (j.contains("implementation")) {  // the core's choice of engine: the same convolution either way
    static const char* const known[] = {"auto", "direct", "legacy", "old", "fft", "partitioned_fft", "partitioned-fft"};
    const nlohmann::json& v = j.at("implementation");
    if (!v.is_string() || std::none_of(std::begin(known), std::end(known), [&](const char* k) { return v.get<std::string>() == k; }))
      fail(at_key(where, "implementation"), "expected auto, direct, legacy, old, fft or partitioned_fft, found " + nam_json_found(v));
  }
  check_mono(j, where);
  return c;
}

nlohmann::json linear_config_to_json(const LinearConfig& c) {
  if (!c.source.is_null()) return c.source;
  return {{"receptive_field", c.receptive_field}, {"bias", c.bias}};
}

// ---- ConvNet's engine ----

ConvNetDsp::ConvNetDsp(const ConvNetConfig& config, const std::vector<float>& weights, int64_t max_block, bool fast_tanh)
    : channels_(config.channels), max_block_(std::max<int64_t>(1, max_block)), prewarm_(config.receptive_field() - 1) {
  if (static_cast<int64_t>(weights.size()) != config.weight_count())
    throw std::invalid_argument("ConvNet: " + std::to_string(weights.size()) + " weights given, this architecture has " +
                                std::to_string(config.weight_count()));
  ActivationSpec activation = config.activation;
  if (fast_tanh && activation.type == "Tanh") activation.type = "Fasttanh";
  activation_.set(activation);
  const int64_t C = channels_;
  size_t at = 0;
  auto next = [&] { return weights[at++]; };
  for (size_t b = 0; b < config.dilations.size(); ++b) {
    Block k;
    k.inputs = b == 0 ? 1 : C;
    k.dilation = config.dilations[b];
    k.w.resize(static_cast<size_t>(C * k.inputs * 2));
    for (float& w : k.w) w = next();  // [out][in][tap]: the file's order
    k.scale.assign(static_cast<size_t>(C), 1.0f);
    k.shift.assign(static_cast<size_t>(C), 0.0f);
    if (config.batchnorm) {
      std::vector<float> mean(static_cast<size_t>(C)), var(static_cast<size_t>(C)), weight(static_cast<size_t>(C)), bias(static_cast<size_t>(C));
      for (float& v : mean) v = next();
      for (float& v : var) v = next();
      for (float& v : weight) v = next();
      for (float& v : bias) v = next();
      const float eps = next();
      // Folded in float, as the core folds it when it loads the file.
      for (size_t o = 0; o < static_cast<size_t>(C); ++o) {
        k.scale[o] = weight[o] / std::sqrt(eps + var[o]);
        k.shift[o] = bias[o] - k.scale[o] * mean[o];
      }
    } else {
      for (float& v : k.shift) v = next();
    }
    k.history.assign(static_cast<size_t>(k.inputs * (k.dilation + max_block_)), 0.0f);
    for (int64_t i = 0; i < k.inputs; ++i) {
      const float* h = k.history.data() + i * (k.dilation + max_block_);
      k.taps.push_back(h);               // tap 0: x[t - d]
      k.taps.push_back(h + k.dilation);  // tap 1: x[t]
    }
    k.out.assign(static_cast<size_t>(C * max_block_), 0.0f);
    blocks_.push_back(std::move(k));
  }
  head_.resize(static_cast<size_t>(C));
  for (float& v : head_) v = next();
  head_bias_ = next();
  reset();
}

void ConvNetDsp::reset() {
  for (Block& k : blocks_) std::fill(k.history.begin(), k.history.end(), 0.0f);
  // Zeros through every block: each history then holds its block's response to silence, as after
  // an endless run of it (the core's prewarm).
  std::vector<float> zeros(static_cast<size_t>(max_block_), 0.0f), ignored(zeros.size());
  for (int64_t left = prewarm_; left > 0; left -= max_block_) run(zeros.data(), ignored.data(), std::min(left, max_block_));
}

void ConvNetDsp::process(const float* in, float* out, int64_t n) {
  for (int64_t done = 0; done < n; done += max_block_) run(in + done, out + done, std::min(max_block_, n - done));
}

// One block of n <= max_block samples. Block b's input row i lives at history[i] + dilation: tap 1
// reads it there (x[t]), tap 0 `dilation` samples earlier (x[t - d]), which the history holds for
// the first d samples of the block.
void ConvNetDsp::run(const float* in, float* out, int64_t n) {
  const float* input = in;
  int64_t input_stride = 0;
  for (Block& k : blocks_) {
    const int64_t d = k.dilation, stride = d + max_block_;
    for (int64_t i = 0; i < k.inputs; ++i)
      std::memcpy(k.history.data() + i * stride + d, input + i * input_stride, static_cast<size_t>(n) * sizeof(float));
    dsp::MatMul m;
    m.w = k.w.data();
    m.x = k.taps.data();
    m.y = k.out.data();
    m.y_stride = max_block_;
    m.outputs = channels_;
    m.inputs = 2 * k.inputs;
    m.n = n;
    dsp::matmul(m);
    for (int64_t o = 0; o < channels_; ++o) {
      float* y = k.out.data() + o * max_block_;
      const float s = k.scale[static_cast<size_t>(o)], b = k.shift[static_cast<size_t>(o)];
      for (int64_t t = 0; t < n; ++t) y[t] = y[t] * s + b;
    }
    activation_.apply(k.out.data(), max_block_, channels_, n);
    // Keep the last d input samples for the next call.
    for (int64_t i = 0; i < k.inputs; ++i) {
      float* h = k.history.data() + i * stride;
      std::memmove(h, h + n, static_cast<size_t>(d) * sizeof(float));
    }
    input = k.out.data();
    input_stride = max_block_;
  }
  for (int64_t t = 0; t < n; ++t) out[t] = head_bias_;
  for (int64_t c = 0; c < channels_; ++c) {
    const float w = head_[static_cast<size_t>(c)];
    const float* y = input + c * input_stride;
    for (int64_t t = 0; t < n; ++t) out[t] += w * y[t];
  }
}

// ---- Linear's engine ----

LinearDsp::LinearDsp(const LinearConfig& config, const std::vector<float>& weights, int64_t max_block)
    : max_block_(std::max<int64_t>(1, max_block)) {
  if (static_cast<int64_t>(weights.size()) != config.weight_count())
    throw std::invalid_argument("Linear: " + std::to_string(weights.size()) + " weights given, this architecture has " +
                                std::to_string(config.weight_count()));
  taps_.assign(weights.begin(), weights.begin() + config.receptive_field);
  bias_ = config.bias ? weights.back() : 0.0f;
  history_.assign(static_cast<size_t>(config.receptive_field - 1 + max_block_), 0.0f);
}

void LinearDsp::reset() { std::fill(history_.begin(), history_.end(), 0.0f); }

void LinearDsp::process(const float* in, float* out, int64_t n) {
  const int64_t k = static_cast<int64_t>(taps_.size()), past = k - 1;
  for (int64_t done = 0; done < n; done += max_block_) {
    const int64_t m = std::min(max_block_, n - done);
    float* x = history_.data() + past;  // x[t] for t < m; x[-1], x[-2], ... before it
    std::memcpy(x, in + done, static_cast<size_t>(m) * sizeof(float));
    float* y = out + done;
    for (int64_t t = 0; t < m; ++t) y[t] = bias_;
    // Tap by tap, so that the loop over time is contiguous (and vectorises).
    for (int64_t j = 0; j < k; ++j) {
      const float w = taps_[static_cast<size_t>(j)];
      const float* xj = x - j;
      for (int64_t t = 0; t < m; ++t) y[t] += w * xj[t];
    }
    std::memmove(history_.data(), history_.data() + m, static_cast<size_t>(past) * sizeof(float));
  }
}

}  // namespace wavetrain::experiments::amp
