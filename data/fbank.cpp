// Kaldi-compatible fbank, SpecAugment and global CMVN (fbank.h).
#include "data/fbank.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace wavetrain::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
// torchaudio floors energies and mel energies at float32's epsilon before the log.
constexpr double kEpsilon = 1.1920928955078125e-07;

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("fbank: " + what); }

double mel_scale(double hz) { return 1127.0 * std::log(1.0 + hz / 700.0); }

// The mel scale and its inverse on float32 tensors, as torchaudio computes them (the warped banks
// round as its do).
at::Tensor mel_of(const at::Tensor& hz) { return 1127.0 * (1.0 + hz / 700.0).log(); }
at::Tensor hz_of_mel(const at::Tensor& mel) { return 700.0 * ((mel / 1127.0).exp() - 1.0); }

// Kaldi's VTLN warp of frequencies f (Hz) for the band [low, high] (validate() checked the rest):
// F(f) = f / factor between the inflection points l = vtln_low max(1, factor) and
// h = vtln_high min(1, factor), straight lines from (low, low) to (l, F(l)) and from (h, F(h)) to
// (high, high), and F(f) = f outside the band. Continuous and increasing, so triangles keep their
// corners in order.
at::Tensor vtln_warp_hz(const at::Tensor& f, double low, double high, double vtln_low, double vtln_high, double factor) {
  const double l = vtln_low * std::max(1.0, factor), h = vtln_high * std::min(1.0, factor);
  const double scale = 1.0 / factor;
  const double scale_left = (scale * l - low) / (l - low), scale_right = (high - scale * h) / (high - h);
  at::Tensor out = at::where(f < h, scale * f, high + scale_right * (f - high));
  out = at::where(f < l, low + scale_left * (f - low), out);
  return at::where((f < low) | (f > high), f, out);
}

int64_t next_power_of_two(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// The mel triangles as (first bin, weights) per mel bin, for a sparse product with a spectrum.
struct SparseBanks {
  std::vector<int64_t> first;
  std::vector<std::vector<float>> weights;
};

SparseBanks sparse_banks(const at::Tensor& dense) {
  SparseBanks s;
  const int64_t bins = dense.size(0), width = dense.size(1);
  const double* w = dense.data_ptr<double>();
  for (int64_t b = 0; b < bins; ++b) {
    int64_t lo = 0, hi = width;
    while (lo < width && w[b * width + lo] == 0.0) ++lo;
    while (hi > lo && w[b * width + hi - 1] == 0.0) --hi;
    s.first.push_back(lo);
    s.weights.emplace_back();
    for (int64_t k = lo; k < hi; ++k) s.weights.back().push_back(static_cast<float>(w[b * width + k]));
  }
  return s;
}

// One frame up to the FFT, in float32 and in torchaudio's order of operations: the float32
// reference values carry rounding from the cancellation in pre-emphasis and DC removal (a float64
// computation is up to 2.2e-4 away from them in the low mel bins), so matching them to 1e-4 means
// rounding the same way. `x` holds the frame (samples plus dither) on entry; `mean` is its mean as
// at::mean computes it (the one reduction whose order matters). Returns the log energy (raw, or
// after the window). `stages` records the intermediate values (tests compare them).
double prepare_frame(float* x, float mean, const FbankOptions& o, const float* window, FbankFrameStages* stages) {
  const int64_t size = o.window_size();
  if (stages) stages->raw.assign(x, x + size);
  if (o.remove_dc_offset)
    for (int64_t j = 0; j < size; ++j) x[j] = x[j] - mean;
  if (stages) stages->after_dc.assign(x, x + size);
  auto energy_of = [&] {
    // Four independent sums: one chain of dependent double additions took a third of the time.
    double lanes[4] = {0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 4 <= size; j += 4)
      for (int l = 0; l < 4; ++l) lanes[l] += static_cast<double>(x[j + l]) * x[j + l];
    for (; j < size; ++j) lanes[0] += static_cast<double>(x[j]) * x[j];
    const double e = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    double l = std::log(std::max(e, kEpsilon));
    if (o.energy_floor != 0.0) l = std::max(l, std::log(o.energy_floor));
    return l;
  };
  // The energy only where it is a feature (or a test looks at it).
  const bool want_energy = o.use_energy || stages;
  double energy = want_energy && o.raw_energy ? energy_of() : 0.0;
  if (stages) stages->raw_log_energy = energy_of();
  if (o.preemphasis_coefficient != 0.0) {  // x[j] -= c x[j-1], and x[0] -= c x[0], from the old values
    const float c = static_cast<float>(o.preemphasis_coefficient);
    for (int64_t j = size - 1; j > 0; --j) {
      const float scaled = c * x[j - 1];
      x[j] = x[j] - scaled;
    }
    const float scaled = c * x[0];
    x[0] = x[0] - scaled;
  }
  if (stages) stages->after_preemphasis.assign(x, x + size);
  for (int64_t j = 0; j < size; ++j) x[j] = x[j] * window[j];
  if (want_energy && !o.raw_energy) energy = energy_of();
  if (stages) stages->windowed.assign(x, x + size);
  return energy;
}

}  // namespace

