// NAM's WaveNet for real-time buffers (wavenet_stream.h).
#include "experiments/amp/wavenet_stream.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

// Vectors pass between always-inlined helpers only: the ABI note about 32-byte vectors without AVX
// does not apply (wavenet_kernels.h).
#pragma GCC diagnostic ignored "-Wpsabi"  // GCC and clang
#include "experiments/amp/wavenet_kernels.h"

namespace wavetrain::experiments::amp {
namespace {

constexpr int64_t kMaxChannels = 64;

using kernels::fast_tanh;
using kernels::load;
using kernels::store;
using kernels::Vec4;
using kernels::Vec8;

// The arguments of one layer over one block. Time t = 0 .. n-1 sits at ring position p0 + t.
struct LayerArgs {
  const float *conv, *bias, *mixer, *one, *one_bias;  // conv [tap][in c][out c'], one [in c][out c']
  const float* ring;                                  // the layer's input z, [mask + 1][C]
  int64_t mask, dilation, kernel, channels;
  const float* x;      // the model's input (the condition), [n]
  float* head_sum;     // [n][C], this layer's activation is added in
  float* dst;          // the next layer's ring (dst_mask) or, for the last layer, a [n][C] block
  int64_t dst_mask;
  bool dst_is_ring;
  int64_t p0, n;
};

// The register-blocked kernel: channels C = W x V (W floats a vector, V vectors a row), T time
// steps at once, so that T x V accumulators stay in registers and each weight vector loaded is used
// T times. Per time step: acc = bias + mixer x + sum over taps of W_tap^T z[p - (K-1-tap) d];
// post = tanh(acc); head_sum += post; dst = z[p] + one_bias + One^T post.
template <typename Vec, int W, int V, int T>
__attribute__((always_inline)) inline void layer_tile(const LayerArgs& a, int64_t t0) {
  constexpr int C = W * V;
  Vec acc[T][V];
  alignas(64) float post[T][C];
  for (int i = 0; i < T; ++i)
    for (int v = 0; v < V; ++v)
      acc[i][v] = load<Vec>(a.bias + v * W) + load<Vec>(a.mixer + v * W) * a.x[t0 + i];
  for (int64_t tap = 0; tap < a.kernel; ++tap) {
    const int64_t back = (a.kernel - 1 - tap) * a.dilation;
    const float* z[T];
    for (int i = 0; i < T; ++i) z[i] = a.ring + ((a.p0 + t0 + i - back) & a.mask) * C;
    const float* w = a.conv + tap * C * C;
    for (int c = 0; c < C; ++c) {
      Vec wr[V];
      for (int v = 0; v < V; ++v) wr[v] = load<Vec>(w + c * C + v * W);
      for (int i = 0; i < T; ++i) {
        const float zc = z[i][c];
        for (int v = 0; v < V; ++v) acc[i][v] += wr[v] * zc;
      }
    }
  }
  for (int i = 0; i < T; ++i)
    for (int v = 0; v < V; ++v) store(&post[i][v * W], acc[i][v]);
  for (int i = 0; i < T; ++i) {
    float* h = a.head_sum + (t0 + i) * C;
    for (int c = 0; c < C; ++c) {
      post[i][c] = fast_tanh(post[i][c]);
      h[c] += post[i][c];
    }
  }
  for (int i = 0; i < T; ++i) {
    const float* zt = a.ring + ((a.p0 + t0 + i) & a.mask) * C;
    for (int v = 0; v < V; ++v)
      acc[i][v] = load<Vec>(zt + v * W) + load<Vec>(a.one_bias + v * W);
  }
  for (int c = 0; c < C; ++c) {
    Vec wr[V];
    for (int v = 0; v < V; ++v) wr[v] = load<Vec>(a.one + c * C + v * W);
    for (int i = 0; i < T; ++i)
      for (int v = 0; v < V; ++v) acc[i][v] += wr[v] * post[i][c];
  }
  for (int i = 0; i < T; ++i) {
    float* out = a.dst + (a.dst_is_ring ? ((a.p0 + t0 + i) & a.dst_mask) : t0 + i) * C;
    for (int v = 0; v < V; ++v) store(out + v * W, acc[i][v]);
  }
}

template <typename Vec, int W, int V>
__attribute__((always_inline)) inline void layer_blocked(const LayerArgs& a) {
  constexpr int T = V >= 8 ? 1 : 8 / V;  // about 8 accumulators
  int64_t t = 0;
  for (; t + T <= a.n; t += T) layer_tile<Vec, W, V, T>(a, t);
  for (; t < a.n; ++t) layer_tile<Vec, W, V, 1>(a, t);
}

// Any channel count (the fallback, e.g. 2 or 6 channels): one time step at a time.
__attribute__((always_inline)) inline void layer_any(const LayerArgs& a) {
  const int64_t C = a.channels;
  float acc[kMaxChannels], post[kMaxChannels];
  for (int64_t t = 0; t < a.n; ++t) {
    const int64_t p = a.p0 + t;
    for (int64_t c = 0; c < C; ++c) acc[c] = a.bias[c] + a.mixer[c] * a.x[t];
    for (int64_t tap = 0; tap < a.kernel; ++tap) {
      const float* z = a.ring + ((p - (a.kernel - 1 - tap) * a.dilation) & a.mask) * C;
      const float* w = a.conv + tap * C * C;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t o = 0; o < C; ++o) acc[o] += w[c * C + o] * z[c];
    }
    for (int64_t c = 0; c < C; ++c) {
      post[c] = fast_tanh(acc[c]);
      a.head_sum[t * C + c] += post[c];
    }
    const float* zt = a.ring + (p & a.mask) * C;
    float* out = a.dst + (a.dst_is_ring ? (p & a.dst_mask) : t) * C;
    for (int64_t o = 0; o < C; ++o) acc[o] = zt[o] + a.one_bias[o];
    for (int64_t c = 0; c < C; ++c)
      for (int64_t o = 0; o < C; ++o) acc[o] += a.one[c * C + o] * post[c];
    for (int64_t o = 0; o < C; ++o) out[o] = acc[o];
  }
}

// One layer over a block, compiled for the baseline ISA and for AVX2 + FMA (wavenet_kernels.h).
void layer_block_baseline(const LayerArgs& a) { WAVETRAIN_AMP_CHANNEL_SWITCH(layer_blocked, a, layer_any) }
#if WAVETRAIN_AMP_AVX2
__attribute__((target("avx2,fma"))) void layer_block_avx2(const LayerArgs& a) {
  WAVETRAIN_AMP_CHANNEL_SWITCH(layer_blocked, a, layer_any)
}
#endif

int64_t ring_size(int64_t history, int64_t block) {
  int64_t s = 1;
  while (s < history + block + 1) s <<= 1;
  return s;
}

}  // namespace

