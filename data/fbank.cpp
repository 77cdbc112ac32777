// Kaldi-compatible fbank, SpecAugment and global CMVN (fbank.h).
#include "data/fbank.h"

#include "data/frame_fft.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
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

// The mel triangles as (first bin, weights) per mel bin, for a sparse product with a spectrum:
// bin b's weights are weights[start[b] .. start[b + 1]), for the spectrum's bins from first[b] on.
struct SparseBanks {
  std::vector<int64_t> first, start;
  std::vector<float> weights;
};

SparseBanks sparse_banks(const at::Tensor& dense) {
  SparseBanks s;
  const int64_t bins = dense.size(0), width = dense.size(1);
  const double* w = dense.data_ptr<double>();
  s.start.push_back(0);
  for (int64_t b = 0; b < bins; ++b) {
    int64_t lo = 0, hi = width;
    while (lo < width && w[b * width + lo] == 0.0) ++lo;
    while (hi > lo && w[b * width + hi - 1] == 0.0) --hi;
    s.first.push_back(lo);
    for (int64_t k = lo; k < hi; ++k) s.weights.push_back(static_cast<float>(w[b * width + k]));
    s.start.push_back(static_cast<int64_t>(s.weights.size()));
  }
  return s;
}

// The log of a frame's energy, sum(v[j]^2), floored as torchaudio does. Four independent sums: one
// chain of dependent double additions took a third of the time.
double log_energy(const float* v, int64_t size, const FbankOptions& o) {
  double lanes[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= size; j += 4)
    for (int l = 0; l < 4; ++l) lanes[l] += static_cast<double>(v[j + l]) * v[j + l];
  for (; j < size; ++j) lanes[0] += static_cast<double>(v[j]) * v[j];
  const double e = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  double l = std::log(std::max(e, kEpsilon));
  if (o.energy_floor != 0.0) l = std::max(l, std::log(o.energy_floor));
  return l;
}

// One frame up to the FFT, step by step, recording each stage (fbank_frame_stages; the tests
// compare them with torchaudio's). In float32 and in torchaudio's order of operations: the float32
// reference values carry rounding from the cancellation in pre-emphasis and DC removal (a float64
// computation is up to 2.2e-4 away from them in the low mel bins), so matching them to 1e-4 means
// rounding the same way. `x` holds the frame (samples plus dither) on entry; `mean` is its mean as
// at::mean computes it (the one reduction whose order matters).
void record_frame_stages(float* x, float mean, const FbankOptions& o, const float* window, FbankFrameStages& stages) {
  const int64_t size = o.window_size();
  stages.raw.assign(x, x + size);
  if (o.remove_dc_offset)
    for (int64_t j = 0; j < size; ++j) x[j] = x[j] - mean;
  stages.after_dc.assign(x, x + size);
  stages.raw_log_energy = log_energy(x, size, o);
  if (o.preemphasis_coefficient != 0.0) {  // x[j] -= c x[j-1], and x[0] -= c x[0], from the old values
    const float c = static_cast<float>(o.preemphasis_coefficient);
    for (int64_t j = size - 1; j > 0; --j) {
      const float scaled = c * x[j - 1];
      x[j] = x[j] - scaled;
    }
    const float scaled = c * x[0];
    x[0] = x[0] - scaled;
  }
  stages.after_preemphasis.assign(x, x + size);
  for (int64_t j = 0; j < size; ++j) x[j] = x[j] * window[j];
  stages.windowed.assign(x, x + size);
}

