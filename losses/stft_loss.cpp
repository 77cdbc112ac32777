// STFT losses; what they compute, and why the gradient is written out by hand: stft_loss.h.
#include "losses/stft_loss.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/frame_fft.h"
#include "losses/loss_common.h"
#include "losses/stft_loss_cpu.h"

namespace wavetrain::losses {
namespace {

using detail::check_pair;
using detail::Fp32Region;
using detail::full_precision;

// Constant tensors of the STFT losses (windows, mel filterbanks), made once per description,
// device and dtype: the losses run every step.
at::Tensor cached_constant(const std::string& what, const at::TensorOptions& options,
                           const std::function<at::Tensor()>& make) {
  static std::mutex mutex;
  static std::map<std::string, at::Tensor> cache;
  const std::string key = what + "|" + options.device().str() + "|" + std::string(options.dtype().name());
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  return cache[key] = make().to(options);
}

// The Hann window is computed in float32 and then converted, as auraloss's is (its window buffer is
// created in the default dtype): a float64 window moves float64 losses ~1e-9 away from auraloss's.
at::Tensor hann_window(int64_t length, const at::TensorOptions& options) {
  return cached_constant("hann " + std::to_string(length), options,
                         [&] { return at::hann_window(length, /*periodic=*/true, at::TensorOptions().dtype(at::kFloat)); });
}

// Slaney's mel scale: linear (3 mel per 200 Hz) up to 1 kHz, logarithmic above.
double hz_to_mel(double hz) {
  const double min_log_hz = 1000.0, min_log_mel = 15.0, log_step = std::log(6.4) / 27.0;
  return hz < min_log_hz ? 3.0 * hz / 200.0 : min_log_mel + std::log(hz / min_log_hz) / log_step;
}
double mel_to_hz(double mel) {
  const double min_log_hz = 1000.0, min_log_mel = 15.0, log_step = std::log(6.4) / 27.0;
  return mel < min_log_mel ? 200.0 * mel / 3.0 : min_log_hz * std::exp(log_step * (mel - min_log_mel));
}

// A mel band that no FFT bin falls inside has all-zero weights: its log-magnitude is log(eps) on
// both sides and its share of the gradient NaN. Refused, with the most bands that fit.
void check_mel_bands(const StftLossOptions& o) {
  auto empty_band = [&](int64_t bands) {
    const at::Tensor fb = mel_filterbank(o.fft_size, bands, o.sample_rate);
    const at::Tensor empty = (fb.sum(1) == 0).nonzero();
    return empty.numel() == 0 ? int64_t{-1} : empty[0][0].item<int64_t>();
  };
  const int64_t first = empty_band(o.mel_bins);
  if (first < 0) return;
  int64_t fit = o.mel_bins - 1;
  while (fit > 0 && empty_band(fit) >= 0) --fit;
  throw std::invalid_argument("stft_loss: " + std::to_string(o.mel_bins) + " mel bands at fft_size " + std::to_string(o.fft_size) + " and " +
                              std::to_string(static_cast<int64_t>(o.sample_rate)) + " Hz leave band " + std::to_string(first) +
                              " empty (no FFT bin inside it); at most " + std::to_string(fit) + " bands fit (or raise fft_size)");
}

at::Tensor cached_filterbank(const StftLossOptions& o, const at::TensorOptions& options) {
  return cached_constant("mel " + std::to_string(o.fft_size) + " " + std::to_string(o.mel_bins) + " " +
                             std::to_string(o.sample_rate),
                         options, [&] {
                           check_mel_bands(o);
                           return mel_filterbank(o.fft_size, o.mel_bins, o.sample_rate);
                         });
}

void check_options(const at::Tensor& pred, const at::Tensor& target, const StftLossOptions& o) {
  check_pair(pred, target, "stft_loss");
  if (o.fft_size < 2 || o.hop_size < 1 || o.win_length < 1)
    throw std::invalid_argument("stft_loss: needs fft_size >= 2, hop_size >= 1 and win_length >= 1, got " +
                                std::to_string(o.fft_size) + ", " + std::to_string(o.hop_size) + ", " +
                                std::to_string(o.win_length));
  if (o.win_length > o.fft_size) throw std::invalid_argument("stft_loss: win_length is larger than fft_size");
  if (o.mel_bins > 0 && !(o.sample_rate > 0)) throw std::invalid_argument("stft_loss: mel_bins needs a positive sample_rate");
  // Reflect padding by fft_size / 2 needs that many samples after the first one.
  if (pred.size(-1) <= o.fft_size / 2)
    throw std::invalid_argument("stft_loss: a signal of " + std::to_string(pred.size(-1)) + " samples is too short for fft_size " +
                                std::to_string(o.fft_size) + " (needs more than fft_size / 2)");
}

// Centred, reflect-padded one-sided STFT of `signals` [items][samples]: complex [items][F][M],
// F = fft_size / 2 + 1 bins, M = 1 + samples / hop_size frames (integer division).
at::Tensor spectrum(const at::Tensor& signals, const StftLossOptions& o) {
  const at::Tensor window = hann_window(o.win_length, signals.options());
  return at::stft(signals, o.fft_size, o.hop_size, o.win_length, window, /*center=*/true, /*pad_mode=*/"reflect",
                  /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
}

at::Tensor magnitude(const at::Tensor& re, const at::Tensor& im, double eps) {
  return (re.square() + im.square()).clamp_min(eps).sqrt();
}

// The weighted magnitude terms, from magnitudes X (prediction) and Y (target), mel-scaled or not.
StftLossTerms magnitude_terms(const at::Tensor& x, const at::Tensor& y, const StftLossOptions& o) {
  StftLossTerms terms;
  at::Tensor loss = at::zeros({}, x.options());
  if (o.w_sc != 0) {
    terms.sc = at::norm(y - x) / at::norm(y);
    loss = loss + o.w_sc * terms.sc;
  }
  if (o.w_log_mag != 0) {
    terms.log_mag = (x.log() - y.log()).abs().mean();
    loss = loss + o.w_log_mag * terms.log_mag;
  }
  if (o.w_lin_mag != 0) {
    terms.lin_mag = (x - y).abs().mean();
    loss = loss + o.w_lin_mag * terms.lin_mag;
  }
  terms.loss = loss;
  return terms;
}

// Runs fn(begin, end) over item ranges, each small enough that its frames (`item_bytes` per item)
// take at most about 4 MB. On the CPU the ranges are spread over the threads: LibTorch's CPU FFT
// (pocketfft) runs one transform call on one thread, and the FFTs are most of this loss. The size
// bound keeps the frame buffers in the allocator's reused memory: tens of MB per call came back
// from the kernel as fresh pages every step (a third more page faults, measured with perf stat).
// Elsewhere (CUDA, MPS) one call over all items is already parallel.
void for_item_chunks(const at::Device& device, int64_t items, int64_t item_bytes,
                     const std::function<void(int64_t, int64_t)>& fn) {
  if (!device.is_cpu()) return fn(0, items);
  const int64_t per_call = std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(1, item_bytes));
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += per_call) fn(b, std::min(end, b + per_call));
  };
  if (at::get_num_threads() == 1 || items == 1) return run(0, items);
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    at::NoGradGuard no_grad;  // thread-local state is not carried into the worker threads
    Fp32Region fp32;
    run(begin, end);
  });
}