FbankOptions FbankOptions::kaldi() {
  FbankOptions o;
  o.dither = 1.0;
  o.energy_floor = 0.0;
  return o;
}

int64_t FbankOptions::window_size() const { return static_cast<int64_t>(sample_frequency * frame_length * 0.001); }
int64_t FbankOptions::window_shift() const { return static_cast<int64_t>(sample_frequency * frame_shift * 0.001); }
int64_t FbankOptions::padded_window_size() const {
  return round_to_power_of_two ? next_power_of_two(window_size()) : window_size();
}

int64_t FbankOptions::num_frames(int64_t n) const {
  const int64_t size = window_size(), shift = window_shift();
  if (snip_edges) return n < size ? 0 : 1 + (n - size) / shift;
  return (n + shift / 2) / shift;
}

void FbankOptions::validate() const {
  if (!(sample_frequency > 0)) bad("sample_frequency must be > 0, got " + std::to_string(sample_frequency));
  if (window_size() < 2)
    bad("frame_length " + std::to_string(frame_length) + " ms is under 2 samples at " + std::to_string(sample_frequency) + " Hz");
  if (window_shift() < 1) bad("frame_shift " + std::to_string(frame_shift) + " ms is under 1 sample");
  if (padded_window_size() % 2 != 0)
    bad("the padded window (" + std::to_string(padded_window_size()) +
        " samples) must be even; use round_to_power_of_two or an even frame_length in samples");
  if (!(preemphasis_coefficient >= 0.0 && preemphasis_coefficient <= 1.0))
    bad("preemphasis_coefficient must be in [0, 1], got " + std::to_string(preemphasis_coefficient));
  if (num_mel_bins <= 3) bad("num_mel_bins must be > 3, got " + std::to_string(num_mel_bins));
  const double nyquist = 0.5 * sample_frequency, high = high_freq <= 0 ? high_freq + nyquist : high_freq;
  if (!(low_freq >= 0.0 && low_freq < nyquist && high > 0.0 && high <= nyquist && low_freq < high))
    bad("needs 0 <= low_freq < high_freq <= Nyquist (" + std::to_string(nyquist) + " Hz); got low_freq " +
        std::to_string(low_freq) + ", high_freq " + std::to_string(high_freq) + " (" + std::to_string(high) + " Hz)");
  if (energy_floor < 0.0) bad("energy_floor must be >= 0, got " + std::to_string(energy_floor));
  if (!(vtln_warp > 0.0 && std::isfinite(vtln_warp))) bad("vtln_warp must be a positive factor, got " + std::to_string(vtln_warp));
  if (vtln_warp != 1.0) {
    // Kaldi's conditions: both inflection points inside the band, whatever the factor.
    const double vh = vtln_high < 0.0 ? vtln_high + nyquist : vtln_high;
    const double l = vtln_low * std::max(1.0, vtln_warp), h = vh * std::min(1.0, vtln_warp);
    if (!(low_freq < vtln_low && vtln_low < high && 0.0 < vh && vh < high && vtln_low < vh && l > low_freq && h < high && l < h))
      bad("needs low_freq < vtln_low < vtln_high < high_freq (the warp's inflection points inside the band); got vtln_low " +
          std::to_string(vtln_low) + ", vtln_high " + std::to_string(vtln_high) + " (" + std::to_string(vh) + " Hz), low_freq " +
          std::to_string(low_freq) + ", high_freq " + std::to_string(high) + " Hz, vtln_warp " + std::to_string(vtln_warp));
  }
  static const char* kWindows[] = {"povey", "hanning", "hamming", "rectangular", "blackman"};
  if (std::find(std::begin(kWindows), std::end(kWindows), window_type) == std::end(kWindows))
    bad("window_type '" + window_type + "' is not one of povey, hanning, hamming, rectangular, blackman");
}