// The same steps as record_frame_stages, with the same float operations (so the same values), as
// fbank runs them: in one forward pass from the frame's samples `s`, where they lie, into `x`,
// the FFT's input row, whose zero padding it also writes. Each s[j] - mean is computed twice (for
// x[j] and x[j+1]); the same operation on the same operands gives the same float, and the pass needs
// no copy of the frame and no backward loop. Returns the log energy (raw, or after the window)
// when o.use_energy, else 0.
double frame_for_fft(const float* __restrict s, float mean, const FbankOptions& o, const float* __restrict window,
                     float* __restrict x) {
  const int64_t size = o.window_size(), padded = o.padded_window_size();
  const float m = o.remove_dc_offset ? mean : 0.0f;  // s - 0 is s, bit for bit
  double energy = 0.0;
  if (o.use_energy && o.raw_energy) {
    for (int64_t j = 0; j < size; ++j) x[j] = s[j] - m;
    energy = log_energy(x, size, o);
  }
  if (o.preemphasis_coefficient != 0.0) {
    const float c = static_cast<float>(o.preemphasis_coefficient);
    const float d0 = s[0] - m;
    x[0] = (d0 - c * d0) * window[0];
    for (int64_t j = 1; j < size; ++j) x[j] = ((s[j] - m) - c * (s[j - 1] - m)) * window[j];
  } else {
    for (int64_t j = 0; j < size; ++j) x[j] = (s[j] - m) * window[j];
  }
  if (o.use_energy && !o.raw_energy) energy = log_energy(x, size, o);
  std::fill(x + size, x + padded, 0.0f);
  return energy;
}

// Frames per group in the mel products: the spectra of 8 frames are kept bin by bin, [bin][8], so
// that each triangle weight multiplies 8 frames' powers in one vector operation, with no sums
// across lanes (one frame's triangle is only 2-20 bins wide, too short to vectorise along).
constexpr int64_t kGroup = 8;

// The power (or magnitude) spectra of `n` <= 8 frames' FFT outputs `z` ([n][bins] complex, as
// interleaved floats) into `power` [bins][8]; lanes from n on keep what they held.
void group_power(const float* z, int64_t n, int64_t bins, bool use_power, float* power) {
  for (int64_t l = 0; l < n; ++l) {
    const float* zl = z + l * bins * 2;
    for (int64_t k = 0; k < bins; ++k) {
      const float p = zl[2 * k] * zl[2 * k] + zl[2 * k + 1] * zl[2 * k + 1];
      power[k * kGroup + l] = use_power ? p : std::sqrt(p);
    }
  }
}

