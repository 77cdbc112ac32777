// The pruned RNN-T loss of a transducer (icefall's recipe) on a batch of encoder outputs:
//
//   lm = simple_lm_proj(predictor(blank + tokens)), am = simple_am_proj(encoder_out)
//   simple = rnnt_loss_smoothed(lm, am, lm_scale, am_scale), with its gradients -> prune ranges
//   pruned = rnnt_loss_pruned(joiner(encoder_proj(enc) and predictor_proj(pred) at the ranges))
//   ctc    = CTC of the encoder's CTC head (only when ctc_scale > 0)
// With `full`, the joiner runs on the whole [B][T][S+1] grid instead and `pruned` holds the full
// RNN-T loss (torchaudio's rnnt_loss): every alignment trains, at S+1 / prune_range times the
// joiner's cost; the simple loss is still computed (its weight may be set to 0).
//
// Everything in float32. Per utterance; an utterance with a non-finite loss (any of them) is left
// out of the sums and counted (icefall drops such utterances instead of the whole batch).
#pragma once

#include <ATen/ATen.h>

#include "experiments/asr/transducer.h"

namespace wavetrain::experiments::asr {

struct TransducerLossOptions {
  double lm_scale = 0.25, am_scale = 0.0;
  int64_t prune_range = 5;
  double ctc_scale = 0.0;
  bool full = false;
};

struct TransducerLoss {
  at::Tensor simple, pruned, ctc;  // sums over the finite utterances (ctc undefined without ctc_scale)
  double frames = 1;               // encoder frames of those utterances (at least 1)
  int64_t nonfinite = 0;           // utterances left out
};

// encoder_out [B][T][d] (any float type), frames int64 [B] (of encoder_out), tokens int64 [B][S]
// padded, token_counts int64 [B].
TransducerLoss transducer_loss(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& frames,
                               const at::Tensor& tokens, const at::Tensor& token_counts, const TransducerLossOptions& options);

}  // namespace wavetrain::experiments::asr