at::Tensor kaldi_window(const FbankOptions& o) {
  // torchaudio's window functions, with the same tensor ops in float32 (bit-identical windows).
  const int64_t n = o.window_size();
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor w;
  if (o.window_type == "hanning") w = at::hann_window(n, /*periodic=*/false, f32);
  else if (o.window_type == "povey") w = at::hann_window(n, false, f32).pow(0.85);  // Hann, zero at both ends
  else if (o.window_type == "hamming") w = at::hamming_window(n, false, 0.54, 0.46, f32);
  else if (o.window_type == "rectangular") w = at::ones({n}, f32);
  else {
    const double a = 2 * kPi / static_cast<double>(n - 1);
    const at::Tensor i = at::arange(n, f32);
    w = o.blackman_coeff - 0.5 * at::cos(a * i) + (0.5 - o.blackman_coeff) * at::cos(2 * a * i);
  }
  return w.to(at::kDouble);
}

std::pair<at::Tensor, at::Tensor> kaldi_mel_banks(const FbankOptions& o) {
  o.validate();
  const int64_t padded = o.padded_window_size(), fft_bins = padded / 2, bins = o.num_mel_bins;
  const double nyquist = 0.5 * o.sample_frequency;
  const double high = o.high_freq <= 0 ? o.high_freq + nyquist : o.high_freq;
  const double width = o.sample_frequency / static_cast<double>(padded);
  const double mel_low = mel_scale(o.low_freq), mel_high = mel_scale(high);
  // num_bins + 1 steps: the outer triangles reach past the first and last centres.
  const double delta = (mel_high - mel_low) / static_cast<double>(bins + 1);
  // The triangles are evaluated with the tensor ops torchaudio uses, in float32: its weights carry
  // float32 rounding (up to 1e-5, one ulp of a mel value divided by the triangle's width), which
  // moved a log-mel value by up to 2e-4 where a strong partial sits on a narrow low-frequency
  // triangle; the same ops (and LibTorch's vectorised log) give the same weights bit for bit.
  const at::Tensor bin = at::arange(bins, at::kLong).unsqueeze(1);
  at::Tensor left = mel_low + bin * delta;                // float32 [bins][1]
  at::Tensor centre = mel_low + (bin + 1.0) * delta;
  at::Tensor right = mel_low + (bin + 2.0) * delta;
  if (o.vtln_warp != 1.0) {
    // Each triangle's corners move to mel(F(f)) for their frequency f (F: the warp of fbank.h).
    const double vtln_high = o.vtln_high < 0.0 ? o.vtln_high + nyquist : o.vtln_high;
    auto warp = [&](const at::Tensor& m) { return mel_of(vtln_warp_hz(hz_of_mel(m), o.low_freq, high, o.vtln_low, vtln_high, o.vtln_warp)); };
    left = warp(left);
    centre = warp(centre);
    right = warp(right);
  }
  const at::Tensor mel = (1127.0 * (1.0 + width * at::arange(static_cast<double>(fft_bins), at::kFloat) / 700.0).log()).unsqueeze(0);
  const at::Tensor up = (mel - left) / (centre - left), down = (right - mel) / (right - centre);
  at::Tensor banks;
  if (o.vtln_warp == 1.0) {
    banks = at::clamp_min(at::minimum(up, down), 0.0);
  } else {
    // The rising edge where left < mel <= centre, the falling one where centre < mel < right: a
    // warp keeps the corners in order, but a triangle squeezed to under one bin must not get the
    // min of two slopes that both exceed 1.
    banks = at::where((mel > left) & (mel <= centre), up, at::where((mel > centre) & (mel < right), down, at::zeros_like(up)));
  }
  const at::Tensor centres = (700.0 * ((centre.squeeze(1).to(at::kDouble) / 1127.0).exp() - 1.0));
  return {banks.to(at::kDouble), centres};
}

