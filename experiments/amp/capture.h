// Capture data for amp modeling: a dry input recording and the amp's output, checked the way the
// NAM trainer checks them, aligned for the amp's latency, split by time into train and validation,
// and stored as an HDF5 dataset (docs/data-format.md) with fields "input" and "target".
//
// Checks (each error names the file): both mono; same sample rate; every sample finite (a NaN or
// inf, from a broken plugin or driver, would make the latency estimate 0 and training fail at its
// first step); the output at most 1 s longer than the input (the excess is cut) and not shorter; no
// clipped output sample (|y| >= 1), since a clipped capture teaches the model the clipping of the
// interface, not the amp.
//
// Latency: the output lags the input by the interface's round trip. The delay is the onset of the
// impulse response (first sample at 10% of its peak) estimated by deconvolution over the first
// 30 s, within 0 .. max_delay samples. The alignment uses it minus kDelaySafety samples: a delay a
// little short costs the model a short pure delay, one too long asks a causal model to predict
// the future. `delay` >= 0 overrides both (--delay N). The target is output[n + delay].
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/hdf5_store.h"

namespace wavetrain::experiments::amp {

inline constexpr int64_t kDelaySafety = 2;

struct CaptureOptions {
  std::string input, output, store;
  int64_t delay = -1;          // < 0: estimate
  int64_t max_delay = 4800;    // samples searched when estimating
  double valid_seconds = 9.0;  // the validation split: the last valid_seconds of the capture
  std::string command;         // recorded in the store
};

struct CaptureReport {
  int sample_rate = 0;
  int64_t samples = 0;  // aligned samples in the store (train + validation)
  int64_t delay = 0;           // used for the alignment
  int64_t detected_delay = -1;  // the estimate (when not given)
  bool delay_estimated = false;
  int64_t train_samples = 0, valid_samples = 0;
  int64_t trimmed_output_samples = 0;
};

// Throws std::runtime_error (data::AudioError for file problems) with a message naming the file.
CaptureReport build_capture(const CaptureOptions& options);

// A capture store as the amp task reads it (docs/data-format.md, "Capture stores"): every item of
// the split "train" (each a pair of mono float32 signals of one length; windows never straddle two
// items) and the one item of "valid". Stored samples may be float32, float64, or PCM integers
// (int32, int16, uint8: scaled to [-1, 1) as WAV does); int64 is refused. Throws data::StoreError
// naming the store, and the split, item and field, for a missing split or field, more than one
// validation item, a shape other than [n], input and target of different lengths, or a sample
// that is not finite (with its index and time).
struct CaptureData {
  double sample_rate = 48000;
  std::vector<at::Tensor> train_input, train_target;
  at::Tensor valid_input, valid_target;
};
CaptureData read_capture(const data::DatasetReader& store);

// The store's sample_rate attribute (int64 or float64; the reader has checked it is in (0, 1e6]
// Hz), 48000 when it has none.
double capture_store_sample_rate(const data::DatasetReader& store);

// The onset lag in [0, max_delay] of the impulse response from input to output.
int64_t estimate_delay(const float* input, const float* output, int64_t n, int64_t max_delay);

}  // namespace wavetrain::experiments::amp
