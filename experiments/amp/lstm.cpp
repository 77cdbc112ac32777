// NAM's LSTM (lstm.h).
#include "experiments/amp/lstm.h"

#include "experiments/amp/nam_json.h"

#include <stdexcept>

namespace wavetrain::experiments::amp {

LstmImpl::LstmImpl(LstmConfig config) : config_(config) {
  core_ = register_module("core", torch::nn::LSTM(torch::nn::LSTMOptions(config_.input_size, config_.hidden_size)
                                                       .num_layers(config_.num_layers)
                                                       .batch_first(true)));
  head_ = register_module("head", torch::nn::Linear(config_.hidden_size, 1));
  initial_hidden_ = register_parameter("initial_hidden", at::zeros({config_.num_layers, config_.hidden_size}));
  initial_cell_ = register_parameter("initial_cell", at::zeros({config_.num_layers, config_.hidden_size}));
}

at::Tensor LstmImpl::forward(const at::Tensor& x) {
  State state;
  return forward(x, state);
}

at::Tensor LstmImpl::forward(const at::Tensor& x, State& state) {
  if (x.dim() != 3 || x.size(1) != 1) throw std::invalid_argument("LSTM: input must be [batch][1][samples], got " + c10::str(x.sizes()));
  const int64_t b = x.size(0);
  if (!state.first.defined())
    state = {initial_hidden_.unsqueeze(1).expand({-1, b, -1}).contiguous(), initial_cell_.unsqueeze(1).expand({-1, b, -1}).contiguous()};
  auto [features, next] = core_->forward(x.transpose(1, 2), std::make_tuple(state.first, state.second));  // [B][L][hidden]
  state = {std::get<0>(next), std::get<1>(next)};
  return head_->forward(features).transpose(1, 2);  // [B][1][L]
}

std::vector<float> LstmImpl::export_weights() const {
  std::vector<float> w;
  auto append = [&](const at::Tensor& t) {
    const at::Tensor flat = t.detach().to(at::kFloat).cpu().contiguous().view({-1});
    w.insert(w.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
  };
  const auto params = core_->named_parameters();
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const std::string l = std::to_string(i);
    append(at::cat({params["weight_ih_l" + l], params["weight_hh_l" + l]}, 1));
    append(params["bias_ih_l" + l] + params["bias_hh_l" + l]);
    append(initial_hidden_[i]);
    append(initial_cell_[i]);
  }
  append(head_->weight);
  append(head_->bias);
  return w;
}

void LstmImpl::import_weights(const std::vector<float>& w) {
  const int64_t h = config_.hidden_size;
  const size_t expected = static_cast<size_t>(lstm_weight_count(config_));
  if (w.size() != expected)
    throw std::invalid_argument("LSTM: " + std::to_string(w.size()) + " weights given, this architecture has " +
                                std::to_string(expected));
  torch::NoGradGuard no_grad;
  size_t at = 0;
  auto take = [&](int64_t n) {
    const at::Tensor t = at::from_blob(const_cast<float*>(w.data() + at), {n}, at::kFloat).clone();
    at += static_cast<size_t>(n);
    return t;
  };
  auto params = core_->named_parameters();
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const std::string l = std::to_string(i);
    const int64_t in = i == 0 ? config_.input_size : h;
    const at::Tensor both = take(4 * h * (in + h)).view({4 * h, in + h});
    params["weight_ih_l" + l].copy_(both.narrow(1, 0, in));
    params["weight_hh_l" + l].copy_(both.narrow(1, in, h));
    params["bias_ih_l" + l].copy_(take(4 * h));  // NAM keeps the sum; it all goes to one bias
    params["bias_hh_l" + l].zero_();
    initial_hidden_[i].copy_(take(h));
    initial_cell_[i].copy_(take(h));
  }
  head_->weight.copy_(take(h).view({1, h}));
  head_->bias.copy_(take(1));
}

}  // namespace wavetrain::experiments::amp
