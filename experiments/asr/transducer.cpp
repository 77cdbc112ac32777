// The transducer model (transducer.h).
#include "experiments/asr/transducer.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace wavetrain::experiments::asr {

std::vector<std::string> transducer_preset_names() { return {"tiny", "small"}; }

TransducerConfig transducer_preset(const std::string& name) {
  TransducerConfig c;
  if (name == "tiny") {
    c.encoder.d_model = 128;
    c.encoder.ff_dim = 512;
    c.encoder.num_layers = 4;
    c.predictor_dim = 128;
    c.joiner_dim = 192;
  } else if (name == "small") {
    c.encoder.d_model = 176;
    c.encoder.ff_dim = 704;
    c.encoder.num_layers = 6;
    c.encoder.subsampling_channels = 64;
    c.predictor_dim = 176;
    c.joiner_dim = 320;
  } else {
    throw std::invalid_argument("ASR model preset '" + name + "' is not one of tiny, small");
  }
  return c;
}

void TransducerConfig::validate() const {
  encoder.validate();
  if (vocab_size < 2) throw std::invalid_argument("the vocabulary must have the blank and a token, got " + std::to_string(vocab_size));
  if (context_size < 1) throw std::invalid_argument("model.context_size must be >= 1, got " + std::to_string(context_size));
  if (predictor_dim < 4 || predictor_dim % 4 != 0)
    throw std::invalid_argument("model.predictor_dim must be a multiple of 4 (the convolution's groups are dim / 4), got " +
                                std::to_string(predictor_dim));
  if (joiner_dim < 1) throw std::invalid_argument("model.joiner_dim must be >= 1, got " + std::to_string(joiner_dim));
}

StatelessPredictorImpl::StatelessPredictorImpl(int64_t vocab_size, int64_t dim, int64_t context_size) : context_size_(context_size) {
  embedding_ = register_module("embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(vocab_size, dim).padding_idx(0)));
  if (context_size_ > 1)
    conv_ = register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(dim, dim, context_size_).groups(dim / 4).bias(false)));
}

at::Tensor StatelessPredictorImpl::forward(const at::Tensor& tokens, bool pad) {
  at::Tensor e = embedding_(tokens);  // [B][U][dim]
  if (context_size_ > 1) {
    e = e.transpose(1, 2);
    if (pad) e = at::constant_pad_nd(e, {context_size_ - 1, 0});
    e = conv_(e).transpose(1, 2);
  } else if (!pad) {
    e = e.narrow(1, e.size(1) - 1, 1);
  }
  return at::relu(e);
}

JoinerImpl::JoinerImpl(int64_t encoder_dim, int64_t predictor_dim, int64_t joiner_dim, int64_t vocab_size) {
  encoder_proj_ = register_module("encoder_proj", torch::nn::Linear(encoder_dim, joiner_dim));
  predictor_proj_ = register_module("predictor_proj", torch::nn::Linear(predictor_dim, joiner_dim));
  output_ = register_module("output", torch::nn::Linear(joiner_dim, vocab_size));
}

at::Tensor JoinerImpl::forward(const at::Tensor& enc_projected, const at::Tensor& pred_projected) {
  return output_(at::tanh(enc_projected + pred_projected));
}

TransducerImpl::TransducerImpl(TransducerConfig config) : config_(config) {
  config_.validate();
  const int64_t d = config_.encoder.d_model;
  encoder = register_module("encoder", Conformer(config_.encoder));
  predictor = register_module("predictor", StatelessPredictor(config_.vocab_size, config_.predictor_dim, config_.context_size));
  joiner = register_module("joiner", Joiner(d, config_.predictor_dim, config_.joiner_dim, config_.vocab_size));
  simple_am_proj = register_module("simple_am_proj", torch::nn::Linear(d, config_.vocab_size));
  simple_lm_proj = register_module("simple_lm_proj", torch::nn::Linear(config_.predictor_dim, config_.vocab_size));
  if (config_.ctc_head) ctc = register_module("ctc", torch::nn::Linear(d, config_.vocab_size));
  feature_mean = register_buffer("feature_mean", at::zeros({config_.encoder.feature_dim}));
  feature_std = register_buffer("feature_std", at::ones({config_.encoder.feature_dim}));
}

int64_t TransducerImpl::parameter_count() const {
  int64_t n = 0;
  for (const at::Tensor& p : parameters()) n += p.numel();
  return n;
}

}  // namespace wavetrain::experiments::asr