at::Tensor fbank(const at::Tensor& waveform_in, const FbankOptions& o, std::optional<at::Generator> generator) {
  o.validate();
  if (waveform_in.dim() == 2 && waveform_in.size(0) != 1)
    bad("takes one channel, got a waveform of shape " + c10::str(waveform_in.sizes()));
  if (waveform_in.dim() > 2) bad("takes [samples] or [1][samples], got " + c10::str(waveform_in.sizes()));
  const at::Tensor waveform = waveform_in.reshape({-1}).to(at::kFloat).cpu().contiguous();
  const int64_t n = waveform.numel(), size = o.window_size(), shift = o.window_shift(), padded = o.padded_window_size();
  const int64_t features = o.num_features();
  if (static_cast<double>(n) < o.min_duration * o.sample_frequency) return at::empty({0, features}, at::kFloat);
  if (n < size)
    bad("the waveform has " + std::to_string(n) + " samples, fewer than one " + std::to_string(size) + "-sample frame (" +
        std::to_string(o.frame_length) + " ms at " + std::to_string(o.sample_frequency) + " Hz)");

  // The signal frames are cut from: the waveform, or for snip_edges=false the waveform with
  // reflected ends, [w[pad-1] .. w[0]] + w + [w[n-1] .. w[0]] (a negative pad trims the front).
  const float* w = waveform.data_ptr<float>();
  std::vector<float> source;
  const int64_t frames = o.num_frames(n);
  if (o.snip_edges) {
    source.assign(w, w + n);
  } else {
    const int64_t pad = size / 2 - shift / 2;
    if (pad > 0)
      for (int64_t i = pad - 1; i >= 0; --i) source.push_back(w[i]);
    source.insert(source.end(), w + (pad < 0 ? -pad : 0), w + n);
    for (int64_t i = n - 1; i >= 0; --i) source.push_back(w[i]);
  }
  // The frames [frames][size] (plus dither), and their means as torchaudio takes them.
  at::Tensor framed = at::from_blob(source.data(), {static_cast<int64_t>(source.size())}, at::kFloat)
                          .as_strided({frames, size}, {shift, 1})
                          .clone();
  if (o.dither != 0.0) {
    const at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor noise = generator ? at::randn({frames, size}, *generator, options) : at::randn({frames, size}, options);
    framed = framed + noise * o.dither;
  }
  const at::Tensor means = o.remove_dc_offset ? framed.mean(1) : at::zeros({frames}, at::kFloat);

  const at::Tensor window = kaldi_window(o).to(at::kFloat);
  const SparseBanks banks = sparse_banks(kaldi_mel_banks(o).first);
  at::Tensor out = at::empty({frames, features}, at::kFloat);
  const int64_t mel_offset = (o.use_energy && !o.htk_compat) ? 1 : 0;
  const int64_t energy_column = o.htk_compat ? o.num_mel_bins : 0;
  const int64_t fft_bins = padded / 2 + 1;
  at::parallel_for(0, frames, 64, [&](int64_t first, int64_t last) {
    std::vector<float> power(static_cast<size_t>(fft_bins));
    // In blocks of 64 frames, so that a block's frames and spectra (2 x 128 kB) stay in the core's
    // cache between the passes over them (a thread's whole range at once was 1-2 MB).
    for (int64_t begin = first; begin < last; begin += 64) {
      const int64_t end = std::min(begin + 64, last);
      const int64_t count = end - begin;
      at::Tensor chunk = at::zeros({count, padded}, at::kFloat);
      std::vector<double> energy(static_cast<size_t>(count));
      for (int64_t f = 0; f < count; ++f) {
        float* row = chunk.data_ptr<float>() + f * padded;
        std::copy_n(framed.data_ptr<float>() + (begin + f) * size, size, row);
        energy[static_cast<size_t>(f)] =
            prepare_frame(row, means.data_ptr<float>()[begin + f], o, window.data_ptr<float>(), nullptr);
      }
      const at::Tensor spectrum = at::view_as_real(at::fft_rfft(chunk, padded, 1)).contiguous();  // [count][bins][2]
      const float* z = spectrum.data_ptr<float>();
      for (int64_t f = 0; f < count; ++f) {
        const float* zf = z + f * fft_bins * 2;
        for (int64_t k = 0; k < fft_bins; ++k) {
          const float p = zf[2 * k] * zf[2 * k] + zf[2 * k + 1] * zf[2 * k + 1];
          power[static_cast<size_t>(k)] = o.use_power ? p : std::sqrt(p);
        }
        float* o_row = out.data_ptr<float>() + (begin + f) * features;
        for (int64_t b = 0; b < o.num_mel_bins; ++b) {
          const std::vector<float>& wb = banks.weights[static_cast<size_t>(b)];
          const float* pk = power.data() + banks.first[static_cast<size_t>(b)];
          // In float, as torchaudio's float32 matrix product, in 8 independent lanes (they vectorise).
          float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          const size_t width = wb.size();
          size_t k = 0;
          for (; k + 8 <= width; k += 8)
            for (size_t l = 0; l < 8; ++l) lanes[l] += wb[k + l] * pk[k + l];
          for (; k < width; ++k) lanes[0] += wb[k] * pk[k];
          const double e = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
          o_row[mel_offset + b] = static_cast<float>(o.use_log_fbank ? std::max(e, kEpsilon) : e);
        }
        if (o.use_energy) o_row[energy_column] = static_cast<float>(energy[static_cast<size_t>(f)]);
      }
    }
  });
  // The log of the mel energies in one vectorised pass (in float: the result is float; a double
  // std::log per value was a sixth of the time).
  if (o.use_log_fbank) out.narrow(1, mel_offset, o.num_mel_bins).log_();
  if (o.subtract_mean && frames > 0) out -= out.mean(0, true);
  return out;
}

