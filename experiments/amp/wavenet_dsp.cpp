// Any .nam WaveNet, real-time or offline (wavenet_dsp.h).
#include "experiments/amp/wavenet_dsp.h"
#include "experiments/amp/row_activation.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "experiments/amp/nam_file.h"

namespace wavetrain::experiments::amp {
namespace {

// A channel-major signal's current block and the `keep` samples before it: row r's block starts
// at row(r), and row(r)[-keep .. -1] are the samples before. When the next block would not fit,
// the last `keep` samples move to the front (rarely: capacity leaves room for many blocks).
struct History {
  int64_t rows = 0, keep = 0, capacity = 0, pos = 0;
  std::vector<float> data;

  void init(int64_t r, int64_t k, int64_t max_block) {
    rows = r;
    keep = k;
    // Room for the block and at least as much again (or 1024 samples): the move is rare, and memory
    // stays linear in the block size for offline blocks.
    capacity = k + max_block + std::max<int64_t>(std::max<int64_t>(k, max_block), 1024);
    data.assign(static_cast<size_t>(rows * capacity), 0.0f);
    pos = keep;
  }
  void clear() {
    std::fill(data.begin(), data.end(), 0.0f);
    pos = keep;
  }
  void begin(int64_t n) {
    if (pos + n <= capacity) return;
    for (int64_t r = 0; r < rows; ++r) {
      float* base = data.data() + r * capacity;
      std::memmove(base, base + pos - keep, static_cast<size_t>(keep) * sizeof(float));
    }
    pos = keep;
  }
  float* row(int64_t r) { return data.data() + r * capacity + pos; }
  float* base() { return row(0); }
  int64_t stride() const { return capacity; }
  void end(int64_t n) { pos += n; }
};

// The file's weights, read in order.
struct Reader {
  const std::vector<float>& w;
  size_t at = 0;
  std::vector<float> take(int64_t count) {
    if (at + static_cast<size_t>(count) > w.size()) throw std::invalid_argument("WaveNet: the weights end early (the config asks for more)");
    std::vector<float> v(w.begin() + static_cast<std::ptrdiff_t>(at), w.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(count)));
    at += static_cast<size_t>(count);
    return v;
  }
};

// A (grouped, dilated, causal) convolution in the file's layout: weight [out][in/groups][kernel]
// (so each output row is already the matrix row over (input channel, tap)), bias [out] or none.
struct Conv {
  int64_t in = 0, out = 0, kernel = 1, dilation = 1, groups = 1;
  std::vector<float> w, b;
  std::vector<const float*> rows;  // scratch: the input rows of one group, each tap shifted back
  // The product's arguments, kept: a MatMul made afresh for every call was zeroed with `rep stos`,
  // which cost a WaveNet of 3 channels 5% of its time.
  dsp::MatMul product;

  void load(Reader& r, int64_t in_, int64_t out_, int64_t kernel_, int64_t dilation_, int64_t groups_, bool bias) {
    in = in_, out = out_, kernel = kernel_, dilation = dilation_, groups = groups_;
    w = r.take(out * (in / groups) * kernel);
    if (bias) b = r.take(out);
    rows.resize(static_cast<size_t>((in / groups) * kernel));
  }
  // The product's input rows for `channels` channels of x: each channel once per tap, shifted back
  // (kernel - 1 - k) dilation samples, in the weights' (channel, tap) order.
  void tap_rows(const float* x, int64_t x_stride, int64_t channels, const float** out) const {
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t k = 0; k < kernel; ++k) *out++ = x + c * x_stride - (kernel - 1 - k) * dilation;
  }
  // y[o][0 .. n) (+)= b[o] + sum over (c, k) of w[o][c][k] x[c][t - (kernel - 1 - k) dilation]; x's
  // rows are x_stride apart and hold (kernel - 1) dilation samples before the block. addend (not
  // with accumulate): rows added to y in the same pass, addend_stride apart.
  void run(const float* x, int64_t x_stride, float* y, int64_t y_stride, int64_t n, bool accumulate, const float* addend = nullptr,
           int64_t addend_stride = 0) {
    const int64_t gi = in / groups, go = out / groups;
    for (int64_t g = 0; g < groups; ++g) {
      tap_rows(x + g * gi * x_stride, x_stride, gi, rows.data());
      dsp::MatMul& m = product;
      m.w = w.data() + g * go * gi * kernel;
      m.x = rows.data();
      m.y = y + g * go * y_stride;
      m.y_stride = y_stride;
      m.bias = b.empty() ? nullptr : b.data() + g * go;
      m.outputs = go;
      m.inputs = gi * kernel;
      m.n = n;
      m.accumulate = accumulate;
      m.addend = addend ? addend + g * go * addend_stride : nullptr;
      m.addend_stride = addend_stride;
      dsp::matmul(m);
    }
  }
};