// Shape of the centred STFT of a `samples`-long signal (as at::stft with center=true): the signal
// is reflect-padded by N/2 on both sides; frame m covers padded samples [m hop, m hop + N), and the
// window (win_length long) sits in the middle of the frame, starting at `left` = (N - win) / 2.
struct FrameLayout {
  int64_t n, hop, win, pad, left, frames, bins;
  FrameLayout(const StftLossOptions& o, int64_t samples)
      : n(o.fft_size), hop(o.hop_size), win(o.win_length), pad(n / 2), left((n - win) / 2),
        frames(1 + (samples + 2 * pad - n) / hop), bins(n / 2 + 1) {}
};

// The window at::stft applies to each N-sample frame: the Hann window of win_length samples,
// centred (from `left` on), zero elsewhere.
at::Tensor frame_window(const FrameLayout& f, const at::TensorOptions& options) {
  return cached_constant("frame window " + std::to_string(f.n) + " " + std::to_string(f.win), options, [&] {
    at::Tensor w = at::zeros({f.n}, at::kFloat);
    w.narrow(0, f.left, f.win).copy_(at::hann_window(f.win, /*periodic=*/true, at::TensorOptions().dtype(at::kFloat)));
    return w;
  });
}

// The one-sided spectra of `signals` [items][samples], complex [items][frames][bins], frame-major.
// With LibTorch's FFT, the frames and the transform are those of at::stft (same products, same FFT
// call per frame), so the spectra equal at::stft's bit for bit, and the float32 gradient equals
// auraloss's to 1e-5. That needs the same spectra: the gradient of the log-magnitude term is badly
// conditioned where a bin is near zero (a 1e-7 change of the input moves the float64 gradient by
// ~3e-4 relative; auraloss's own float32 gradient is 1e-4 to 8e-4 from its float64 one).
//
// float32 on the CPU takes data::FrameFft instead where its AVX2 build runs (frame_fft_path), 8
// frames of an item at once: 1.4-1.9x pocketfft and 0.95-1.13x MKL on these sizes (docs/data.md), the
// frames read in place from the padded signal and windowed as they load. Its spectra round
// differently from at::stft's, so its float32 gradient is not auraloss's float32 gradient; it is
// as far from the float64 one as that is (tests/stft_loss_test.cpp, EightFrameFft...).
bool frame_fft_path(const at::Tensor& t, const FrameLayout& f) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && data::frame_fft_vectorised() &&
         data::FrameFft<float>::supports(f.n);
}

