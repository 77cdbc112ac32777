// The Conformer encoder (conformer.h).
#include "experiments/asr/conformer.h"

#include "experiments/asr/depthwise_conv.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace wavetrain::experiments::asr {

void ConformerConfig::validate() const {
  const auto positive = [](const char* key, int64_t v) {
    if (v < 1) throw std::invalid_argument(std::string("model.") + key + " must be >= 1, got " + std::to_string(v));
  };
  positive("feature_dim", feature_dim);
  positive("subsampling_channels", subsampling_channels);
  positive("d_model", d_model);
  positive("num_heads", num_heads);
  positive("ff_dim", ff_dim);
  positive("num_layers", num_layers);
  positive("conv_kernel", conv_kernel);
  if (feature_dim < 7) throw std::invalid_argument("model.feature_dim must be >= 7 (two stride-2 3x3 convolutions), got " + std::to_string(feature_dim));
  if (d_model % num_heads != 0 || (d_model / num_heads) % 2 != 0)
    throw std::invalid_argument("model.d_model (" + std::to_string(d_model) + ") must be num_heads (" + std::to_string(num_heads) +
                                ") x an even head size, for the rotary positions");
  if (conv_kernel % 2 == 0) throw std::invalid_argument("model.conv_kernel must be odd (centred), got " + std::to_string(conv_kernel));
  if (!(dropout >= 0 && dropout < 1)) throw std::invalid_argument("model.dropout must be in [0, 1), got " + std::to_string(dropout));
}

int64_t subsampled_frames(int64_t frames) { return frames < 7 ? 0 : ((frames - 1) / 2 - 1) / 2; }

at::Tensor subsampled_frames(const at::Tensor& frames) {
  return at::clamp_min(at::div(at::div(frames - 1, 2, "floor") - 1, 2, "floor"), 0).masked_fill(frames < 7, 0);
}

at::Tensor rotary(const at::Tensor& x) {
  const int64_t T = x.size(2), half = x.size(3) / 2;
  // The angle tables, made once per (frames, head size, dtype, device) on each thread: every block's
  // queries and keys of a batch share them (8 calls per forward for the tiny model).
  struct Tables {
    int64_t T = -1, half = -1;
    at::ScalarType type = at::kFloat;
    at::Device device{at::kCPU};
    at::Tensor cos, sin;
  };
  thread_local Tables t;
  if (t.T != T || t.half != half || t.type != x.scalar_type() || t.device != x.device()) {
    const auto opts = x.options().dtype(at::kFloat);
    const at::Tensor inv_freq = at::pow(10000.0, -at::arange(half, opts) / static_cast<double>(half));
    const at::Tensor angles = at::outer(at::arange(T, opts), inv_freq);  // [T][half]
    t = {T, half, x.scalar_type(), x.device(), angles.cos().to(x.scalar_type()), angles.sin().to(x.scalar_type())};
  }
  const at::Tensor a = x.narrow(3, 0, half), b = x.narrow(3, half, half);
  return at::cat({a * t.cos - b * t.sin, a * t.sin + b * t.cos}, 3);
}

ConformerBlockImpl::ConformerBlockImpl(const ConformerConfig& c) : heads_(c.num_heads) {
  const auto norm = [&](const char* name) { return register_module(name, torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model}))); };
  ff1_norm_ = norm("ff1_norm");
  ff1_in_ = register_module("ff1_in", torch::nn::Linear(c.d_model, c.ff_dim));
  ff1_out_ = register_module("ff1_out", torch::nn::Linear(c.ff_dim, c.d_model));
  attn_norm_ = norm("attn_norm");
  qkv_ = register_module("qkv", torch::nn::Linear(c.d_model, 3 * c.d_model));
  attn_out_ = register_module("attn_out", torch::nn::Linear(c.d_model, c.d_model));
  conv_norm_ = norm("conv_norm");
  pointwise_in_ = register_module("pointwise_in", torch::nn::Linear(c.d_model, 2 * c.d_model));
  depthwise_ = register_module("depthwise", torch::nn::Conv1d(torch::nn::Conv1dOptions(c.d_model, c.d_model, c.conv_kernel)
                                                                   .padding(c.conv_kernel / 2)
                                                                   .groups(c.d_model)));
  conv_inner_norm_ = norm("conv_inner_norm");
  pointwise_out_ = register_module("pointwise_out", torch::nn::Linear(c.d_model, c.d_model));
  ff2_norm_ = norm("ff2_norm");
  ff2_in_ = register_module("ff2_in", torch::nn::Linear(c.d_model, c.ff_dim));
  ff2_out_ = register_module("ff2_out", torch::nn::Linear(c.ff_dim, c.d_model));
  final_norm_ = norm("final_norm");
  dropout_ = register_module("dropout", experiments::Dropout(c.dropout));
}