// FiLM: x = x * s + t, [s; t] = 1x1(c) with bias and groups (t only with shift).
struct Film {
  bool active = false, shift = true;
  int64_t dim = 0;
  Conv conv;
  void load(Reader& r, const FilmSpec& spec, int64_t condition, int64_t dim_) {
    active = spec.active;
    if (!active) return;
    shift = spec.shift;
    dim = dim_;
    conv.load(r, condition, (shift ? 2 : 1) * dim, 1, 1, spec.groups, true);
  }
  void apply(float* x, int64_t x_stride, const float* c, int64_t c_stride, float* scratch, int64_t s_stride, int64_t n) {
    if (!active) return;
    conv.run(c, c_stride, scratch, s_stride, n, false);
    for (int64_t r = 0; r < dim; ++r)
      dsp::scale_shift(x + r * x_stride, scratch + r * s_stride, shift ? scratch + (dim + r) * s_stride : nullptr, x + r * x_stride, n);
  }
};

void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_stride, src + r * src_stride, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

struct WaveNetDsp::PostHead {
  struct Stage {
    Conv conv;
    History in;  // f(y) with kernel - 1 samples of history
    std::vector<float> out;
  };
  RowActivation activation;
  std::vector<Stage> stages;
};

struct WaveNetDsp::Array {
  struct Layer {
    Gating gating = Gating::None;
    RowActivation primary, secondary;
    Conv conv, mixer, layer1x1, head1x1;
    bool has_layer1x1 = true, has_head1x1 = false;
    std::array<Film, kFilmSites> film;
    History in;       // the layer's input z (C rows)
    History film_in;  // FiLM_conv_pre(z), when that FiLM is active: what the conv reads
    // The dilated conv and the input mixer as one product, where no FiLM or group sits between
    // them: [conv weights | mixer weights] over [the conv's shifted rows; the condition's rows].
    // The same sums in the same order as the two passes, so the same floats, in one pass over a.
    bool fused = false;
    std::vector<float> fused_w;  // [m][C kernel + condition]
    std::vector<const float*> fused_rows;
    dsp::MatMul product;
    // The fused product also applies the activation (ungated layers, no FiLM around it, a kind
    // without exp) and, without a head1x1, adds p into the head's sum: two passes fewer over `a`.
    bool act_in_product = false;
    // ... and, where its width fits one tile (B <= 4) and nothing else reads p, the layer1x1 and the
    // residual too (MatMul::w2): the whole layer in one pass.
    bool layer_in_product = false;
  };
  int64_t C = 0, B = 0, M = 0, condition = 1, head_in = 0, head_out = 0, S = 0;
  Conv rechannel, head_rechannel;
  std::vector<Layer> layers;
  History head_sum;
  // Scratch, [rows][S] each.
  std::vector<float> a, p, tmp, film, mixin, z_out, head;

  void process(const float* y, int64_t y_stride, const float* c, int64_t c_stride, const float* previous_head, int64_t n);
  // Where layer li's output goes, and its row stride: the next layer's input (its block begun), or
  // the array's output.
  std::pair<float*, int64_t> residual_destination(size_t li, int64_t n) {
    if (li + 1 == layers.size()) return {z_out.data(), S};
    History& next = layers[li + 1].in;
    next.begin(n);
    return {next.base(), next.stride()};
  }
};

