// The pruned RNN-T loss of a transducer (transducer_loss.h).
#include "experiments/asr/transducer_loss.h"

#include <algorithm>

#include "losses/rnnt_loss.h"

namespace wavetrain::experiments::asr {

TransducerLoss transducer_loss(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& frames_in,
                               const at::Tensor& tokens, const at::Tensor& token_counts, const TransducerLossOptions& options) {
  const at::Tensor enc = encoder_out.to(at::kFloat);
  const int64_t B = enc.size(0);
  const at::Tensor frames = frames_in.to(enc.device(), at::kLong);
  const at::Tensor counts = token_counts.to(enc.device(), at::kLong);
  // k2's boundary: (first symbol, first frame, symbols, frames) per utterance.
  const at::Tensor boundary = at::stack({at::zeros_like(frames), at::zeros_like(frames), counts, frames}, 1);
  const at::Tensor with_start = at::cat({at::zeros({B, 1}, tokens.options()), tokens}, 1);  // the blank context first
  const at::Tensor pred = model.predictor->forward(with_start);                            // [B][S+1][dp]
  const at::Tensor lm = model.simple_lm_proj(pred), am = model.simple_am_proj(enc);
  losses::RnntOptions o;
  o.boundary = boundary;
  o.reduction = losses::Reduction::kNone;
  const losses::RnntLossWithGrad simple =
      losses::rnnt_loss_smoothed_with_grad(lm, am, tokens, options.lm_scale, options.am_scale, o);
  at::Tensor pruned;
  if (options.full) {
    const at::Tensor logits = model.joiner->forward(model.joiner->project_encoder(enc).unsqueeze(2),
                                                    model.joiner->project_predictor(pred).unsqueeze(1));  // [B][T][S+1][V]
    pruned = losses::rnnt_loss(logits, tokens, o);
  } else {
    const int64_t s_range = std::min<int64_t>(options.prune_range, tokens.size(1) + 1);
    const at::Tensor ranges = losses::get_rnnt_prune_ranges(simple.px_grad, simple.py_grad, boundary, s_range);
    const auto [am_pruned, lm_pruned] =
        losses::do_rnnt_pruning(model.joiner->project_encoder(enc), model.joiner->project_predictor(pred), ranges);
    pruned = losses::rnnt_loss_pruned(model.joiner->forward(am_pruned, lm_pruned), tokens, ranges, o);
  }

  TransducerLoss out;
  at::Tensor finite = at::isfinite(simple.loss).logical_and(at::isfinite(pruned));
  at::Tensor ctc;
  if (options.ctc_scale > 0) {
    const at::Tensor log_probs = at::log_softmax(model.ctc(enc), -1).transpose(0, 1);  // [T][B][V]
    // zero_infinity: an utterance with more tokens than CTC can place in its frames (each token a
    // frame, a blank between repeats) has an infinite CTC loss, and without it ATen's backward gives
    // that utterance NaN gradients even where its loss is masked out below: one such utterance made
    // every weight NaN at step 1,250 of a recipe run. With it the loss and its gradient are 0 there,
    // and the utterance still trains the transducer, which has no such limit.
    ctc = at::ctc_loss(log_probs, tokens, frames, counts, 0, at::Reduction::None, /*zero_infinity=*/true);
    finite = finite.logical_and(at::isfinite(ctc));
  }
  const auto kept = [&](const at::Tensor& per_utterance) { return at::where(finite, per_utterance, at::zeros_like(per_utterance)).sum(); };
  out.nonfinite = B - finite.sum().item<int64_t>();
  out.simple = kept(simple.loss);
  out.pruned = kept(pruned);
  if (ctc.defined()) out.ctc = kept(ctc);
  out.frames = std::max(1.0, kept(frames.to(at::kDouble)).item<double>());
  return out;
}

}  // namespace wavetrain::experiments::asr