// signal [samples] reflect-padded by `pad` on both sides into out [samples + 2 pad] (as
// at::reflection_pad1d: out[j] = signal[pad - j] for j < pad, the mirror at the end likewise).
void reflect_pad(const float* signal, int64_t samples, int64_t pad, float* out) {
  for (int64_t j = 0; j < pad; ++j) out[j] = signal[pad - j];
  std::copy(signal, signal + samples, out + pad);
  for (int64_t j = 0; j < pad; ++j) out[pad + samples + j] = signal[samples - 2 - j];
}

void frame_spectra_by_8(const at::Tensor& signals, const FrameLayout& f, const at::Tensor& spectra) {
  const int64_t items = signals.size(0), samples = signals.size(1), L = data::kFrameFftLanes;
  const at::Tensor window = frame_window(f, signals.options());
  const float* w = window.data_ptr<float>();
  const float* in = signals.data_ptr<float>();
  float* out = reinterpret_cast<float*>(spectra.data_ptr());  // [items][frames][bins][re, im]
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    data::FrameFft<float> fft(f.n);
    std::vector<float> padded(static_cast<size_t>(samples + 2 * f.pad)), re(static_cast<size_t>(f.bins * L)), im(re.size());
    const float* rows[data::kFrameFftLanes];
    for (int64_t item = begin; item < end; ++item) {
      reflect_pad(in + item * samples, samples, f.pad, padded.data());
      for (int64_t first = 0; first < f.frames; first += L) {
        const int64_t lanes = std::min(L, f.frames - first);
        for (int64_t l = 0; l < L; ++l) rows[l] = padded.data() + (first + std::min(l, lanes - 1)) * f.hop;
        fft.spectrum(rows, w, re.data(), im.data());
        for (int64_t l = 0; l < lanes; ++l) {
          float* o = out + 2 * (item * f.frames + first + l) * f.bins;
          for (int64_t k = 0; k < f.bins; ++k) {
            o[2 * k] = re[static_cast<size_t>(k * L + l)];
            o[2 * k + 1] = im[static_cast<size_t>(k * L + l)];
          }
        }
      }
    }
  });
}

