// The transducer: Conformer encoder (conformer.h), icefall's stateless predictor, and the joiner;
// plus the two linear maps of the pruned recipe's "simple" loss and an optional CTC head.
//
// Predictor ("stateless", Ghodsi et al. 2020, as in icefall): the embedding of the last
// `context_size` tokens (blank = 0 is the start-of-sequence context; its embedding is fixed at 0),
// a grouped 1-D convolution over those tokens (kernel = context_size, groups = dim / 4, no bias),
// ReLU. Output u depends on tokens u-context+1 .. u of the blank-prefixed sequence, nothing older.
// Joiner: tanh(encoder_proj(enc) + predictor_proj(pred)) -> linear to the vocabulary.
//
// Presets: tiny (d 128, 4 layers: 1.96 M parameters with 500 tokens), small (d 176, 6 layers:
// 5.1 M). Every size is also a config key (model.d_model, ...).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "experiments/asr/conformer.h"

namespace wavetrain::experiments::asr {

struct TransducerConfig {
  ConformerConfig encoder;
  int64_t vocab_size = 500;
  int64_t predictor_dim = 128;
  int64_t context_size = 2;
  int64_t joiner_dim = 256;
  bool ctc_head = false;
  void validate() const;
};

TransducerConfig transducer_preset(const std::string& name);  // "tiny", "small"
std::vector<std::string> transducer_preset_names();

class StatelessPredictorImpl : public torch::nn::Module {
 public:
  StatelessPredictorImpl(int64_t vocab_size, int64_t dim, int64_t context_size);
  // tokens int64 [B][U] -> [B][U][dim]. With pad, the sequence is taken as preceded by
  // context_size - 1 blanks (training: output u sees tokens up to u). Without, tokens is [B][context]
  // (decoding) and the output is [B][1][dim].
  at::Tensor forward(const at::Tensor& tokens, bool pad = true);
  int64_t context_size() const { return context_size_; }
  // The weights (decoding's CPU path computes the predictor without the modules).
  const at::Tensor& embedding_weight() const { return embedding_->weight; }
  at::Tensor conv_weight() const { return conv_ ? conv_->weight : at::Tensor(); }  // [dim][4][context]; undefined for context 1

 private:
  int64_t context_size_;
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::Conv1d conv_{nullptr};
};
TORCH_MODULE(StatelessPredictor);

class JoinerImpl : public torch::nn::Module {
 public:
  JoinerImpl(int64_t encoder_dim, int64_t predictor_dim, int64_t joiner_dim, int64_t vocab_size);
  at::Tensor project_encoder(const at::Tensor& enc) { return encoder_proj_(enc); }
  at::Tensor project_predictor(const at::Tensor& pred) { return predictor_proj_(pred); }
  // Both already projected, broadcastable: the logits.
  at::Tensor forward(const at::Tensor& enc_projected, const at::Tensor& pred_projected);
  // The output layer (decoding's CPU path computes it without the module).
  const torch::nn::Linear& output() const { return output_; }

 private:
  torch::nn::Linear encoder_proj_{nullptr}, predictor_proj_{nullptr}, output_{nullptr};
};
TORCH_MODULE(Joiner);

class TransducerImpl : public torch::nn::Module {
 public:
  explicit TransducerImpl(TransducerConfig config);
  const TransducerConfig& config() const { return config_; }
  int64_t parameter_count() const;

  Conformer encoder{nullptr};
  StatelessPredictor predictor{nullptr};
  Joiner joiner{nullptr};
  torch::nn::Linear simple_am_proj{nullptr}, simple_lm_proj{nullptr};
  torch::nn::Linear ctc{nullptr};  // only with config.ctc_head
  // The global CMVN the features were normalised with (float32 [feature_dim]; 0 and 1 without
  // CMVN): buffers, so that a checkpoint carries them to decoding.
  at::Tensor feature_mean, feature_std;

 private:
  TransducerConfig config_;
};
TORCH_MODULE(Transducer);

}  // namespace wavetrain::experiments::asr