std::string WaveNetStream::why_not_streamable(const WaveNetConfig& config) {
  for (size_t i = 0; i < config.layers.size(); ++i) {
    const LayerArrayConfig& a = config.layers[i];
    const std::string array = "layer array " + std::to_string(i);
    if (a.gated) return array + " is gated";
    if (a.activation != "Tanh") return array + " uses " + a.activation + ", not Tanh";
    if (a.channels > kMaxChannels || a.head_size > kMaxChannels)
      return array + " has more than " + std::to_string(kMaxChannels) + " channels";
    if (a.condition_size != 1) return array + " has a condition of " + std::to_string(a.condition_size) + " channels";
  }
  if (config.layers.front().input_size != 1 || config.layers.back().head_size != 1) return "the model is not mono-in, mono-out";
  return "";
}

WaveNetStream::WaveNetStream(const WaveNetImpl& model, int64_t max_block, bool baseline_isa)
    : max_block_(std::max<int64_t>(1, max_block)) {
  avx2_ = !baseline_isa && kernels::cpu_has_avx2_fma();
  const WaveNetConfig& config = model.config();
  if (!can_stream(config)) throw std::invalid_argument("WaveNetStream: only mono-in, mono-out models of ungated Tanh layer arrays with <= 64 channels stream");
  receptive_field_ = model.receptive_field();
  const std::vector<float> w = model.export_weights();
  size_t at = 0;
  auto take = [&](int64_t count) {
    std::vector<float> v(w.begin() + static_cast<std::ptrdiff_t>(at), w.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(count)));
    at += static_cast<size_t>(count);
    return v;
  };
  // Transposes a PyTorch [out][in][k] weight to [k][in][out].
  auto transpose = [](const std::vector<float>& src, int64_t out, int64_t in, int64_t k) {
    std::vector<float> dst(src.size());
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t j = 0; j < k; ++j) dst[static_cast<size_t>((j * in + i) * out + o)] = src[static_cast<size_t>((o * in + i) * k + j)];
    return dst;
  };
  for (const LayerArrayConfig& c : config.layers) {
    Array a;
    a.in_channels = c.input_size;
    a.channels = c.channels;
    a.head_size = c.head_size;
    a.kernel = c.kernel_size;
    const int64_t C = c.channels;
    a.rechannel = transpose(take(C * c.input_size), C, c.input_size, 1);
    for (int64_t d : c.dilations) {
      Layer l;
      l.dilation = d;
      l.conv = transpose(take(C * C * c.kernel_size), C, C, c.kernel_size);
      l.bias = take(C);
      l.mixer = take(C);
      l.one = transpose(take(C * C), C, C, 1);
      l.one_bias = take(C);
      const int64_t size = ring_size((c.kernel_size - 1) * d, max_block_);
      l.ring.assign(static_cast<size_t>(size * C), 0.0f);
      l.mask = size - 1;
      a.layers.push_back(std::move(l));
    }
    a.head = transpose(take(c.head_size * C), c.head_size, C, 1);
    if (c.head_bias) a.head_bias = take(c.head_size);
    a.out_ring.assign(static_cast<size_t>(max_block_ * C), 0.0f);
    arrays_.push_back(std::move(a));
  }
  head_scale_ = w.at(at);
  head_sum_.assign(static_cast<size_t>(max_block_ * kMaxChannels), 0.0f);
  head_out_.assign(static_cast<size_t>(max_block_ * kMaxChannels), 0.0f);
  post_.assign(static_cast<size_t>(max_block_ * kMaxChannels), 0.0f);
  reset();
}

