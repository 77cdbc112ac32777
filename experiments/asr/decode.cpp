// Greedy decoding (decode.h).
#include "experiments/asr/decode.h"

#include <stdexcept>

namespace wavetrain::experiments::asr {

std::vector<std::vector<int>> greedy_search(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths,
                                            int max_symbols_per_frame) {
  if (max_symbols_per_frame < 1)
    throw std::invalid_argument("decoding.max_sym_per_frame must be >= 1, got " + std::to_string(max_symbols_per_frame));
  at::NoGradGuard no_grad;
  const int64_t B = encoder_out.size(0), T = encoder_out.size(1), context = model.predictor->context_size();
  const at::Device device = encoder_out.device();
  const at::Tensor enc = model.joiner->project_encoder(encoder_out);  // [B][T][J]
  const at::Tensor frames = lengths.to(device, at::kLong);
  at::Tensor contexts = at::zeros({B, context}, at::TensorOptions().dtype(at::kLong).device(device));  // blanks
  at::Tensor pred = model.joiner->project_predictor(model.predictor->forward(contexts, /*pad=*/false)).squeeze(1);  // [B][J]
  std::vector<std::vector<int>> hyps(static_cast<size_t>(B));
  for (int64_t t = 0; t < T; ++t) {
    const at::Tensor active = frames > t;
    const at::Tensor frame = enc.select(1, t);
    for (int s = 0; s < max_symbols_per_frame; ++s) {
      const at::Tensor best = model.joiner->forward(frame, pred).argmax(-1);  // [B]
      const at::Tensor emit = active.logical_and(best != 0);
      if (!emit.any().item<bool>()) break;
      const at::Tensor emit_cpu = emit.cpu().contiguous(), best_cpu = best.cpu().contiguous();
      const bool* e = emit_cpu.data_ptr<bool>();
      const int64_t* y = best_cpu.data_ptr<int64_t>();
      for (int64_t b = 0; b < B; ++b)
        if (e[b]) hyps[static_cast<size_t>(b)].push_back(static_cast<int>(y[b]));
      const at::Tensor shifted = at::cat({contexts.narrow(1, 1, context - 1), best.unsqueeze(1)}, 1);
      contexts = at::where(emit.unsqueeze(1), shifted, contexts);
      const at::Tensor fresh = model.joiner->project_predictor(model.predictor->forward(contexts, false)).squeeze(1);
      pred = at::where(emit.unsqueeze(1), fresh, pred);
    }
  }
  return hyps;
}

}  // namespace wavetrain::experiments::asr
