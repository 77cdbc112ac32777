// Capture data (capture.h).
#include "experiments/amp/capture.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

#include "data/audio_io.h"
#include "data/hdf5_store.h"

namespace wavetrain::experiments::amp {

int64_t estimate_delay(const float* input, const float* output, int64_t n, int64_t max_delay) {
  if (n <= 0) return 0;
  max_delay = std::max<int64_t>(0, std::min(max_delay, n - 1));
  int64_t size = 1;
  while (size < n + max_delay) size <<= 1;
  const at::Tensor x = at::zeros({size}, at::kDouble), y = at::zeros({size}, at::kDouble);
  x.narrow(0, 0, n).copy_(at::from_blob(const_cast<float*>(input), {n}, at::kFloat));
  y.narrow(0, 0, n).copy_(at::from_blob(const_cast<float*>(output), {n}, at::kFloat));
  // The (linearised) impulse response by regularised deconvolution, h = Y X* / (|X|^2 + eps):
  // its first significant sample is the latency. The cross-correlation's peak would be later by
  // the amp's group delay (2 samples for the built-in capture), and a delay too large asks a causal
  // model to predict the future; one too small only costs it a short pure delay.
  const at::Tensor fx = at::fft_rfft(x), fy = at::fft_rfft(y);
  const at::Tensor power = at::real(fx * at::conj(fx));
  const at::Tensor h = at::fft_irfft(fy * at::conj(fx) / (power + 1e-3 * power.mean()), size).narrow(0, 0, max_delay + 1).abs();
  const int64_t peak = h.argmax().item<int64_t>();
  const double threshold = 0.1 * h[peak].item<double>();
  const double* v = h.contiguous().data_ptr<double>();
  int64_t onset = peak;
  while (onset > 0 && v[onset - 1] >= threshold) --onset;
  return onset;
}

CaptureReport build_capture(const CaptureOptions& o) {
  if (!(o.valid_seconds > 0))
    throw std::invalid_argument("--valid-seconds must be > 0, got " + std::to_string(o.valid_seconds));
  data::ReadOptions mono;
  mono.channels = 1;
  const data::Audio in = data::read_audio(o.input, mono), out = data::read_audio(o.output, mono);
  if (in.sample_rate != out.sample_rate)
    throw std::runtime_error(o.output + ": sample rate " + std::to_string(out.sample_rate) + " Hz differs from the input's (" +
                             o.input + ": " + std::to_string(in.sample_rate) + " Hz); record both at one rate");
  at::Tensor x = in.samples[0], y = out.samples[0];
  CaptureReport r;
  r.sample_rate = in.sample_rate;
  if (y.numel() < x.numel())
    throw std::runtime_error(o.output + ": " + std::to_string(y.numel()) + " samples, shorter than the input's " +
                             std::to_string(x.numel()) + " (" + o.input + "); the output must cover the whole input");
  if (y.numel() > x.numel() + in.sample_rate)
    throw std::runtime_error(o.output + ": " + std::to_string(y.numel() - x.numel()) +
                             " samples longer than the input; at most 1 s (" + std::to_string(in.sample_rate) +
                             " samples) is accepted, cut at the end");
  r.trimmed_output_samples = y.numel() - x.numel();
  const at::Tensor clipped = (y.abs() >= 1.0).nonzero();
  if (clipped.numel() > 0) {
    const int64_t first = clipped[0][0].item<int64_t>();
    throw std::runtime_error(o.output + ": clipped: " + std::to_string(clipped.size(0)) + " samples at full scale (|y| >= 1), the first at " +
                             std::to_string(first) + " (" + std::to_string(static_cast<double>(first) / in.sample_rate) +
                             " s); record again with less gain");
  }
  const int64_t n = x.numel();
  if (o.delay >= 0) {
    r.delay = o.delay;
  } else {
    const int64_t window = std::min<int64_t>(n, 30 * static_cast<int64_t>(in.sample_rate));
    r.detected_delay = estimate_delay(x.data_ptr<float>(), y.data_ptr<float>(), window, o.max_delay);
    r.delay = std::max<int64_t>(0, r.detected_delay - kDelaySafety);
    r.delay_estimated = true;
  }
  if (r.delay >= n) throw std::runtime_error(o.output + ": delay " + std::to_string(r.delay) + " is not shorter than the capture");
  // Aligned: target[n] = output[n + delay]; the input loses its last `delay` samples.
  const int64_t aligned = std::min<int64_t>(n - r.delay, y.numel() - r.delay);
  x = x.narrow(0, 0, aligned);
  y = y.narrow(0, r.delay, aligned);
  r.samples = aligned;
  r.valid_samples = std::min<int64_t>(aligned / 2, static_cast<int64_t>(std::llround(o.valid_seconds * in.sample_rate)));
  r.train_samples = aligned - r.valid_samples;
  if (r.train_samples < in.sample_rate)
    throw std::runtime_error(o.input + ": only " + std::to_string(r.train_samples) + " training samples after the validation split; "
                             "a capture needs at least a few seconds");

  data::DatasetWriter w(o.store, o.command);
  w.set_attribute("sample_rate", static_cast<int64_t>(r.sample_rate));
  w.set_attribute("delay", r.delay);
  w.set_attribute("delay_estimated", static_cast<int64_t>(r.delay_estimated));
  w.set_attribute("detected_delay", r.detected_delay);
  w.set_attribute("input_file", o.input);
  w.set_attribute("output_file", o.output);
  w.add("train", {{"input", x.narrow(0, 0, r.train_samples).clone()}, {"target", y.narrow(0, 0, r.train_samples).clone()}}, "train");
  w.add("valid", {{"input", x.narrow(0, r.train_samples, r.valid_samples).clone()},
                  {"target", y.narrow(0, r.train_samples, r.valid_samples).clone()}},
        "valid");
  w.finish();
  return r;
}

}  // namespace wavetrain::experiments::amp