at::Tensor ConformerBlockImpl::feed_forward(torch::nn::LayerNorm& norm, torch::nn::Linear& in, torch::nn::Linear& out, const at::Tensor& x) {
  return dropout_(out(dropout_(at::silu(in(norm(x))))));
}

at::Tensor ConformerBlockImpl::attention(const at::Tensor& x, const at::Tensor& valid) {
  const int64_t B = x.size(0), T = x.size(1), d = x.size(2), dh = d / heads_;
  const at::Tensor qkv = qkv_(attn_norm_(x)).view({B, T, 3, heads_, dh}).permute({2, 0, 3, 1, 4});  // [3][B][H][T][dh]
  const at::Tensor q = rotary(qkv[0]), k = rotary(qkv[1]), v = qkv[2];
  at::Tensor scores = at::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(dh));  // [B][H][T][T]
  // Padded frames are masked as keys. Frame 0 is real in every item (lengths' >= 1), so no row is
  // all -inf; rows of padded queries are computed and later ignored.
  scores = scores.masked_fill(valid.logical_not().view({B, 1, 1, T}), -std::numeric_limits<float>::infinity());
  const at::Tensor weights = dropout_(at::softmax(scores, -1, at::kFloat).to(v.scalar_type()));
  return dropout_(attn_out_(at::matmul(weights, v).transpose(1, 2).reshape({B, T, d})));
}

at::Tensor ConformerBlockImpl::convolution(const at::Tensor& x, const at::Tensor& valid) {
  at::Tensor y = at::glu(pointwise_in_(conv_norm_(x)), -1);
  y = y.masked_fill(valid.logical_not().unsqueeze(-1), 0);  // padding must not reach real frames
  y = depthwise_conv_time(y, depthwise_->weight, depthwise_->bias);
  return dropout_(pointwise_out_(at::silu(conv_inner_norm_(y))));
}

at::Tensor ConformerBlockImpl::forward(const at::Tensor& input, const at::Tensor& valid) {
  at::Tensor x = input + 0.5 * feed_forward(ff1_norm_, ff1_in_, ff1_out_, input);
  x = x + attention(x, valid);
  x = x + convolution(x, valid);
  x = x + 0.5 * feed_forward(ff2_norm_, ff2_in_, ff2_out_, x);
  return final_norm_(x);
}

ConformerImpl::ConformerImpl(ConformerConfig config) : config_(config) {
  config_.validate();
  const int64_t c = config_.subsampling_channels;
  conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, c, 3).stride(2)));
  conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(c, c, 3).stride(2)));
  const int64_t f = ((config_.feature_dim - 1) / 2 - 1) / 2;
  subsampling_out_ = register_module("subsampling_out", torch::nn::Linear(c * f, config_.d_model));
  dropout_ = register_module("dropout", experiments::Dropout(config_.dropout));
  for (int64_t i = 0; i < config_.num_layers; ++i)
    blocks_.push_back(register_module("block" + std::to_string(i), ConformerBlock(config_)));
}

std::pair<at::Tensor, at::Tensor> ConformerImpl::forward(const at::Tensor& features, const at::Tensor& lengths) {
  if (features.dim() != 3 || features.size(2) != config_.feature_dim)
    throw std::invalid_argument("Conformer: expected features [batch][frames][" + std::to_string(config_.feature_dim) + "], got " +
                                std::to_string(features.dim()) + " dimensions" +
                                (features.dim() == 3 ? " with " + std::to_string(features.size(2)) + " features" : ""));
  at::Tensor x = at::relu(conv1_(features.unsqueeze(1)));
  x = at::relu(conv2_(x));  // [B][c][T'][F']
  const int64_t B = x.size(0), T = x.size(2);
  x = dropout_(subsampling_out_(x.permute({0, 2, 1, 3}).reshape({B, T, -1})));
  const at::Tensor out_lengths = subsampled_frames(lengths.to(at::kLong)).to(x.device());
  const at::Tensor valid = at::arange(T, out_lengths.options()).unsqueeze(0) < out_lengths.unsqueeze(1);
  for (ConformerBlock& block : blocks_) x = block->forward(x, valid);
  return {x, out_lengths};
}

}  // namespace wavetrain::experiments::asr