FbankFrameStages fbank_frame_stages(const at::Tensor& waveform_in, const FbankOptions& o, int64_t frame) {
  o.validate();
  if (!o.snip_edges) bad("fbank_frame_stages supports snip_edges=true only");
  const at::Tensor waveform = waveform_in.reshape({-1}).to(at::kFloat).contiguous();
  if (frame < 0 || frame >= o.num_frames(waveform.numel())) bad("no frame " + std::to_string(frame));
  FbankFrameStages stages;
  const int64_t size = o.window_size();
  const at::Tensor samples = waveform.narrow(0, frame * o.window_shift(), size).clone();
  const float mean = o.remove_dc_offset ? samples.unsqueeze(0).mean(1).item<float>() : 0.0f;
  const at::Tensor window = kaldi_window(o).to(at::kFloat);
  prepare_frame(samples.data_ptr<float>(), mean, o, window.data_ptr<float>(), &stages);
  const std::vector<double>& x = stages.windowed;
  at::Tensor padded = at::zeros({o.padded_window_size()}, at::kDouble);
  std::copy(x.begin(), x.end(), padded.data_ptr<double>());
  const at::Tensor spectrum = at::fft_rfft(padded).abs();
  stages.power_spectrum = o.use_power ? spectrum.square() : spectrum;
  return stages;
}

std::vector<at::Tensor> fbank(const std::vector<at::Tensor>& waveforms, const FbankOptions& options) {
  options.validate();
  std::vector<at::Tensor> out(waveforms.size());
  at::parallel_for(0, static_cast<int64_t>(waveforms.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[static_cast<size_t>(i)] = fbank(waveforms[static_cast<size_t>(i)], options);
  });
  return out;
}