// Mel bin b of the group's 8 frames: sum over its triangle of weight x power, in float (as
// torchaudio's float32 matrix product), one sum per lane.
void group_mel(const SparseBanks& banks, int64_t b, const float* power, float* sums) {
  float acc[kGroup] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float* w = banks.weights.data() + banks.start[static_cast<size_t>(b)];
  const int64_t width = banks.start[static_cast<size_t>(b) + 1] - banks.start[static_cast<size_t>(b)];
  const float* p = power + banks.first[static_cast<size_t>(b)] * kGroup;
  for (int64_t k = 0; k < width; ++k)
    for (int64_t l = 0; l < kGroup; ++l) acc[l] += w[k] * p[k * kGroup + l];
  for (int64_t l = 0; l < kGroup; ++l) sums[l] = acc[l];
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
  float* w = waveform.data_ptr<float>();  // only read
  std::vector<float> reflected;
  const int64_t frames = o.num_frames(n);
  if (!o.snip_edges) {
    const int64_t pad = size / 2 - shift / 2;
    if (pad > 0)
      for (int64_t i = pad - 1; i >= 0; --i) reflected.push_back(w[i]);
    reflected.insert(reflected.end(), w + (pad < 0 ? -pad : 0), w + n);
    for (int64_t i = n - 1; i >= 0; --i) reflected.push_back(w[i]);
  }
  float* source = o.snip_edges ? w : reflected.data();
  const int64_t source_size = o.snip_edges ? n : static_cast<int64_t>(reflected.size());
  // The frames [frames][size], as a view of the signal (frame f starts at sample f x shift), or
  // with dither as a copy plus noise; and their means as torchaudio takes them (at::mean's order of
  // additions; it reads a row of the view as it would a row of a copy).
  const at::Tensor framed_view = at::from_blob(source, {source_size}, at::kFloat)
                                     .as_strided({frames, size}, {shift, 1});
  at::Tensor framed = framed_view;
  if (o.dither != 0.0) {
    const at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor noise = generator ? at::randn({frames, size}, *generator, options) : at::randn({frames, size}, options);
    framed = framed_view + noise * o.dither;
  }
  const float* frame_data = o.dither != 0.0 ? framed.data_ptr<float>() : source;
  const int64_t frame_stride = o.dither != 0.0 ? size : shift;
  const at::Tensor means = o.remove_dc_offset ? framed.mean(1) : at::zeros({frames}, at::kFloat);
  const float* mean_of = means.data_ptr<float>();

  const at::Tensor window_tensor = kaldi_window(o).to(at::kFloat);
  const float* window = window_tensor.data_ptr<float>();
  const SparseBanks banks = sparse_banks(kaldi_mel_banks(o).first);
  at::Tensor out = at::empty({frames, features}, at::kFloat);
  float* out_data = out.data_ptr<float>();
  const int64_t mel_offset = (o.use_energy && !o.htk_compat) ? 1 : 0;
  const int64_t energy_column = o.htk_compat ? o.num_mel_bins : 0;
  const int64_t fft_bins = padded / 2 + 1;
  constexpr int64_t kBlock = 64;
  at::parallel_for(0, frames, kBlock, [&](int64_t first, int64_t last) {
    // In blocks of 64 frames, so that a block's FFT inputs and spectra (2 x 128 kB) stay in the
    // core's cache between the passes over them (a thread's whole range at once was 1-2 MB).
    std::vector<float> inputs(static_cast<size_t>(kBlock * padded));
    std::vector<float> power(static_cast<size_t>(fft_bins * kGroup), 0.0f);
    std::vector<double> energy(static_cast<size_t>(kBlock));
    float sums[kGroup];
    // A power-of-two frame (the default, 512) takes the 8-frame FFT where it runs vectorised;
    // otherwise LibTorch's FFT, a block at once.
    std::optional<FrameFft<float>> fft;
    if (FrameFft<float>::supports(padded) && frame_fft_vectorised()) fft.emplace(padded);
    for (int64_t begin = first; begin < last; begin += kBlock) {
      const int64_t count = std::min(kBlock, last - begin);
      for (int64_t f = 0; f < count; ++f)
        energy[static_cast<size_t>(f)] =
            frame_for_fft(frame_data + (begin + f) * frame_stride, mean_of[begin + f], o, window, inputs.data() + f * padded);
      at::Tensor spectrum;
      if (!fft) spectrum = at::view_as_real(at::fft_rfft(at::from_blob(inputs.data(), {count, padded}, at::kFloat), padded, 1)).contiguous();
      for (int64_t g = 0; g < count; g += kGroup) {
        const int64_t n = std::min(kGroup, count - g);
        if (fft) {
          const float* rows[kGroup];  // lanes past the block's last frame repeat it
          for (int64_t l = 0; l < kGroup; ++l) rows[l] = inputs.data() + (g + std::min(l, n - 1)) * padded;
          fft->power(rows, power.data());
          if (!o.use_power)
            for (float& p : power) p = std::sqrt(p);
        } else {
          group_power(spectrum.data_ptr<float>() + g * fft_bins * 2, n, fft_bins, o.use_power, power.data());  // [count][bins][2]
        }
        for (int64_t b = 0; b < o.num_mel_bins; ++b) {
          group_mel(banks, b, power.data(), sums);
          for (int64_t l = 0; l < n; ++l)
            out_data[(begin + g + l) * features + mel_offset + b] =
                o.use_log_fbank ? std::max(sums[l], static_cast<float>(kEpsilon)) : sums[l];
        }
        if (o.use_energy)
          for (int64_t l = 0; l < n; ++l)
            out_data[(begin + g + l) * features + energy_column] = static_cast<float>(energy[static_cast<size_t>(g + l)]);
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
  record_frame_stages(samples.data_ptr<float>(), mean, o, window.data_ptr<float>(), stages);
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
