// A test condition for ASR evaluation (test_condition.h).
#include "experiments/asr/test_condition.h"

#include <cstdio>

#include "data/audio_io.h"

namespace wavetrain::experiments::asr {
namespace {
constexpr double kConditionRate = 16000;
}  // namespace

TestCondition TestCondition::from(const config::Config& cfg) {
  TestCondition c;
  c.sample_rate = cfg.get_float("asr.eval.sample_rate", 0.0);
  if (!(c.sample_rate == 0 || (c.sample_rate >= 4000 && c.sample_rate <= 192000)))
    throw config::ConfigError("asr.eval.sample_rate: expected 0 (as stored) or a rate in [4000, 192000] Hz, got " +
                              std::to_string(c.sample_rate));
  c.lead_silence = cfg.get_float("asr.eval.lead_silence", 0.0);
  if (!(c.lead_silence >= 0 && c.lead_silence <= 60))
    throw config::ConfigError("asr.eval.lead_silence: expected seconds in [0, 60], got " + std::to_string(c.lead_silence));
  c.noise = cfg.get_string("asr.eval.noise", "white");
  if (c.noise != "white" && c.noise != "brown" && c.noise != "babble")
    throw config::ConfigError("asr.eval.noise must be white, brown or babble, got '" + c.noise + "'");
  if (cfg.has("asr.eval.snr_db") && !cfg.value("asr.eval.snr_db").is_null()) {
    c.snr_db = cfg.get_float("asr.eval.snr_db");
    if (!(*c.snr_db >= -20 && *c.snr_db <= 100))
      throw config::ConfigError("asr.eval.snr_db: expected dB in [-20, 100] (or null: clean), got " + std::to_string(*c.snr_db));
  }
  return c;
}

std::string TestCondition::name() const {
  std::string out;
  char part[96];
  if (sample_rate > 0) {
    std::snprintf(part, sizeof part, "@%gHz", sample_rate);
    out += part;
  }
  if (lead_silence > 0) {
    std::snprintf(part, sizeof part, "@lead=%gs", lead_silence);
    out += part;
  }
  if (snr_db) {
    std::snprintf(part, sizeof part, "@%s=%gdB", noise.c_str(), *snr_db);
    out += part;
  }
  return out;
}

int64_t TestCondition::lead_samples() const { return static_cast<int64_t>(lead_silence * kConditionRate); }

at::Tensor TestCondition::apply(at::Tensor audio, uint64_t seed, const UtteranceSource& others) const {
  audio = audio.to(at::kFloat).contiguous().view({-1});
  if (sample_rate > 0 && sample_rate != kConditionRate) {
    const int64_t n = audio.numel();
    audio = data::resample(data::resample(audio, kConditionRate, sample_rate).view({-1}), sample_rate, kConditionRate).view({-1});
    audio = audio.numel() >= n ? audio.narrow(0, 0, n).contiguous() : at::constant_pad_nd(audio, {0, n - audio.numel()});
  }
  if (lead_silence > 0) audio = at::constant_pad_nd(audio, {lead_samples(), 0});
  if (snr_db) {
    audio = add_noise(audio, make_noise(noise, audio.numel(), seed, others), *snr_db);
    const double peak = audio.abs().max().item<double>();
    if (peak > 0.99) audio = audio * (0.99 / peak);
  }
  return audio;
}

}  // namespace wavetrain::experiments::asr