at::Tensor frame_spectra(const at::Tensor& signals, const FrameLayout& f) {
  const int64_t items = signals.size(0);
  const at::Tensor window = frame_window(f, signals.options());
  const at::Tensor spectra = at::empty({items, f.frames, f.bins}, signals.options().dtype(c10::toComplexType(signals.scalar_type())));
  if (frame_fft_path(signals, f)) {
    frame_spectra_by_8(signals.contiguous(), f, spectra);
    return spectra;
  }
  const int64_t item_bytes = f.frames * f.n * signals.element_size();
  for_item_chunks(signals.device(), items, item_bytes, [&](int64_t begin, int64_t end) {
    const at::Tensor padded = at::reflection_pad1d(signals.narrow(0, begin, end - begin), {f.pad, f.pad});
    const at::Tensor frames = padded.unfold(1, f.n, f.hop) * window;  // [count][frames][N]
    at::Tensor out = spectra.narrow(0, begin, end - begin);
    at::fft_rfft_out(out, frames, f.n, 2);
  });
  return spectra;
}

// sqrt(clamp(re^2 + im^2, eps)) in auraloss's order of operations. (at::abs of the complex values
// followed by a clamp at sqrt(eps) is equal up to the last bit, but measured slower on the CPU.)
at::Tensor clamped_magnitude(const at::Tensor& spectra, double eps) {
  const at::Tensor ri = at::view_as_real(spectra);
  return (ri.select(-1, 0).square() + ri.select(-1, 1).square()).clamp_min_(eps).sqrt_();
}

// The gradient w.r.t. the signals of sum(Re(conj(spectra) * g)) for spectra = frame_spectra(...),
// given z [items][frames][bins] (complex) = g with its inner bins (all but 0 and N/2) halved.
//
// Frame sample k enters bin f as w[k] e^{-2 pi i f k / N}, so its gradient is
// w[k] sum_f Re(g[f] e^{2 pi i f k / N}) over the one-sided bins. irfft with norm "forward"
// computes z[0] + z[N/2] (-1)^k + 2 sum_{0<f<N/2} Re(z[f] e^{...}) (it ignores the imaginary parts
// of the two edge bins, which have no effect on a real signal either): with the inner bins halved
// that is the sum. The frames are then overlap-added, and the reflect padding folded back onto the
// samples it copied.
//
// signal_gradient_by_8 is the same by data::FrameFft's inverse, 8 frames at once (frame_fft_path).
void signal_gradient_by_8(const at::Tensor& z, const FrameLayout& f, const at::Tensor& window, const at::Tensor& out) {
  const int64_t items = z.size(0), samples = out.size(1), L = data::kFrameFftLanes;
  const float* zp = reinterpret_cast<const float*>(z.data_ptr());  // [items][frames][bins][re, im]
  const float* w = window.data_ptr<float>();
  float* g = out.data_ptr<float>();
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    data::FrameFft<float> fft(f.n);
    // Lanes past an item's last frame keep the previous group's values: each lane is its own
    // transform, and those lanes' outputs are not used.
    std::vector<float> re(static_cast<size_t>(f.bins * L)), im(re.size()), frames(static_cast<size_t>(f.n * L));
    std::vector<float> padded(static_cast<size_t>(samples + 2 * f.pad));
    for (int64_t item = begin; item < end; ++item) {
      std::fill(padded.begin(), padded.end(), 0.0f);
      for (int64_t first = 0; first < f.frames; first += L) {
        const int64_t lanes = std::min(L, f.frames - first);
        for (int64_t l = 0; l < lanes; ++l) {
          const float* zi = zp + 2 * (item * f.frames + first + l) * f.bins;
          for (int64_t k = 0; k < f.bins; ++k) {
            re[static_cast<size_t>(k * L + l)] = zi[2 * k];
            im[static_cast<size_t>(k * L + l)] = zi[2 * k + 1];
          }
        }
        fft.inverse(re.data(), im.data(), frames.data());
        for (int64_t l = 0; l < lanes; ++l) {  // overlap-add of the windowed part
          float* a = padded.data() + (first + l) * f.hop + f.left;
          const float* x = frames.data() + f.left * L + l;
          for (int64_t j = 0; j < f.win; ++j) a[j] += w[j] * x[j * L];
        }
      }
      // The padding folded back: padded[j] = signal[pad - j] for j < pad, and
      // padded[pad + samples + j] = signal[samples - 2 - j].
      float* gi = g + item * samples;
      std::copy(padded.begin() + f.pad, padded.begin() + f.pad + samples, gi);
      for (int64_t j = 0; j < f.pad; ++j) gi[1 + j] += padded[static_cast<size_t>(f.pad - 1 - j)];
      for (int64_t j = 0; j < f.pad; ++j)
        gi[samples - 1 - f.pad + j] += padded[static_cast<size_t>(2 * f.pad + samples - 1 - j)];
    }
  });
}

