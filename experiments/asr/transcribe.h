// Transcribing audio files of any length with a trained ASR run (`wavetrain transcribe`).
//
// The model comes from a checkpoint (a run directory means its best, else last, checkpoint), with
// the run's config and tokenizer. Audio of any format libsndfile reads is mixed to mono and
// resampled to 16 kHz, and cut into pieces of speech that are decoded as one batch and joined in
// order, each token's time offset by its piece's start:
//  - pauses are runs of at least min_pause_seconds (0.3) of 10 ms frames whose RMS (over 25 ms) is
//    35 dB below the loud frames' (the 95th percentile); quiet at the start or the end is a pause
//    of any length. A piece is what lies between pauses, with margin_seconds (0.05) of the pause
//    on either side. So a piece is about a sentence with little silence around it, as the model was
//    trained on: measured (docs/asr.md), a model trained on the built-in corpus, whose utterances
//    start at once, drops the first words after 0.25 s of leading silence, and decodes several
//    sentences in one piece poorly;
//  - speech longer than max_piece_seconds (20; no pause in it) is cut at the quietest frame of the
//    last cut_search_seconds (5, at most half a piece) before the limit.
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
  std::vector<std::pair<double, double>> pieces;  // the speech decoded: [start, end) seconds
};

struct TranscribeOptions {
  DecodingOptions decoding;
  double max_piece_seconds = 20;
  double cut_search_seconds = 5;
  double min_pause_seconds = 0.3;
  double lead_seconds = 0.0;   // of the pause before a piece, kept
  double tail_seconds = 0.3;   // of the pause after it (a transducer emits a word's last tokens late)
  int64_t batch_size = 8;  // pieces decoded at once
};

// The pieces of 16 kHz audio that are decoded: [begin, end) sample ranges, rising, not overlapping.
std::vector<std::pair<int64_t, int64_t>> speech_pieces(const at::Tensor& audio, const TranscribeOptions& options);

class Recognizer {
 public:
  // model: a run directory or a checkpoint of an ASR run; tokenizer: "" for the run's own;
  // average > 1: the weights of that many epoch checkpoints up to the model's step, averaged
  // (trainer/checkpoint_average.h). Throws std::runtime_error naming the file for a checkpoint of
  // another task, a missing tokenizer or missing epoch checkpoints.
  Recognizer(const std::string& model, const std::string& tokenizer, const at::Device& device, int64_t average = 1);
  Transcript transcribe(const at::Tensor& audio_16k, const TranscribeOptions& options);
  Transcript transcribe_file(const std::string& path, const TranscribeOptions& options);
  const std::string& checkpoint() const { return checkpoint_; }
  TransducerImpl& model() { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Features (fbank and the model's CMVN, on the CPU) of each 16 kHz waveform, padded into one
  // batch on the model's device: {features [B][T][bins], lengths int64 [B]}. The dither of
  // waveform k is drawn from seed dither_seeds[k] (k when none are given): the same audio gives
  // the same transcript.
  std::pair<at::Tensor, at::Tensor> features(const std::vector<at::Tensor>& waveforms,
                                             std::vector<uint64_t> dither_seeds = {}) const;

 private:
  std::string checkpoint_;
  at::Device device_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Transducer model_{nullptr};
};

}  // namespace wavetrain::experiments::asr
