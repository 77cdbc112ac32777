// The built-in capture, so that a new user needs no recordings: a dry 48 kHz test signal made
// here from a seed, rendered through a reference "amp" made of sox effects (Debian's sox).
//
// The dry signal (amplitudes peak at 0.8): silence; four clicks for latency calibration; three
// exponential sine sweeps 20 Hz - 20 kHz at -20, -10 and -4 dBFS; bursts of white and low-passed
// noise at random levels; plucked notes (Karplus-Strong, E2 to E5) and strummed three- and
// four-note chords; silence gaps between sections. `seconds` scales the noise and note sections.
//
// The "amp" (kReferenceAmpChain, documented in docs/amp.md): a 64-sample delay standing in for an
// interface's latency, input gain, overdrive, a three-band EQ, a low-pass, a compressor (2 ms
// attack, 30 ms release: its memory fits in a standard WaveNet's 85 ms receptive field, so a
// perfect model is possible), and normalisation to -1 dBFS so that the output never clips.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace wavetrain::experiments::amp {

inline constexpr const char* kReferenceAmpChain =
    "delay 64s gain -6 overdrive 25 20 equalizer 120 1q +3 equalizer 800 2q -4 equalizer 2500 1q +5 lowpass 7000 "
    "compand 0.002,0.03 -60,-60,-40,-30,-20,-15,0,-10 0 0 0 gain -n -1";

// float32 [samples] at 48 kHz, the same for the same (seconds, seed).
at::Tensor synth_dry_signal(double seconds, uint64_t seed);

struct SynthResult {
  std::string dry, amp, sox_command;
  double seconds = 0;
};

// Writes DIR/dry.wav and DIR/amp.wav. Throws std::runtime_error when sox is missing ("install
// Debian's sox") or fails.
SynthResult synth_capture(const std::string& dir, double seconds = 60, uint64_t seed = 0);

}  // namespace wavetrain::experiments::amp