at::Tensor signal_gradient(const at::Tensor& z, const FrameLayout& f, int64_t samples) {
  const int64_t items = z.size(0);
  const at::Tensor window = hann_window(f.win, at::real(z).options());
  const at::Tensor out = at::empty({items, samples}, window.options());
  if (frame_fft_path(out, f)) {
    signal_gradient_by_8(z.contiguous(), f, window, out);
    return out;
  }
  // Overlap-add in blocks of `hop` samples: block j of frame m lands in output block m + j.
  const int64_t blocks = (f.win + f.hop - 1) / f.hop;
  const int64_t length = std::max(f.left + (f.frames + blocks) * f.hop, samples + 2 * f.pad);
  const int64_t item_bytes = f.frames * f.n * window.element_size();
  for_item_chunks(z.device(), items, item_bytes, [&](int64_t begin, int64_t end) {
    const int64_t count = end - begin;
    const at::Tensor frames = at::fft_irfft(z.narrow(0, begin, count), f.n, 2, "forward");  // [count][frames][N]
    const at::Tensor padded = at::zeros({count, length}, frames.options());
    const at::Tensor ola = padded.narrow(1, f.left, (f.frames + blocks) * f.hop).view({count, f.frames + blocks, f.hop});
    for (int64_t j = 0; j < blocks; ++j) {
      const int64_t k0 = j * f.hop, len = std::min(f.hop, f.win - k0);
      ola.narrow(1, j, f.frames).narrow(2, 0, len).addcmul_(frames.narrow(2, f.left + k0, len), window.narrow(0, k0, len));
    }
    // padded[j] = signal[pad - j] for j < pad; padded[pad + samples + j] = signal[samples - 2 - j].
    const at::Tensor g = out.narrow(0, begin, count);
    g.copy_(padded.narrow(1, f.pad, samples));
    g.narrow(1, 1, f.pad).add_(padded.narrow(1, 0, f.pad).flip({1}));
    g.narrow(1, samples - 1 - f.pad, f.pad).add_(padded.narrow(1, f.pad + samples, f.pad).flip({1}));
  });
  return out;
}

