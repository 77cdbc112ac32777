// Capture data (capture.h).
#include "experiments/amp/capture.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <stdexcept>

#include "data/audio_io.h"
#include "data/hdf5_store.h"

namespace wavetrain::experiments::amp {
namespace {

std::string seconds_text(int64_t sample, double rate) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.6f s", static_cast<double>(sample) / rate);
  return buf;
}

// "" when every sample of the 1-D float tensor is finite, else which is not and where.
std::string first_non_finite(const at::Tensor& samples, double rate) {
  const at::Tensor bad = at::logical_not(at::isfinite(samples)).nonzero();
  if (bad.numel() == 0) return "";
  const int64_t first = bad[0][0].item<int64_t>();
  const double v = samples[first].item<double>();
  return "sample " + std::to_string(first) + " (" + seconds_text(first, rate) + ") is " + (std::isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf") +
         (bad.size(0) > 1 ? " (the first of " + std::to_string(bad.size(0)) + " that are not finite)" : "");
}

}  // namespace

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
  for (const auto& [file, samples] : {std::pair{o.input, x}, std::pair{o.output, y}})
    if (const std::string bad = first_non_finite(samples, in.sample_rate); !bad.empty())
      throw std::runtime_error(file + ": " + bad + "; a capture must hold finite samples (export it again, or check the plugin chain)");
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

namespace wavetrain::experiments::amp {
namespace {

// One field of one item as mono float32 samples (read_capture's conversions).
at::Tensor capture_samples(const data::DatasetReader& store, const std::string& split, int64_t item, const std::string& field,
                           double rate) {
  const std::string where = store.path() + ": split '" + split + "' item " + std::to_string(item) + " field '" + field + "'";
  const at::Tensor stored = store.field(split, field, item);
  if (stored.dim() != 1)
    throw data::StoreError(where + " has shape " + c10::str(stored.sizes()) + "; a capture field is one-dimensional [samples] (mono)");
  at::Tensor x;
  switch (stored.scalar_type()) {
    case at::kFloat: x = stored; break;
    case at::kDouble: x = stored.to(at::kFloat); break;  // beyond float32's range: inf, refused below
    case at::kInt: x = stored.to(at::kFloat) / 2147483648.0f; break;
    case at::kShort: x = stored.to(at::kFloat) / 32768.0f; break;
    case at::kByte: x = (stored.to(at::kFloat) - 128.0f) / 128.0f; break;  // WAV's 8-bit PCM: unsigned, 128 is 0
    default:
      throw data::StoreError(where + " holds " + std::string(c10::toString(stored.scalar_type())) +
                             " values; capture samples are float32, float64, or int32, int16 or uint8 PCM");
  }
  if (const std::string bad = first_non_finite(x, rate); !bad.empty())
    throw data::StoreError(where + ": " + bad + "; a capture must hold finite samples");
  return x.contiguous();
}

}  // namespace

double capture_store_sample_rate(const data::DatasetReader& store) {
  const std::optional<data::AttributeValue> a = store.attribute("sample_rate");
  if (!a) return 48000;
  if (const auto* i = std::get_if<int64_t>(&*a)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&*a)) return *d;
  throw data::StoreError(store.path() + ": attribute 'sample_rate' is a string; expected a number of Hz");
}

CaptureData read_capture(const data::DatasetReader& store) {
  CaptureData c;
  c.sample_rate = capture_store_sample_rate(store);
  const std::vector<std::string> splits = store.splits();
  for (const char* split : {"train", "valid"}) {
    if (std::find(splits.begin(), splits.end(), split) == splits.end())
      throw data::StoreError(store.path() + ": no split '" + split + "'; a capture store has the splits train and valid (wavetrain data amp)");
    const std::vector<std::string> fields = store.fields(split);
    for (const char* field : {"input", "target"})
      if (std::find(fields.begin(), fields.end(), field) == fields.end())
        throw data::StoreError(store.path() + ": split '" + split + "' has no field '" + field +
                               "'; a capture store's items have the fields input and target");
    if (store.size(split) < 1) throw data::StoreError(store.path() + ": split '" + split + "' has no items");
  }
  // Validation is one pass over one signal, and the report plots it: one item.
  if (store.size("valid") != 1)
    throw data::StoreError(store.path() + ": split 'valid' has " + std::to_string(store.size("valid")) +
                           " items; a capture store has one validation item (wavetrain data amp writes one)");
  auto pair = [&](const std::string& split, int64_t i) {
    at::Tensor x = capture_samples(store, split, i, "input", c.sample_rate), y = capture_samples(store, split, i, "target", c.sample_rate);
    if (x.numel() != y.numel())
      throw data::StoreError(store.path() + ": split '" + split + "' item " + std::to_string(i) + ": input has " + std::to_string(x.numel()) +
                             " samples and target " + std::to_string(y.numel()) + "; they must be aligned sample for sample");
    return std::pair{x, y};
  };
  for (int64_t i = 0; i < store.size("train"); ++i) {
    auto [x, y] = pair("train", i);
    c.train_input.push_back(x);
    c.train_target.push_back(y);
  }
  std::tie(c.valid_input, c.valid_target) = pair("valid", 0);
  return c;
}

}  // namespace wavetrain::experiments::amp
