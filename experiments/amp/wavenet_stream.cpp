// NAM's WaveNet for real-time buffers (wavenet_stream.h).
#include "experiments/amp/wavenet_stream.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "losses/vector_math.h"

// The per-layer loop is compiled for the baseline ISA and for Haswell (AVX2 + FMA), picked at load.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WAVETRAIN_STREAM_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define WAVETRAIN_STREAM_CLONES
#endif

namespace wavetrain::experiments::amp {
namespace {

constexpr int64_t kMaxChannels = 64;

inline float fast_tanh(float x) {  // (1 - e) / (1 + e), e = exp(-2|x|): branch-free, vectorisable
  const float a = x < 0 ? -x : x;
  const float e = losses::detail::exp_nonpositive(-2.0f * a);
  const float t = (1.0f - e) / (1.0f + e);
  return x < 0 ? -t : t;
}

// One layer over a block: t = 0 .. n-1 at ring positions p0 + t. (Making the channel count a
// template parameter, so that the accumulators could stay in registers, measured 2.4x slower here:
// GCC then unrolled the loops fully and stopped vectorising them.)
WAVETRAIN_STREAM_CLONES void layer_block(const float* __restrict__ conv, const float* __restrict__ bias,
                                         const float* __restrict__ mixer, const float* __restrict__ one,
                                         const float* __restrict__ one_bias, const float* ring, int64_t mask,
                                         int64_t dilation, int64_t kernel, int64_t channels, const float* __restrict__ x,
                                         float* __restrict__ head_sum, float* dst, int64_t dst_mask, bool dst_is_ring,
                                         int64_t p0, int64_t n) {
  const int64_t C = channels;
  float acc[kMaxChannels], post[kMaxChannels];
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = p0 + t;
    for (int64_t c = 0; c < C; ++c) acc[c] = bias[c] + mixer[c] * x[t];
    for (int64_t tap = 0; tap < kernel; ++tap) {
      const float* z = ring + ((p - (kernel - 1 - tap) * dilation) & mask) * C;
      const float* w = conv + tap * C * C;
      for (int64_t c = 0; c < C; ++c) {
        const float zc = z[c];
        const float* wr = w + c * C;
        for (int64_t o = 0; o < C; ++o) acc[o] += wr[o] * zc;
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      post[c] = fast_tanh(acc[c]);
      head_sum[t * C + c] += post[c];
    }
    const float* zt = ring + (p & mask) * C;
    float* out = dst + (dst_is_ring ? (p & dst_mask) : t) * C;
    for (int64_t o = 0; o < C; ++o) acc[o] = zt[o] + one_bias[o];
    for (int64_t c = 0; c < C; ++c) {
      const float pc = post[c];
      const float* wr = one + c * C;
      for (int64_t o = 0; o < C; ++o) acc[o] += wr[o] * pc;
    }
    for (int64_t o = 0; o < C; ++o) out[o] = acc[o];
  }
}

int64_t ring_size(int64_t history, int64_t block) {
  int64_t s = 1;
  while (s < history + block + 1) s <<= 1;
  return s;
}

}  // namespace

bool WaveNetStream::can_stream(const WaveNetConfig& config) {
  for (const LayerArrayConfig& a : config.layers)
    if (a.gated || a.activation != "Tanh" || a.channels > kMaxChannels || a.condition_size != 1) return false;
  return true;
}

WaveNetStream::WaveNetStream(const WaveNetImpl& model, int64_t max_block) : max_block_(std::max<int64_t>(1, max_block)) {
  const WaveNetConfig& config = model.config();
  if (!can_stream(config)) throw std::invalid_argument("WaveNetStream: only ungated Tanh layer arrays with <= 64 channels stream");
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
      layer_block(l.conv.data(), l.bias.data(), l.mixer.data(), l.one.data(), l.one_bias.data(), l.ring.data(), l.mask,
                  l.dilation, a.kernel, C, x, head_sum_.data(), next ? next->ring.data() : a.out_ring.data(),
                  next ? next->mask : 0, next != nullptr, position_, n);
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
