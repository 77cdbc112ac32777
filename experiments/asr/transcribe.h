// Transcribing audio files of any length with a trained ASR run (`wavetrain transcribe`).
//
// The model comes from a checkpoint (a run directory means its best, else last, checkpoint), with
// the run's config and tokenizer. Audio of any format libsndfile reads is mixed to mono and
// resampled to 16 kHz. Long audio is cut into pieces of at most max_piece_seconds, each cut at the
// quietest 10 ms (lowest RMS over 25 ms) in the last cut_search_seconds of the piece, so that cuts
// fall into pauses rather than words; the pieces are decoded as one batch and their words joined
// in order, each token's time offset by its piece's start. A piece is never shorter than 0.5 s
// unless the file is (the last piece takes the remainder).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "experiments/asr/decode.h"
#include "experiments/asr/tokenizer.h"
#include "experiments/asr/transducer.h"

namespace wavetrain::experiments::asr {

struct TimedToken {
  std::string piece;  // the tokenizer's piece ("▁the" starts a word)
  double seconds = 0;  // when it was emitted: its encoder frame's start (40 ms frames)
};

struct Transcript {
  std::string text;
  std::vector<TimedToken> tokens;
  double audio_seconds = 0, decode_seconds = 0;
  std::vector<double> cuts;  // where the audio was cut, seconds
};

struct TranscribeOptions {
  DecodingOptions decoding;
  double max_piece_seconds = 20;
  double cut_search_seconds = 5;
  int64_t batch_size = 8;  // pieces decoded at once
};

// Sample indices where 16 kHz audio of `samples` is cut (not including 0 and the end).
std::vector<int64_t> cut_points(const at::Tensor& audio, double max_piece_seconds, double cut_search_seconds);

class Recognizer {
 public:
  // model: a run directory or a checkpoint of an ASR run; tokenizer: "" for the run's own.
  // Throws std::runtime_error naming the file for a checkpoint of another task or a missing tokenizer.
  Recognizer(const std::string& model, const std::string& tokenizer, const at::Device& device);
  Transcript transcribe(const at::Tensor& audio_16k, const TranscribeOptions& options);
  Transcript transcribe_file(const std::string& path, const TranscribeOptions& options);
  const std::string& checkpoint() const { return checkpoint_; }
  TransducerImpl& model() { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Features (fbank and the model's CMVN, on the CPU) of each 16 kHz waveform, padded into one
  // batch on the model's device: {features [B][T][bins], lengths int64 [B]}.
  std::pair<at::Tensor, at::Tensor> features(const std::vector<at::Tensor>& waveforms) const;

 private:
  std::string checkpoint_;
  at::Device device_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Transducer model_{nullptr};
};

}  // namespace wavetrain::experiments::asr
