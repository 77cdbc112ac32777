// Greedy search and modified beam search (decode.h).
#include "experiments/asr/decode.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

namespace wavetrain::experiments::asr {
namespace {

// The predictor's projected output for each distinct context seen in a batch: rows of a table on
// the model's device that doubles when full. A context is the last context_size tokens of the
// blank-padded sequence; the stateless predictor sees nothing older, so the row is exact.
class PredictorCache {
 public:
  PredictorCache(TransducerImpl& model, const at::Device& device) : model_(model), device_(device) {}

  // One row per context (each context_size tokens), new contexts computed in one predictor call.
  at::Tensor rows(const std::vector<std::vector<int>>& contexts) {
    std::vector<int64_t> rows(contexts.size());
    std::vector<std::vector<int>> missing;
    for (size_t i = 0; i < contexts.size(); ++i) {
      auto it = index_.find(contexts[i]);
      if (it == index_.end()) {
        it = index_.emplace(contexts[i], used_ + static_cast<int64_t>(missing.size())).first;
        missing.push_back(contexts[i]);
      }
      rows[i] = it->second;
    }
    if (!missing.empty()) add(missing);
    return table_.index_select(0, at::tensor(rows, at::kLong).to(device_));
  }

 private:
  void add(const std::vector<std::vector<int>>& contexts) {
    const int64_t n = static_cast<int64_t>(contexts.size()), width = static_cast<int64_t>(contexts[0].size());
    std::vector<int64_t> flat;
    for (const auto& c : contexts) flat.insert(flat.end(), c.begin(), c.end());
    const at::Tensor tokens = at::tensor(flat, at::kLong).view({n, width}).to(device_);
    const at::Tensor out = model_.joiner->project_predictor(model_.predictor->forward(tokens, /*pad=*/false)).squeeze(1);  // [n][J]
    if (!table_.defined()) table_ = at::empty({std::max<int64_t>(64, n), out.size(1)}, out.options());
    if (used_ + n > table_.size(0)) {
      at::Tensor bigger = at::empty({std::max(2 * table_.size(0), used_ + n), out.size(1)}, out.options());
      bigger.narrow(0, 0, used_).copy_(table_.narrow(0, 0, used_));
      table_ = bigger;
    }
    table_.narrow(0, used_, n).copy_(out);
    used_ += n;
  }

  TransducerImpl& model_;
  at::Device device_;
  std::map<std::vector<int>, int64_t> index_;
  at::Tensor table_;
  int64_t used_ = 0;
};

// The predictor context of a token sequence: its last `size` tokens, blank (0) before the start.
std::vector<int> context_of(const std::vector<int>& tokens, int64_t size) {
  std::vector<int> c(static_cast<size_t>(size), 0);
  const size_t n = std::min(tokens.size(), c.size());
  std::copy(tokens.end() - static_cast<int64_t>(n), tokens.end(), c.end() - static_cast<int64_t>(n));
  return c;
}

std::vector<int64_t> lengths_on_cpu(const at::Tensor& lengths, int64_t B, int64_t T) {
  const at::Tensor l = lengths.to(at::kCPU, at::kLong).contiguous();
  if (l.dim() != 1 || l.size(0) != B) throw std::invalid_argument("decoding: lengths must be [" + std::to_string(B) + "]");
  std::vector<int64_t> out(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + B);
  for (int64_t x : out)
    if (x < 0 || x > T) throw std::invalid_argument("decoding: a length of " + std::to_string(x) + " frames, outside 0 to " + std::to_string(T));
  return out;
}

double log_add(double a, double b) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi == -INFINITY ? hi : hi + std::log1p(std::exp(lo - hi));
}

}  // namespace

void DecodingOptions::validate() const {
  if (method != "greedy_search" && method != "modified_beam_search")
    throw std::invalid_argument("decoding.method '" + method + "' is not greedy_search or modified_beam_search");
  if (beam < 1) throw std::invalid_argument("decoding.beam must be >= 1, got " + std::to_string(beam));
  if (max_symbols_per_frame < 1)
    throw std::invalid_argument("decoding.max_sym_per_frame must be >= 1, got " + std::to_string(max_symbols_per_frame));
}

std::vector<Hypothesis> greedy_search(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths,
                                      int max_symbols_per_frame, int unk_id) {
  if (max_symbols_per_frame < 1)
    throw std::invalid_argument("decoding.max_sym_per_frame must be >= 1, got " + std::to_string(max_symbols_per_frame));
  at::NoGradGuard no_grad;
  const int64_t B = encoder_out.size(0), T = encoder_out.size(1), context = model.predictor->context_size();
  const std::vector<int64_t> frames = lengths_on_cpu(lengths, B, T);
  const at::Tensor enc = model.joiner->project_encoder(encoder_out);  // [B][T][J]
  PredictorCache cache(model, encoder_out.device());
  std::vector<Hypothesis> hyps(static_cast<size_t>(B));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int64_t> active;  // utterances still decoding at this frame
    for (int64_t b = 0; b < B; ++b)
      if (frames[static_cast<size_t>(b)] > t) active.push_back(b);
    for (int s = 0; s < max_symbols_per_frame && !active.empty(); ++s) {
      std::vector<std::vector<int>> contexts;
      for (int64_t b : active) contexts.push_back(context_of(hyps[static_cast<size_t>(b)].tokens, context));
      const at::Tensor rows = at::tensor(active, at::kLong).to(enc.device());
      const at::Tensor best = model.joiner->forward(enc.select(1, t).index_select(0, rows), cache.rows(contexts)).argmax(-1).to(at::kCPU).contiguous();
      std::vector<int64_t> emitted;  // only these try the same frame again
      for (size_t k = 0; k < active.size(); ++k) {
        const int y = static_cast<int>(best.data_ptr<int64_t>()[k]);
        if (y == 0 || y == unk_id) continue;
        Hypothesis& h = hyps[static_cast<size_t>(active[k])];
        h.tokens.push_back(y);
        h.frames.push_back(static_cast<int>(t));
        emitted.push_back(active[k]);
      }
      active = std::move(emitted);
    }
  }
  return hyps;
}