void WaveNetDsp::Array::process(const float* y, int64_t y_stride, const float* c, int64_t c_stride, const float* previous_head, int64_t n) {
  Layer& first = layers.front();
  first.in.begin(n);
  rechannel.run(y, y_stride, first.in.base(), first.in.stride(), n, false);
  head_sum.begin(n);
  for (int64_t r = 0; r < head_in; ++r) {
    float* h = head_sum.row(r);
    if (previous_head) std::memcpy(h, previous_head + r * S, static_cast<size_t>(n) * sizeof(float));
    else std::fill(h, h + n, 0.0f);
  }
  for (size_t li = 0; li < layers.size(); ++li) {
    Layer& L = layers[li];
    // The dilated conv, on z or on FiLM_conv_pre(z).
    History* src = &L.in;
    if (L.film[kConvPre].active) {
      L.film_in.begin(n);
      copy_rows(L.in.base(), L.in.stride(), L.film_in.base(), L.film_in.stride(), C, n);
      L.film[kConvPre].apply(L.film_in.base(), L.film_in.stride(), c, c_stride, film.data(), S, n);
      src = &L.film_in;
    }
    const int64_t m = L.gating == Gating::None ? B : 2 * B;
    if (L.fused) {
      L.conv.tap_rows(src->base(), src->stride(), C, L.fused_rows.data());
      for (int64_t j = 0; j < condition; ++j) L.fused_rows[static_cast<size_t>(C * L.conv.kernel + j)] = c + j * c_stride;
      dsp::MatMul& mm = L.product;  // (kept, as in Conv)
      mm.w = L.fused_w.data();
      mm.x = L.fused_rows.data();
      mm.y = a.data();
      mm.y_stride = S;
      mm.bias = L.conv.b.data();
      mm.outputs = m;
      mm.inputs = static_cast<int64_t>(L.fused_rows.size());
      mm.n = n;
      if (L.act_in_product) {
        mm.act = L.primary.f;
        if (!L.has_head1x1) mm.sum = head_sum.base(), mm.sum_stride = head_sum.stride(), mm.sum_rows = head_in;
      }
      if (L.layer_in_product) {  // z + layer1x1(p), into the next layer's input or the array's output
        mm.w2 = L.layer1x1.w.data();
        mm.bias2 = L.layer1x1.b.data();
        mm.addend2 = L.in.base();
        mm.addend2_stride = L.in.stride();
        mm.outputs2 = C;
        std::tie(mm.y2, mm.y2_stride) = residual_destination(li, n);
        mm.y = nullptr;  // p: nothing else reads it
      }
      dsp::matmul(mm);
      if (L.layer_in_product) {
        L.in.end(n);
        if (L.film[kConvPre].active) L.film_in.end(n);
        continue;
      }
    } else {
      L.conv.run(src->base(), src->stride(), a.data(), S, n, false);
      L.film[kConvPost].apply(a.data(), S, c, c_stride, film.data(), S, n);
      // The input mixer, added in.
      const float* mix_src = c;
      int64_t mix_stride = c_stride;
      if (L.film[kMixinPre].active) {
        copy_rows(c, c_stride, mixin.data(), S, condition, n);
        L.film[kMixinPre].apply(mixin.data(), S, c, c_stride, film.data(), S, n);
        mix_src = mixin.data();
        mix_stride = S;
      }
      if (L.film[kMixinPost].active) {
        L.mixer.run(mix_src, mix_stride, tmp.data(), S, n, false);
        L.film[kMixinPost].apply(tmp.data(), S, c, c_stride, film.data(), S, n);
        for (int64_t r = 0; r < m; ++r) dsp::add(tmp.data() + r * S, a.data() + r * S, n);
      } else {
        L.mixer.run(mix_src, mix_stride, a.data(), S, n, true);
      }
    }
    L.film[kActivationPre].apply(a.data(), S, c, c_stride, film.data(), S, n);
    // The activation: p [B rows]. In place in a's first B rows, except where a blended layer
    // needs them after.
    float* const pp = L.gating == Gating::Blended ? p.data() : a.data();
    if (pp != a.data()) copy_rows(a.data(), S, pp, S, B, n);
    if (!L.act_in_product) L.primary.apply(pp, S, B, n);
    if (L.gating != Gating::None) {
      float* gate = a.data() + B * S;
      L.secondary.apply(gate, S, B, n);
      for (int64_t r = 0; r < B; ++r) {
        float* pr = pp + r * S;
        const float* gr = gate + r * S;
        if (L.gating == Gating::Gated) {
          dsp::multiply(pr, gr, pr, n);
        } else {  // blended: g f(a1) + (1 - g) a1
          const float* a1 = a.data() + r * S;
          for (int64_t t = 0; t < n; ++t) pr[t] = a1[t] + gr[t] * (pr[t] - a1[t]);
        }
      }
    }
    L.film[kActivationPost].apply(pp, S, c, c_stride, film.data(), S, n);
    // The residual: the next layer's input (or the array's output) = z + layer1x1(p).
    const auto [dst, dst_stride] = residual_destination(li, n);
    // Without a layer1x1 the core passes z on unchanged. Its layer1x1_post_film takes effect in
    // blended layers only (the core's behaviour, which the reference outputs confirm; in other
    // layers its weights are read and unused).
    if (!L.has_layer1x1) {
      copy_rows(L.in.base(), L.in.stride(), dst, dst_stride, C, n);
    } else if (L.gating == Gating::Blended && L.film[kLayer1x1Post].active) {
      L.layer1x1.run(pp, S, tmp.data(), S, n, false);
      L.film[kLayer1x1Post].apply(tmp.data(), S, c, c_stride, film.data(), S, n);
      for (int64_t r = 0; r < C; ++r) dsp::add(L.in.row(r), tmp.data() + r * S, dst + r * dst_stride, n);
    } else {
      L.layer1x1.run(pp, S, dst, dst_stride, n, false, L.in.base(), L.in.stride());  // z + layer1x1(p) in one pass
    }
    // The head's share.
    if (L.has_head1x1) {
      L.head1x1.run(pp, S, tmp.data(), S, n, false);
      L.film[kHead1x1Post].apply(tmp.data(), S, c, c_stride, film.data(), S, n);
      dsp::add_rows(tmp.data(), S, head_sum.base(), head_sum.stride(), head_in, n);
    } else if (!L.act_in_product) {
      dsp::add_rows(pp, S, head_sum.base(), head_sum.stride(), head_in, n);
    }
    L.in.end(n);
    if (L.film[kConvPre].active) L.film_in.end(n);
  }
  head_rechannel.run(head_sum.base(), head_sum.stride(), head.data(), S, n, false);
  head_sum.end(n);
}