// The magnitude terms with the gradient w.r.t. the prediction written out (see stft_loss.h).
// Outputs: loss, sc, log_mag, lin_mag; a term whose weight is 0 comes out as 0 and is ignored by
// backward. The prediction and target are [items][samples] in fp32 or fp64.
struct StftMagnitudeLoss : public torch::autograd::Function<StftMagnitudeLoss> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& pred,
                                                const at::Tensor& target, const StftLossOptions& o) {
    const int64_t items = pred.size(0), samples = pred.size(1);
    const FrameLayout layout(o, samples);
    const at::Tensor spectra = frame_spectra(at::cat({pred.detach(), target.detach()}, 0), layout);  // both in one batch
    const at::Tensor zero = at::zeros({}, spectra.options().dtype(c10::toRealValueType(spectra.scalar_type())));
    const double count = static_cast<double>(items * layout.frames * (o.mel_bins > 0 ? o.mel_bins : layout.bins));
    at::Tensor mag_x, x, y, norm_diff = zero, norm_y = zero, diff = zero, log_ratio = zero;
    at::Tensor loss = zero, sc = zero, log_mag = zero, lin_mag = zero;
    if (spectra.device().is_cpu() && o.mel_bins == 0) {
      const detail::MagnitudeSums sums = detail::magnitudes_cpu(spectra, items, o.eps, x, y);
      mag_x = x;
      norm_diff = at::scalar_tensor(std::sqrt(sums.sq_diff), zero.options());
      norm_y = at::scalar_tensor(std::sqrt(sums.sq_target), zero.options());
      lin_mag = at::scalar_tensor(sums.abs_diff / count, zero.options());
    } else {
      // Magnitudes of prediction and target by separate calls of the same shape: a vectorised loop
      // and its scalar tail round differently, and equal signals must give exactly equal magnitudes.
      mag_x = clamped_magnitude(spectra.narrow(0, 0, items), o.eps);
      x = mag_x;
      y = clamped_magnitude(spectra.narrow(0, items, items), o.eps);
      if (o.mel_bins > 0) {  // [items][frames][bins] x [bins][mels]
        const at::Tensor fb_t = cached_filterbank(o, x.options()).t();
        x = at::matmul(x, fb_t);
        y = at::matmul(y, fb_t);
      }
      diff = x - y;
      norm_diff = at::norm(diff);
      norm_y = at::norm(y);
      if (o.w_lin_mag != 0) lin_mag = diff.abs().mean();
    }
    if (o.w_sc != 0) {
      sc = norm_diff / norm_y;
      loss = loss + o.w_sc * sc;
    }
    if (o.w_log_mag != 0) {
      log_ratio = (x / y).log_();  // log X - log Y
      log_mag = log_ratio.abs().mean();
      loss = loss + o.w_log_mag * log_mag;
    }
    if (o.w_lin_mag != 0) loss = loss + o.w_lin_mag * lin_mag;
    ctx->save_for_backward({spectra.narrow(0, 0, items), mag_x, x, y, diff, log_ratio, norm_diff, norm_y});
    ctx->saved_data["samples"] = samples;
    ctx->saved_data["fft_size"] = o.fft_size;
    ctx->saved_data["hop_size"] = o.hop_size;
    ctx->saved_data["win_length"] = o.win_length;
    ctx->saved_data["mel_bins"] = o.mel_bins;
    ctx->saved_data["sample_rate"] = o.sample_rate;
    ctx->saved_data["eps"] = o.eps;
    ctx->saved_data["w_sc"] = o.w_sc;
    ctx->saved_data["w_log_mag"] = o.w_log_mag;
    ctx->saved_data["w_lin_mag"] = o.w_lin_mag;
    return {loss, sc, log_mag, lin_mag};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &spectra = saved[0], &mag_x = saved[1], &x = saved[2], &y = saved[3], &diff = saved[4],
                     &log_ratio = saved[5], &norm_diff = saved[6], &norm_y = saved[7];
    StftLossOptions o;
    o.fft_size = ctx->saved_data["fft_size"].toInt();
    o.hop_size = ctx->saved_data["hop_size"].toInt();
    o.win_length = ctx->saved_data["win_length"].toInt();
    o.mel_bins = ctx->saved_data["mel_bins"].toInt();
    o.sample_rate = ctx->saved_data["sample_rate"].toDouble();
    o.eps = ctx->saved_data["eps"].toDouble();
    o.w_sc = ctx->saved_data["w_sc"].toDouble();
    o.w_log_mag = ctx->saved_data["w_log_mag"].toDouble();
    o.w_lin_mag = ctx->saved_data["w_lin_mag"].toDouble();
    const int64_t samples = ctx->saved_data["samples"].toInt();

    // d loss / d X, X the (mel-scaled) prediction magnitudes. Each term's upstream gradient is
    // that of the total times the weight, plus that of the term itself when a caller used it.
    auto upstream = [&](size_t term, double weight) {
      const at::Tensor& g = grads[term];
      return g.defined() ? grads[0] * weight + g : grads[0] * weight;
    };
    const double count = static_cast<double>(x.numel());
    const double floor = at::scalar_tensor(o.eps, at::TensorOptions().dtype(mag_x.scalar_type())).sqrt().item<double>();
    const FrameLayout layout(o, samples);
    at::Tensor inv;  // 1 / (|X - Y| |Y|), and 0 when X == Y (as torch's norm: no gradient at 0); NaN stays NaN
    if (o.w_sc != 0) inv = at::where(norm_diff == 0, at::zeros_like(norm_diff), (norm_diff * norm_y).reciprocal());
    // A NaN or infinity in the prediction makes the loss non-finite: then every sample's gradient is
    // NaN too (1 here, NaN then: no device sync), so the trainer's non-finite policy sees it, rather
    // than a gradient that silently lacks a term in most places.
    const at::Tensor poison = norm_diff * 0 + 1;
    if (spectra.device().is_cpu() && o.mel_bins == 0) {
      detail::BinGradient k;
      k.sc = o.w_sc != 0 ? (upstream(1, o.w_sc) * inv).item<double>() : 0.0;
      k.log_mag = o.w_log_mag != 0 ? (upstream(2, o.w_log_mag) / count).item<double>() : 0.0;
      k.lin_mag = o.w_lin_mag != 0 ? (upstream(3, o.w_lin_mag) / count).item<double>() : 0.0;
      k.floor = floor;
      return {signal_gradient(bin_gradient_cpu(spectra, x, y, k, layout.n), layout, samples).mul_(poison), at::Tensor(), at::Tensor()};
    }

    // d loss / d X, X the (mel-scaled) prediction magnitudes.
    at::Tensor g_x = at::zeros_like(x);
    if (o.w_sc != 0) g_x.add_(diff * (upstream(1, o.w_sc) * inv));  // d/dX |X - Y| / |Y| = (X - Y) inv
    if (o.w_log_mag != 0)  // mean |log X - log Y|: sign(log X - log Y) / (count X)
      g_x.add_(at::sgn(log_ratio).div_(x).mul_(upstream(2, o.w_log_mag) / count));
    if (o.w_lin_mag != 0) g_x.add_(at::sgn(diff).mul_(upstream(3, o.w_lin_mag) / count));
    at::Tensor g_mag = o.mel_bins > 0 ? at::matmul(g_x, cached_filterbank(o, x.options())) : g_x;

    // Through mag = sqrt(clamp(re^2 + im^2, eps)): d mag / d (re, im) = (re, im) / mag where the
    // power is above eps, 0 where the clamp holds (mag is then exactly sqrt(eps) rounded).
    g_mag = g_mag.div(mag_x).masked_fill_(mag_x <= floor, 0.0);
    const at::Tensor grad = at::view_as_real(spectra) * g_mag.unsqueeze(-1);
    grad.narrow(2, 1, layout.n % 2 == 0 ? layout.bins - 2 : layout.bins - 1).mul_(0.5);
    return {signal_gradient(at::view_as_complex(grad), layout, samples).mul_(poison), at::Tensor(), at::Tensor()};
  }
};