std::vector<Hypothesis> modified_beam_search(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths, int beam,
                                             int unk_id) {
  if (beam < 1) throw std::invalid_argument("decoding.beam must be >= 1, got " + std::to_string(beam));
  at::NoGradGuard no_grad;
  const int64_t B = encoder_out.size(0), T = encoder_out.size(1), context = model.predictor->context_size();
  const std::vector<int64_t> frames = lengths_on_cpu(lengths, B, T);
  const at::Tensor enc = model.joiner->project_encoder(encoder_out);  // [B][T][J]
  PredictorCache cache(model, encoder_out.device());
  std::vector<std::vector<Hypothesis>> beams(static_cast<size_t>(B), std::vector<Hypothesis>(1));  // the empty sequence, log 1
  for (int64_t t = 0; t < T; ++t) {
    // Every hypothesis of every utterance still decoding, in one joiner call.
    std::vector<int64_t> utterance_of_row, active;
    std::vector<std::vector<int>> contexts;
    for (int64_t b = 0; b < B; ++b) {
      if (frames[static_cast<size_t>(b)] <= t) continue;
      active.push_back(b);
      for (const Hypothesis& h : beams[static_cast<size_t>(b)]) {
        utterance_of_row.push_back(b);
        contexts.push_back(context_of(h.tokens, context));
      }
    }
    if (active.empty()) break;
    const at::Tensor rows = at::tensor(utterance_of_row, at::kLong).to(enc.device());
    const at::Tensor log_probs =
        model.joiner->forward(enc.select(1, t).index_select(0, rows), cache.rows(contexts)).log_softmax(-1).to(at::kCPU, at::kFloat).contiguous();
    const int64_t V = log_probs.size(1);
    const float* lp = log_probs.data_ptr<float>();
    int64_t row = 0;
    for (int64_t b : active) {
      std::vector<Hypothesis>& hyps = beams[static_cast<size_t>(b)];
      const int64_t n = static_cast<int64_t>(hyps.size());
      // The `beam` best (hypothesis, token) extensions of this utterance's n x V.
      std::vector<double> score(static_cast<size_t>(n * V));
      for (int64_t h = 0; h < n; ++h)
        for (int64_t v = 0; v < V; ++v)
          score[static_cast<size_t>(h * V + v)] = hyps[static_cast<size_t>(h)].log_prob + lp[(row + h) * V + v];
      std::vector<int64_t> order(score.size());
      std::iota(order.begin(), order.end(), 0);
      const int64_t k = std::min<int64_t>(beam, static_cast<int64_t>(order.size()));
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int64_t x, int64_t y) { return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)]; });
      std::vector<Hypothesis> next;
      for (int64_t i = 0; i < k; ++i) {
        const Hypothesis& from = hyps[static_cast<size_t>(order[static_cast<size_t>(i)] / V)];
        const int token = static_cast<int>(order[static_cast<size_t>(i)] % V);
        Hypothesis h;
        h.tokens = from.tokens;
        h.frames = from.frames;
        h.log_prob = score[static_cast<size_t>(order[static_cast<size_t>(i)])];
        if (token != 0 && token != unk_id) {
          h.tokens.push_back(token);
          h.frames.push_back(static_cast<int>(t));
        }
        // The same sequence reached twice is one hypothesis: its probabilities add.
        auto same = std::find_if(next.begin(), next.end(), [&](const Hypothesis& x) { return x.tokens == h.tokens; });
        if (same == next.end()) next.push_back(std::move(h));
        else same->log_prob = log_add(same->log_prob, h.log_prob);
      }
      row += n;
      hyps = std::move(next);
    }
  }
  std::vector<Hypothesis> best(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<Hypothesis>& hyps = beams[static_cast<size_t>(b)];
    const auto normalised = [&](const Hypothesis& h) { return h.log_prob / static_cast<double>(h.tokens.size() + static_cast<size_t>(context)); };
    best[static_cast<size_t>(b)] =
        *std::max_element(hyps.begin(), hyps.end(), [&](const Hypothesis& x, const Hypothesis& y) { return normalised(x) < normalised(y); });
  }
  return best;
}

std::vector<Hypothesis> decode(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths,
                               const DecodingOptions& options) {
  options.validate();
  if (options.method == "modified_beam_search") return modified_beam_search(model, encoder_out, lengths, options.beam, options.unk_id);
  return greedy_search(model, encoder_out, lengths, options.max_symbols_per_frame, options.unk_id);
}

}  // namespace wavetrain::experiments::asr