WaveNetDsp::WaveNetDsp(const NamWaveNetSpec& spec, const std::vector<float>& weights, int64_t max_block)
    : max_block_(std::max<int64_t>(1, max_block)), output_channels_(spec.output_channels()), receptive_field_(nam_receptive_field(spec)) {
  if (static_cast<int64_t>(weights.size()) != nam_wavenet_weight_count(spec))
    throw std::invalid_argument("WaveNet: " + std::to_string(weights.size()) + " weights given, its config has " +
                                std::to_string(nam_wavenet_weight_count(spec)));
  if (spec.condition_dsp) {
    const NamFileModel& c = *spec.condition_dsp;
    if (c.architecture != "WaveNet") throw std::invalid_argument("WaveNet: a condition_dsp must be a WaveNet, found " + c.architecture);
    condition_dsp_ = std::make_unique<WaveNetDsp>(c.wavenet, c.weights, max_block_);
    condition_channels_ = condition_dsp_->output_channels();
    condition_.assign(static_cast<size_t>(condition_channels_ * max_block_), 0.0f);
  }
  const int64_t S = max_block_;
  Reader reader{weights};
  for (const NamLayerArraySpec& s : spec.arrays) {
    auto array = std::make_unique<Array>();
    Array& A = *array;
    A.C = s.channels;
    A.B = s.bottleneck;
    A.condition = s.condition_size;
    A.head_in = s.head_in();
    A.head_out = s.head_size;
    A.S = S;
    int64_t max_m = A.B, max_film = 0;
    A.rechannel.load(reader, s.input_size, A.C, 1, 1, 1, false);
    for (const NamLayerSpec& ls : s.layers) {
      Array::Layer L;
      L.gating = ls.gating;
      L.primary.set(ls.activation);
      if (ls.gating != Gating::None) L.secondary.set(ls.secondary);
      const int64_t m = ls.gating == Gating::None ? A.B : 2 * A.B;
      max_m = std::max(max_m, m);
      L.conv.load(reader, A.C, m, ls.kernel_size, ls.dilation, s.groups_input, true);
      L.mixer.load(reader, A.condition, m, 1, 1, s.groups_input_mixin, false);
      L.has_layer1x1 = s.layer1x1;
      if (s.layer1x1) L.layer1x1.load(reader, A.B, A.C, 1, 1, s.layer1x1_groups, true);
      L.has_head1x1 = s.head1x1;
      if (s.head1x1) L.head1x1.load(reader, A.B, s.head1x1_out, 1, 1, s.head1x1_groups, true);
      const int64_t dims[kFilmSites] = {A.C, m, A.condition, m, m, A.B, A.C, s.head1x1_out};
      for (int f = 0; f < kFilmSites; ++f) {
        L.film[static_cast<size_t>(f)].load(reader, s.film[static_cast<size_t>(f)], A.condition, dims[f]);
        if (s.film[static_cast<size_t>(f)].active) max_film = std::max(max_film, (s.film[static_cast<size_t>(f)].shift ? 2 : 1) * dims[f]);
      }
      L.fused = L.conv.groups == 1 && L.mixer.groups == 1 && !L.conv.b.empty() && !L.film[kConvPost].active &&
                !L.film[kMixinPre].active && !L.film[kMixinPost].active;
      if (L.fused) {
        const int64_t inputs = A.C * ls.kernel_size + A.condition;
        L.fused_w.resize(static_cast<size_t>(m * inputs));
        for (int64_t o = 0; o < m; ++o) {
          std::copy(L.conv.w.begin() + o * A.C * ls.kernel_size, L.conv.w.begin() + (o + 1) * A.C * ls.kernel_size,
                    L.fused_w.begin() + o * inputs);
          std::copy(L.mixer.w.begin() + o * A.condition, L.mixer.w.begin() + (o + 1) * A.condition,
                    L.fused_w.begin() + o * inputs + A.C * ls.kernel_size);
        }
        L.fused_rows.resize(static_cast<size_t>(inputs));
      }
      const bool epilogue = L.fused && L.gating == Gating::None && !L.film[kActivationPre].active && !L.film[kActivationPost].active &&
                            L.primary.slopes.empty();
      L.layer_in_product = epilogue && m <= 4 && L.has_layer1x1 && L.layer1x1.groups == 1 && !L.has_head1x1 &&
                           dsp::fits_epilogue(L.primary.f.kind, true);
      L.act_in_product = L.layer_in_product || (epilogue && dsp::fits_epilogue(L.primary.f.kind, false));
      const int64_t history = (ls.kernel_size - 1) * ls.dilation;
      L.in.init(A.C, L.film[kConvPre].active ? 0 : history, S);
      if (L.film[kConvPre].active) L.film_in.init(A.C, history, S);
      A.layers.push_back(std::move(L));
    }
    A.head_rechannel.load(reader, A.head_in, A.head_out, s.head_kernel, s.head_dilation, 1, s.head_bias);
    A.head_sum.init(A.head_in, (s.head_kernel - 1) * s.head_dilation, S);
    A.M = max_m;
    A.a.assign(static_cast<size_t>(max_m * S), 0.0f);
    A.p.assign(static_cast<size_t>(A.B * S), 0.0f);
    A.tmp.assign(static_cast<size_t>(std::max({max_m, A.C, s.head1x1_out, A.B}) * S), 0.0f);
    A.film.assign(static_cast<size_t>(std::max<int64_t>(1, max_film) * S), 0.0f);
    A.mixin.assign(static_cast<size_t>(A.condition * S), 0.0f);
    A.z_out.assign(static_cast<size_t>(A.C * S), 0.0f);
    A.head.assign(static_cast<size_t>(A.head_out * S), 0.0f);
    arrays_.push_back(std::move(array));
  }
  if (spec.post_head) {
    const NamPostHeadSpec& h = *spec.post_head;
    int64_t in = spec.arrays.back().head_size;
    post_head_ = std::make_unique<PostHead>();
    post_head_->activation.set(h.activation);
    for (size_t i = 0; i < h.kernel_sizes.size(); ++i) {
      const int64_t out = i + 1 == h.kernel_sizes.size() ? h.out_channels : h.channels;
      PostHead::Stage st;
      st.conv.load(reader, in, out, h.kernel_sizes[i], 1, 1, true);
      st.in.init(in, h.kernel_sizes[i] - 1, S);
      st.out.assign(static_cast<size_t>(out * S), 0.0f);
      post_head_->stages.push_back(std::move(st));
      in = out;
    }
  }
  head_scale_ = reader.take(1)[0];
  if (reader.at != weights.size()) throw std::invalid_argument("WaveNet: weights left over after the config's");
  reset();
}

