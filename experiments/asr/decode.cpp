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

  // The table row of each context (each context_size tokens), new contexts computed in one
  // predictor call. Rows stay valid (the table may move: read it after the call).
  std::vector<int64_t> rows(const std::vector<std::vector<int>>& contexts) {
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
    return rows;
  }
  const at::Tensor& table() const { return table_; }  // [rows][J]

 private:
  void add(const std::vector<std::vector<int>>& contexts) {
    const int64_t n = static_cast<int64_t>(contexts.size()), width = static_cast<int64_t>(contexts[0].size());
    at::Tensor out;
    if (device_.is_cpu()) {
      out = model_.joiner->project_predictor(predict_on_cpu(contexts));  // [n][J]
    } else {
      std::vector<int64_t> flat;
      for (const auto& c : contexts) flat.insert(flat.end(), c.begin(), c.end());
      const at::Tensor tokens = at::tensor(flat, at::kLong).view({n, width}).to(device_);
      out = model_.joiner->project_predictor(model_.predictor->forward(tokens, /*pad=*/false)).squeeze(1);  // [n][J]
    }
    if (!table_.defined()) table_ = at::empty({std::max<int64_t>(64, n), out.size(1)}, out.options());
    if (used_ + n > table_.size(0)) {
      at::Tensor bigger = at::empty({std::max(2 * table_.size(0), used_ + n), out.size(1)}, out.options());
      bigger.narrow(0, 0, used_).copy_(table_.narrow(0, 0, used_));
      table_ = bigger;
    }
    table_.narrow(0, used_, n).copy_(out);
    used_ += n;
  }

  // The stateless predictor of each context as plain loops (StatelessPredictorImpl::forward
  // without padding): embeddings, the grouped convolution over the context (4 input channels per
  // output channel), ReLU. A few thousand multiply-adds a context, where the modules' embedding
  // and grouped convolution cost tens of microseconds of dispatch each.
  at::Tensor predict_on_cpu(const std::vector<std::vector<int>>& contexts) {
    if (!embedding_.defined()) {
      embedding_ = model_.predictor->embedding_weight().detach().to(at::kFloat).contiguous();
      const at::Tensor w = model_.predictor->conv_weight();
      if (w.defined()) conv_ = w.detach().to(at::kFloat).contiguous();
    }
    const int64_t n = static_cast<int64_t>(contexts.size()), P = embedding_.size(1), K = static_cast<int64_t>(contexts[0].size());
    at::Tensor out = at::empty({n, P});
    const float* e = embedding_.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < n; ++r) {
      const std::vector<int>& c = contexts[static_cast<size_t>(r)];
      if (!conv_.defined()) {  // context 1: the last token's embedding
        for (int64_t p = 0; p < P; ++p) o[r * P + p] = std::max(0.0f, e[c[static_cast<size_t>(K - 1)] * P + p]);
        continue;
      }
      const int64_t per_group = conv_.size(1);  // input channels per group
      const float* w = conv_.data_ptr<float>();
      for (int64_t p = 0; p < P; ++p) {
        const int64_t first_in = p / per_group * per_group;  // groups of per_group channels in and out
        float acc = 0;
        for (int64_t i = 0; i < per_group; ++i)
          for (int64_t k = 0; k < K; ++k) acc += w[(p * per_group + i) * K + k] * e[c[static_cast<size_t>(k)] * P + first_in + i];
        o[r * P + p] = std::max(0.0f, acc);
      }
    }
    return out;
  }

  TransducerImpl& model_;
  at::Device device_;
  at::Tensor embedding_, conv_;  // the predictor's weights, float32 on the CPU
  std::map<std::vector<int>, int64_t> index_;
  at::Tensor table_;
  int64_t used_ = 0;
};

// The joiner over a frame's rows (an utterance's encoder frame with a predictor-cache row), as
// [rows][V] floats on the CPU. On the CPU it is computed without the modules: the sums written
// straight from the two tables, then tanh, the output layer (one sgemm) and log-softmax, 3 or 4
// operators in all, where the modules take about 10 (gathers, add, tanh, linear, log-softmax,
// copies): at a few dozen rows a frame, operator overhead is most of the time. Elsewhere (CUDA,
// MPS) the modules run on the device and only the result comes to the CPU.
class JoinerRows {
 public:
  JoinerRows(TransducerImpl& model, const at::Tensor& encoder_out)
      : model_(model), enc_(model.joiner->project_encoder(encoder_out).contiguous()), cpu_(encoder_out.device().is_cpu()) {
    if (cpu_) {
      enc_ = enc_.to(at::kFloat);
      const torch::nn::Linear& out = model.joiner->output();
      weight_t_ = out->weight.detach().to(at::kFloat).t().contiguous();  // [J][V]
      bias_ = out->bias.detach().to(at::kFloat).contiguous();
    }
  }

