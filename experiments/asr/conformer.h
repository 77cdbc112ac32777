// The transducer's encoder: a Conformer (Gulati et al. 2020) with rotary positions.
//
//   features [B][T][F] -> conv2d subsampling x4 -> [B][T'][d], T' = ((T - 1) / 2 - 1) / 2
//   N blocks of: x += FF(x)/2; x += MHSA(LN x); x += Conv(LN x); x += FF(x)/2; x = LN x
//
// The subsampling is two 3x3 convolutions of stride 2 without padding (so a 7-frame utterance is
// the shortest that gives one output frame) and a linear map to d. Attention is multi-head self
// attention with rotary position embeddings on queries and keys (Su et al. 2021: relative positions
// without a [T][T] position table); padded frames are masked as keys. The convolution module is
// pointwise (d -> 2d) + GLU, a depthwise convolution over time (depthwise_conv.h; padded frames
// zeroed first, so that padding never leaks into real frames), layer norm (batch norm would mix padded frames into its
// statistics), SiLU, pointwise (d -> d).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <utility>
#include <vector>

#include "experiments/common/dropout.h"

namespace wavetrain::experiments::asr {

struct ConformerConfig {
  int64_t feature_dim = 80;
  int64_t subsampling_channels = 32;
  int64_t d_model = 128;
  int64_t num_heads = 4;
  int64_t ff_dim = 512;
  int64_t num_layers = 4;
  int64_t conv_kernel = 15;  // odd
  double dropout = 0.1;
  void validate() const;     // throws std::invalid_argument naming the key
};

// Frames after the subsampling for `frames` input frames (0 when fewer than 7).
int64_t subsampled_frames(int64_t frames);
at::Tensor subsampled_frames(const at::Tensor& frames);  // int64, elementwise

class ConformerBlockImpl : public torch::nn::Module {
 public:
  ConformerBlockImpl(const ConformerConfig& c);
  // x [B][T][d]; valid [B][T] bool, true at real frames.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& valid);

 private:
  at::Tensor feed_forward(torch::nn::LayerNorm& norm, torch::nn::Linear& in, torch::nn::Linear& out, const at::Tensor& x);
  at::Tensor attention(const at::Tensor& x, const at::Tensor& valid);
  at::Tensor convolution(const at::Tensor& x, const at::Tensor& valid);

  int64_t heads_;
  torch::nn::LayerNorm ff1_norm_{nullptr}, attn_norm_{nullptr}, conv_norm_{nullptr}, conv_inner_norm_{nullptr},
      ff2_norm_{nullptr}, final_norm_{nullptr};
  torch::nn::Linear ff1_in_{nullptr}, ff1_out_{nullptr}, ff2_in_{nullptr}, ff2_out_{nullptr};
  torch::nn::Linear qkv_{nullptr}, attn_out_{nullptr};
  torch::nn::Linear pointwise_in_{nullptr}, pointwise_out_{nullptr};
  torch::nn::Conv1d depthwise_{nullptr};
  experiments::Dropout dropout_{nullptr};
};
TORCH_MODULE(ConformerBlock);

class ConformerImpl : public torch::nn::Module {
 public:
  explicit ConformerImpl(ConformerConfig config);
  // features [B][T][F], lengths int64 [B] -> ([B][T'][d], lengths' [B]).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& features, const at::Tensor& lengths);
  const ConformerConfig& config() const { return config_; }

 private:
  ConformerConfig config_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear subsampling_out_{nullptr};
  experiments::Dropout dropout_{nullptr};
  std::vector<ConformerBlock> blocks_;
};
TORCH_MODULE(Conformer);

// Rotary position embedding of x [B][H][T][dh] (dh even) for positions 0..T-1: pairs (i, i + dh/2)
// rotated by angle t * 10000^(-2i/dh). Exposed for its test (a relative-position invariant).
at::Tensor rotary(const at::Tensor& x);

}  // namespace wavetrain::experiments::asr