WaveNetDsp::~WaveNetDsp() = default;

void WaveNetDsp::reset() {
  for (auto& A : arrays_) {
    for (Array::Layer& L : A->layers) {
      L.in.clear();
      L.film_in.clear();
    }
    A->head_sum.clear();
  }
  if (post_head_)
    for (PostHead::Stage& st : post_head_->stages) st.in.clear();
  if (condition_dsp_) condition_dsp_->reset();
  // receptive_field - 1 zeros: the state the zeros before the first sample leave.
  std::vector<float> zeros(static_cast<size_t>(max_block_), 0.0f), ignored(static_cast<size_t>(max_block_ * output_channels_));
  for (int64_t left = receptive_field_ - 1; left > 0;) {
    const int64_t n = std::min(left, max_block_);
    block(zeros.data(), ignored.data(), n, n);
    left -= n;
  }
}

void WaveNetDsp::process(const float* in, float* out, int64_t n) {
  // Channel-major output: a block's rows go to out + channel * n + its offset.
  for (int64_t s = 0; s < n; s += max_block_) block(in + s, out + s, n, std::min(max_block_, n - s));
}

void WaveNetDsp::block(const float* x, float* out, int64_t out_stride, int64_t n) {
  const float* c = x;
  int64_t c_stride = max_block_;  // one row: the stride is never used
  if (condition_dsp_) {
    condition_dsp_->block(x, condition_.data(), max_block_, n);
    c = condition_.data();
  }
  const float* y = x;
  int64_t y_stride = max_block_;
  const float* previous_head = nullptr;
  for (auto& A : arrays_) {
    A->process(y, y_stride, c, c_stride, previous_head, n);
    y = A->z_out.data();
    y_stride = A->S;
    previous_head = A->head.data();
  }
  if (!post_head_) {
    for (int64_t r = 0; r < output_channels_; ++r)
      for (int64_t t = 0; t < n; ++t) out[r * out_stride + t] = head_scale_ * previous_head[r * max_block_ + t];
    return;
  }
  // The head after the arrays: per stage y = conv(f(y)), on head_scale x the last head.
  const float* y_in = previous_head;
  float scale = head_scale_;
  for (PostHead::Stage& st : post_head_->stages) {
    st.in.begin(n);
    for (int64_t r = 0; r < st.conv.in; ++r) {
      float* d = st.in.row(r);
      for (int64_t t = 0; t < n; ++t) d[t] = scale * y_in[r * max_block_ + t];
    }
    post_head_->activation.apply(st.in.base(), st.in.stride(), st.conv.in, n);
    st.conv.run(st.in.base(), st.in.stride(), st.out.data(), max_block_, n, false);
    st.in.end(n);
    y_in = st.out.data();
    scale = 1.0f;
  }
  for (int64_t r = 0; r < output_channels_; ++r)
    for (int64_t t = 0; t < n; ++t) out[r * out_stride + t] = y_in[r * max_block_ + t];
}

}  // namespace wavetrain::experiments::amp
