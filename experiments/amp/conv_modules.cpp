// NAM's ConvNet and Linear as LibTorch modules (conv_modules.h).
#include "experiments/amp/conv_modules.h"

#include <algorithm>
#include <stdexcept>

#include "experiments/amp/nam_wavenet_module.h"

namespace wavetrain::experiments::amp {
namespace {

// Copies `n` values of `w` from `at` into `t` (any shape, row-major) and advances `at`.
void take(const std::vector<float>& w, size_t& at, const at::Tensor& t) {
  const int64_t n = t.numel();
  const at::Tensor src = at::from_blob(const_cast<float*>(w.data() + at), {n}, at::kFloat);
  t.detach().view({-1}).copy_(src);
  at += static_cast<size_t>(n);
}

void put(std::vector<float>& w, const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kFloat).contiguous().view({-1});
  w.insert(w.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

std::vector<int64_t> powers_of_two(int64_t last) {
  std::vector<int64_t> d;
  for (int64_t v = 1; v <= last; v *= 2) d.push_back(v);
  return d;
}

}  // namespace

std::vector<std::string> convnet_preset_names() { return {"standard", "small"}; }

ConvNetConfig convnet_preset(const std::string& name) {
  ConvNetConfig c;
  c.batchnorm = true;
  c.activation = ActivationSpec{"Tanh", {}};
  if (name == "standard") c.channels = 16, c.dilations = powers_of_two(512);
  else if (name == "small") c.channels = 8, c.dilations = powers_of_two(128);
  else throw std::invalid_argument("model.preset '" + name + "' is not a ConvNet preset: standard, small");
  return c;
}

std::vector<std::string> linear_preset_names() { return {"standard", "short"}; }

LinearConfig linear_preset(const std::string& name) {
  LinearConfig c;
  c.bias = true;
  if (name == "standard") c.receptive_field = 1024;
  else if (name == "short") c.receptive_field = 64;
  else throw std::invalid_argument("model.preset '" + name + "' is not a Linear preset: standard, short");
  return c;
}

ConvNetModuleImpl::ConvNetModuleImpl(ConvNetConfig config) : config_(std::move(config)) {
  for (size_t b = 0; b < config_.dilations.size(); ++b) {
    const int64_t inputs = b == 0 ? 1 : config_.channels;
    convs_.push_back(register_module(
        "conv" + std::to_string(b),
        torch::nn::Conv1d(torch::nn::Conv1dOptions(inputs, config_.channels, 2).dilation(config_.dilations[b]).bias(!config_.batchnorm))));
    if (config_.batchnorm)  // eps 1e-5, as PyTorch's (and NAM's) default
      norms_.push_back(register_module("norm" + std::to_string(b), torch::nn::BatchNorm1d(config_.channels)));
  }
  head_ = register_module("head", torch::nn::Conv1d(torch::nn::Conv1dOptions(config_.channels, 1, 1)));
}

at::Tensor ConvNetModuleImpl::forward(const at::Tensor& x) {
  at::Tensor y = x;
  for (size_t b = 0; b < convs_.size(); ++b) {
    y = convs_[b]->forward(y);
    if (!norms_.empty()) y = norms_[b]->forward(y);
    y = activate(config_.activation, y);
  }
  return head_->forward(y);
}

std::vector<float> ConvNetModuleImpl::export_weights() const {
  std::vector<float> w;
  for (size_t b = 0; b < convs_.size(); ++b) {
    put(w, convs_[b]->weight);  // [out][in][2]: the file's order
    if (norms_.empty()) {
      put(w, convs_[b]->bias);
    } else {
      const auto& n = norms_[b];
      put(w, n->running_mean);
      put(w, n->running_var);
      put(w, n->weight);
      put(w, n->bias);
      w.push_back(static_cast<float>(n->options.eps()));
    }
  }
  put(w, head_->weight);
  put(w, head_->bias);
  return w;
}

void ConvNetModuleImpl::import_weights(const std::vector<float>& w) {
  if (static_cast<int64_t>(w.size()) != config_.weight_count())
    throw std::invalid_argument("ConvNet: " + std::to_string(w.size()) + " weights given, this architecture has " +
                                std::to_string(config_.weight_count()));
  torch::NoGradGuard no_grad;
  size_t at = 0;
  for (size_t b = 0; b < convs_.size(); ++b) {
    take(w, at, convs_[b]->weight);
    if (norms_.empty()) {
      take(w, at, convs_[b]->bias);
    } else {
      auto& n = norms_[b];
      take(w, at, n->running_mean);
      take(w, at, n->running_var);
      take(w, at, n->weight);
      take(w, at, n->bias);
      n->options.eps(w[at++]);
    }
  }
  take(w, at, head_->weight);
  take(w, at, head_->bias);
}

LinearModuleImpl::LinearModuleImpl(LinearConfig config) : config_(std::move(config)) {
  conv_ = register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(1, 1, config_.receptive_field).bias(config_.bias)));
}

at::Tensor LinearModuleImpl::forward(const at::Tensor& x) { return conv_->forward(x); }

std::vector<float> LinearModuleImpl::export_weights() const {
  std::vector<float> w;
  put(w, conv_->weight.flip({2}));  // impulse response: w[j] meets x[t - j]
  if (config_.bias) put(w, conv_->bias);
  return w;
}

void LinearModuleImpl::import_weights(const std::vector<float>& w) {
  if (static_cast<int64_t>(w.size()) != config_.weight_count())
    throw std::invalid_argument("Linear: " + std::to_string(w.size()) + " weights given, this architecture has " +
                                std::to_string(config_.weight_count()));
  torch::NoGradGuard no_grad;
  const int64_t k = config_.receptive_field;
  const at::Tensor taps = at::from_blob(const_cast<float*>(w.data()), {1, 1, k}, at::kFloat).flip({2});
  conv_->weight.copy_(taps);
  if (config_.bias) conv_->bias.fill_(w.back());
}

}  // namespace wavetrain::experiments::amp