// atan2(imag, real), with phase 0 and gradient 0 at a bin of exactly zero magnitude (as
// torch.angle, which auraloss uses): atan2's gradient there is 0/0 = NaN, and digital silence in a
// prediction would poison the whole gradient while the loss stays finite.
at::Tensor phase_of(const at::Tensor& spectrum) {
  const at::Tensor re = at::real(spectrum), im = at::imag(spectrum);
  const at::Tensor zero = (re == 0) & (im == 0);
  return at::atan2(at::where(zero, at::zeros_like(im), im), at::where(zero, at::ones_like(re), re));
}

}  // namespace

StftLossTerms stft_loss_autograd(const at::Tensor& pred, const at::Tensor& target, const StftLossOptions& o) {
  check_options(pred, target, o);
  Fp32Region fp32;
  const at::Tensor p = full_precision(pred), t = full_precision(target);
  const int64_t samples = p.size(-1);
  // Separate STFTs: one of both concatenated would make autograd differentiate the target too.
  const at::Tensor xs = spectrum(p.reshape({-1, samples}), o), ys = spectrum(t.reshape({-1, samples}), o);
  at::Tensor x = magnitude(at::real(xs), at::imag(xs), o.eps), y = magnitude(at::real(ys), at::imag(ys), o.eps);
  if (o.mel_bins > 0) {
    const at::Tensor fb = cached_filterbank(o, x.options());
    x = at::matmul(fb, x);
    y = at::matmul(fb, y);
  }
  StftLossTerms terms = magnitude_terms(x, y, o);
  if (o.w_phs != 0) {  // only here: the phase needs atan2 (never `angle`, which some backends lack)
    terms.phase = (phase_of(xs) - phase_of(ys)).square().mean();
    terms.loss = terms.loss + o.w_phs * terms.phase;
  }
  return terms;
}