std::vector<at::Tensor> fbank(const std::vector<at::Tensor>& waveforms, const FbankOptions& options,
                              const std::vector<uint64_t>& dither_seeds, const std::vector<double>& vtln_warps) {
  options.validate();
  if (dither_seeds.size() != waveforms.size())
    throw std::invalid_argument("fbank: " + std::to_string(dither_seeds.size()) + " dither seeds for " +
                                std::to_string(waveforms.size()) + " waveforms");
  if (!vtln_warps.empty() && vtln_warps.size() != waveforms.size())
    throw std::invalid_argument("fbank: " + std::to_string(vtln_warps.size()) + " VTLN warp factors for " +
                                std::to_string(waveforms.size()) + " waveforms");
  std::vector<FbankOptions> each(vtln_warps.size(), options);
  for (size_t i = 0; i < each.size(); ++i) {
    each[i].vtln_warp = vtln_warps[i];
    each[i].validate();  // before the threads: an invalid factor is named here, not inside parallel_for
  }
  std::vector<at::Tensor> out(waveforms.size());
  at::parallel_for(0, static_cast<int64_t>(waveforms.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      at::Generator g = at::detail::createCPUGenerator(dither_seeds[static_cast<size_t>(i)]);
      out[static_cast<size_t>(i)] = fbank(waveforms[static_cast<size_t>(i)], each.empty() ? options : each[static_cast<size_t>(i)], g);
    }
  });
  return out;
}

at::Tensor spec_augment(const at::Tensor& features, const SpecAugmentOptions& o, at::Generator& generator) {
  if (features.dim() != 2) throw std::invalid_argument("spec_augment: features must be [frames][bins], got " + c10::str(features.sizes()));
  at::Tensor out = features.clone();
  const int64_t frames = out.size(0), bins = out.size(1);
  auto uniform = [&](int64_t lo, int64_t hi) {  // integer in [lo, hi]
    if (hi <= lo) return lo;
    return at::randint(lo, hi + 1, {1}, generator, at::TensorOptions().dtype(at::kLong)).item<int64_t>();
  };
  for (int i = 0; i < o.freq_masks; ++i) {
    const int64_t width = uniform(0, std::min<int64_t>(o.freq_mask_width, bins));
    const int64_t start = uniform(0, bins - width);
    if (width > 0) out.narrow(1, start, width).fill_(o.mask_value);
  }
  const int64_t max_time = std::min<int64_t>(o.time_mask_width, static_cast<int64_t>(o.time_mask_ratio * static_cast<double>(frames)));
  for (int i = 0; i < o.time_masks; ++i) {
    const int64_t width = uniform(0, std::max<int64_t>(0, max_time));
    const int64_t start = uniform(0, frames - width);
    if (width > 0) out.narrow(0, start, width).fill_(o.mask_value);
  }
  return out;
}

void GlobalCmvn::accumulate(const at::Tensor& features) {
  if (features.dim() != 2) throw std::invalid_argument("GlobalCmvn: features must be [frames][dims], got " + c10::str(features.sizes()));
  const at::Tensor x = features.to(at::kDouble);
  if (!sum_.defined()) {
    sum_ = at::zeros({x.size(1)}, at::kDouble);
    sum_sq_ = at::zeros({x.size(1)}, at::kDouble);
  } else if (sum_.size(0) != x.size(1)) {
    throw std::invalid_argument("GlobalCmvn: features have " + std::to_string(x.size(1)) + " dimensions, earlier ones " +
                                std::to_string(sum_.size(0)));
  }
  sum_ += x.sum(0);
  sum_sq_ += x.square().sum(0);
  count_ += x.size(0);
}

void GlobalCmvn::finalize(double std_floor) {
  if (count_ == 0) throw std::logic_error("GlobalCmvn: no frames were accumulated");
  mean_ = sum_ / static_cast<double>(count_);
  std_ = (sum_sq_ / static_cast<double>(count_) - mean_.square()).clamp_min(0).sqrt().clamp_min(std_floor);
}

at::Tensor GlobalCmvn::apply(const at::Tensor& features) const {
  if (!ready()) throw std::logic_error("GlobalCmvn: apply before finalize");
  return ((features.to(at::kDouble) - mean_) / std_).to(features.scalar_type());
}

GlobalCmvn GlobalCmvn::from(const at::Tensor& mean, const at::Tensor& std) {
  GlobalCmvn c;
  c.mean_ = mean.to(at::kDouble).reshape({-1});
  c.std_ = std.to(at::kDouble).reshape({-1});
  return c;
}

}  // namespace wavetrain::data