void WaveNetStream::reset() {
  for (Array& a : arrays_)
    for (Layer& l : a.layers) std::fill(l.ring.begin(), l.ring.end(), 0.0f);
  position_ = 0;
  // The state after receptive_field - 1 zeros: exact mode's padding before the audio.
  const std::vector<float> zeros(static_cast<size_t>(receptive_field_ - 1), 0.0f);
  std::vector<float> ignored(zeros.size());
  process(zeros.data(), ignored.data(), static_cast<int64_t>(zeros.size()));
}

void WaveNetStream::process(const float* in, float* out, int64_t n) {
  for (int64_t s = 0; s < n; s += max_block_) block(in + s, out + s, std::min(max_block_, n - s));
}

void WaveNetStream::block(const float* x, float* out, int64_t n) {
  const float* y = x;  // this array's input, [n][in_channels]
  int64_t y_channels = 1;
  const float* previous_head = nullptr;  // the previous array's head output, [n][C]
  for (size_t ai = 0; ai < arrays_.size(); ++ai) {
    Array& a = arrays_[ai];
    const int64_t C = a.channels;
    // Rechannel into the first layer's ring.
    Layer& first = a.layers.front();
    for (int64_t t = 0; t < n; ++t) {
      float* z = first.ring.data() + ((position_ + t) & first.mask) * C;
      for (int64_t o = 0; o < C; ++o) z[o] = 0.0f;
      for (int64_t i = 0; i < y_channels; ++i) {
        const float v = y[t * y_channels + i];
        const float* w = a.rechannel.data() + i * C;
        for (int64_t o = 0; o < C; ++o) z[o] += w[o] * v;
      }
    }
    // The head sum starts from the previous array's head output.
    for (int64_t t = 0; t < n * C; ++t) head_sum_[static_cast<size_t>(t)] = previous_head ? previous_head[t] : 0.0f;
    for (size_t li = 0; li < a.layers.size(); ++li) {
      Layer& l = a.layers[li];
      Layer* next = li + 1 < a.layers.size() ? &a.layers[li + 1] : nullptr;
      LayerArgs args{l.conv.data(), l.bias.data(), l.mixer.data(), l.one.data(), l.one_bias.data(), l.ring.data(),
                     l.mask, l.dilation, a.kernel, C, x, head_sum_.data(),
                     next ? next->ring.data() : a.out_ring.data(), next ? next->mask : 0, next != nullptr, position_, n};
#if WAVETRAIN_AMP_AVX2
      if (avx2_) {
        layer_block_avx2(args);
        continue;
      }
#endif
      layer_block_baseline(args);
    }
    // Head rechannel: [n][C] -> [n][H].
    const int64_t H = a.head_size;
    for (int64_t t = 0; t < n; ++t) {
      float* h = head_out_.data() + t * H;
      for (int64_t o = 0; o < H; ++o) h[o] = a.head_bias.empty() ? 0.0f : a.head_bias[static_cast<size_t>(o)];
      for (int64_t c = 0; c < C; ++c) {
        const float v = head_sum_[static_cast<size_t>(t * C + c)];
        const float* w = a.head.data() + c * H;
        for (int64_t o = 0; o < H; ++o) h[o] += w[o] * v;
      }
    }
    std::copy(head_out_.begin(), head_out_.begin() + n * H, post_.begin());  // becomes the next array's start
    previous_head = post_.data();
    y = a.out_ring.data();
    y_channels = C;
  }
  for (int64_t t = 0; t < n; ++t) out[t] = head_scale_ * post_[static_cast<size_t>(t)];
  position_ += n;
}

}  // namespace wavetrain::experiments::amp