  // utterances[r], pred_rows[r]: row r's utterance (frame t) and predictor-cache row.
  const float* run(int64_t t, const std::vector<int64_t>& utterances, const PredictorCache& cache, const std::vector<int64_t>& pred_rows,
                   bool log_softmax) {
    const int64_t R = static_cast<int64_t>(utterances.size());
    if (!cpu_) {
      const at::Device device = enc_.device();
      const at::Tensor enc = enc_.select(1, t).index_select(0, at::tensor(utterances, at::kLong).to(device));
      const at::Tensor pred = cache.table().index_select(0, at::tensor(pred_rows, at::kLong).to(device));
      at::Tensor logits = model_.joiner->forward(enc, pred);
      if (log_softmax) logits = logits.log_softmax(-1);
      result_ = logits.to(at::kCPU, at::kFloat).contiguous();
      return result_.data_ptr<float>();
    }
    const int64_t T = enc_.size(1), J = enc_.size(2);
    const at::Tensor table = cache.table().to(at::kFloat);
    if (!hidden_.defined() || hidden_.size(0) < R) hidden_ = at::empty({std::max<int64_t>(R, 64), J});
    const float* e = enc_.data_ptr<float>();
    const float* p = table.data_ptr<float>();
    float* h = hidden_.data_ptr<float>();
    for (int64_t r = 0; r < R; ++r) {
      const float* er = e + (utterances[static_cast<size_t>(r)] * T + t) * J;
      const float* pr = p + pred_rows[static_cast<size_t>(r)] * J;
      for (int64_t j = 0; j < J; ++j) h[r * J + j] = er[j] + pr[j];
    }
    hidden_.narrow(0, 0, R).tanh_();  // one vectorised pass, below ATen's grain: no threads woken
    // The output layer as plain loops: at a few dozen rows, sgemm's threads cost more than the
    // multiply-adds (j outer, v inner over contiguous W^T rows: vectorised without reordering sums).
    const int64_t V = weight_t_.size(1);
    if (!result_.defined() || result_.size(0) < R) result_ = at::empty({std::max<int64_t>(R, 64), V});
    const float* w = weight_t_.data_ptr<float>();
    const float* b = bias_.data_ptr<float>();
    float* out = result_.data_ptr<float>();
    for (int64_t r = 0; r < R; ++r) {
      float* o = out + r * V;
      for (int64_t v = 0; v < V; ++v) o[v] = b[v];
      for (int64_t j = 0; j < J; ++j) {
        const float x = h[r * J + j];
        const float* wj = w + j * V;
        for (int64_t v = 0; v < V; ++v) o[v] += x * wj[v];
      }
      if (log_softmax) {  // in double, as the scores it feeds are summed in double
        double m = o[0], sum = 0;
        for (int64_t v = 1; v < V; ++v) m = std::max<double>(m, o[v]);
        for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(o[v]) - m);
        const double log_sum = m + std::log(sum);
        for (int64_t v = 0; v < V; ++v) o[v] = static_cast<float>(o[v] - log_sum);
      }
    }
    return out;
  }

 private:
  TransducerImpl& model_;
  at::Tensor enc_;  // [B][T][J], projected
  bool cpu_;
  at::Tensor weight_t_, bias_, hidden_, result_;
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

std::string DecodingOptions::settings_label() const {
  if (method == "modified_beam_search") return method + "-beam-size-" + std::to_string(beam);
  return method + "-max-sym-per-frame-" + std::to_string(max_symbols_per_frame);
}

std::vector<Hypothesis> greedy_search(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths,
                                      int max_symbols_per_frame, int unk_id) {
  if (max_symbols_per_frame < 1)
    throw std::invalid_argument("decoding.max_sym_per_frame must be >= 1, got " + std::to_string(max_symbols_per_frame));
  at::NoGradGuard no_grad;
  const int64_t B = encoder_out.size(0), T = encoder_out.size(1), context = model.predictor->context_size();
  const std::vector<int64_t> frames = lengths_on_cpu(lengths, B, T);
  JoinerRows joiner(model, encoder_out);
  PredictorCache cache(model, encoder_out.device());
  const int64_t V = model.config().vocab_size;
  std::vector<Hypothesis> hyps(static_cast<size_t>(B));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int64_t> active;  // utterances still decoding at this frame
    for (int64_t b = 0; b < B; ++b)
      if (frames[static_cast<size_t>(b)] > t) active.push_back(b);
    for (int s = 0; s < max_symbols_per_frame && !active.empty(); ++s) {
      std::vector<std::vector<int>> contexts;
      for (int64_t b : active) contexts.push_back(context_of(hyps[static_cast<size_t>(b)].tokens, context));
      const std::vector<int64_t> pred_rows = cache.rows(contexts);
      const float* logits = joiner.run(t, active, cache, pred_rows, /*log_softmax=*/false);
      std::vector<int64_t> emitted;  // only these try the same frame again
      for (size_t k = 0; k < active.size(); ++k) {
        const float* row = logits + static_cast<int64_t>(k) * V;
        const int y = static_cast<int>(std::max_element(row, row + V) - row);  // the first best, as argmax
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
  JoinerRows joiner(model, encoder_out);
  PredictorCache cache(model, encoder_out.device());
  const int64_t V = model.config().vocab_size;
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
    const std::vector<int64_t> pred_rows = cache.rows(contexts);
    const float* lp = joiner.run(t, utterance_of_row, cache, pred_rows, /*log_softmax=*/true);
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