StftLossTerms stft_loss(const at::Tensor& pred, const at::Tensor& target, const StftLossOptions& o) {
  check_options(pred, target, o);
  // The phase term and a target that needs a gradient take the autograd path.
  if (o.w_phs != 0 || (target.requires_grad() && at::GradMode::is_enabled())) return stft_loss_autograd(pred, target, o);
  Fp32Region fp32;
  const at::Tensor p = full_precision(pred), t = full_precision(target).to(p.scalar_type());
  const int64_t samples = p.size(-1);
  const torch::autograd::variable_list out =
      StftMagnitudeLoss::apply(p.reshape({-1, samples}), t.reshape({-1, samples}), o);
  StftLossTerms terms;
  terms.loss = out[0];
  if (o.w_sc != 0) terms.sc = out[1];
  if (o.w_log_mag != 0) terms.log_mag = out[2];
  if (o.w_lin_mag != 0) terms.lin_mag = out[3];
  return terms;
}

at::Tensor mel_filterbank(int64_t fft_size, int64_t n_mels, double sample_rate, double f_min, double f_max) {
  if (fft_size < 2 || n_mels < 1 || !(sample_rate > 0))
    throw std::invalid_argument("mel_filterbank: needs fft_size >= 2, n_mels >= 1 and a positive sample_rate");
  if (f_max <= 0) f_max = sample_rate / 2.0;
  const int64_t n_freqs = fft_size / 2 + 1;
  std::vector<double> mel_hz(static_cast<size_t>(n_mels + 2));
  const double lo = hz_to_mel(f_min), hi = hz_to_mel(f_max);
  for (int64_t i = 0; i < n_mels + 2; ++i)
    mel_hz[static_cast<size_t>(i)] = mel_to_hz(lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(n_mels + 1));
  at::Tensor fb = at::zeros({n_mels, n_freqs}, at::kDouble);
  double* w = fb.data_ptr<double>();
  for (int64_t m = 0; m < n_mels; ++m) {
    const double left = mel_hz[static_cast<size_t>(m)], centre = mel_hz[static_cast<size_t>(m + 1)],
                 right = mel_hz[static_cast<size_t>(m + 2)];
    const double area = 2.0 / (right - left);  // Slaney normalisation: every filter has unit area
    for (int64_t k = 0; k < n_freqs; ++k) {
      // Bin k's frequency as numpy's rfftfreq gives it (current librosa, which auraloss calls):
      // k sr / n. (Older librosa spread sr / 2 over the bins, which differs for odd sizes.)
      const double f = sample_rate * static_cast<double>(k) / static_cast<double>(fft_size);
      const double rise = (f - left) / (centre - left), fall = (right - f) / (right - centre);
      w[m * n_freqs + k] = std::max(0.0, std::min(rise, fall)) * area;
    }
  }
  return fb;
}

MultiResolutionStftLoss::MultiResolutionStftLoss()
    : MultiResolutionStftLoss({{1024, 120, 600}, {2048, 240, 1200}, {512, 50, 240}}) {}

MultiResolutionStftLoss::MultiResolutionStftLoss(std::vector<StftLossOptions> resolutions)
    : resolutions_(std::move(resolutions)) {
  if (resolutions_.empty()) throw std::invalid_argument("MultiResolutionStftLoss: no resolution given");
}

int64_t MultiResolutionStftLoss::largest_fft_size() const {
  int64_t most = 0;
  for (const StftLossOptions& o : resolutions_) most = std::max<int64_t>(most, o.fft_size);
  return most;
}

std::vector<StftLossTerms> MultiResolutionStftLoss::terms(const at::Tensor& pred, const at::Tensor& target) const {
  std::vector<StftLossTerms> out;
  for (const StftLossOptions& r : resolutions_) out.push_back(stft_loss(pred, target, r));
  return out;
}

at::Tensor MultiResolutionStftLoss::operator()(const at::Tensor& pred, const at::Tensor& target) const {
  at::Tensor sum;
  for (const StftLossTerms& t : terms(pred, target)) sum = sum.defined() ? sum + t.loss : t.loss;
  return sum / static_cast<double>(resolutions_.size());
}

}  // namespace wavetrain::losses
