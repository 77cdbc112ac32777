// A test condition for ASR evaluation (asr.eval.*; `wavetrain eval RUN --split S asr.eval...`),
// applied to every utterance of the evaluated split, in this order:
//   sample_rate   > 0: as if recorded at that rate (resampled to it and back: its upper band is gone)
//   lead_silence  seconds of silence before the utterance
//   snr_db        noise of type `noise` (white, brown, or babble from the split's other
//                 utterances) at that SNR against the speech's loud frames; unset: clean
// The noise is drawn from the utterance's seed, so every evaluation hears the same.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "experiments/asr/augment.h"
#include "trainer/config/config.h"

namespace wavetrain::experiments::asr {

struct TestCondition {
  double sample_rate = 0, lead_silence = 0;
  std::optional<double> snr_db;
  std::string noise = "white";

  // From asr.eval.* (absent keys: no condition). Throws config::ConfigError naming the key.
  static TestCondition from(const config::Config& cfg);
  // Appended to the split's name in the evaluation's files: "" when clean, else e.g.
  // "@8000Hz", "@lead=1s", "@babble=10dB" (in that order when several are set).
  std::string name() const;
  int64_t lead_samples() const;  // at 16 kHz
  // `audio` (float32 [samples], 16 kHz) under the condition.
  at::Tensor apply(at::Tensor audio, uint64_t seed, const UtteranceSource& others) const;
};

}  // namespace wavetrain::experiments::asr
