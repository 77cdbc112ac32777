// Transcribing files with a trained ASR run (transcribe.h).
#include "experiments/asr/transcribe.h"

#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "data/audio_io.h"
#include "data/fbank.h"
#include "experiments/asr/asr_task.h"
#include "trainer/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/config/yaml_io.h"
#include "trainer/weights.h"

namespace wavetrain::experiments::asr {
namespace {

constexpr double kRate = 16000;
constexpr double kFrameSeconds = 0.04;  // an encoder frame: 4 feature frames of 10 ms

}  // namespace

std::vector<int64_t> cut_points(const at::Tensor& audio, double max_piece_seconds, double cut_search_seconds) {
  const int64_t n = audio.numel(), max_piece = static_cast<int64_t>(max_piece_seconds * kRate);
  const int64_t window = 400, hop = 160;  // 25 ms of RMS every 10 ms
  const int64_t search = std::clamp<int64_t>(static_cast<int64_t>(cut_search_seconds * kRate), hop, max_piece - static_cast<int64_t>(0.5 * kRate));
  const at::Tensor x = audio.to(at::kFloat).contiguous().view({-1});
  const float* s = x.data_ptr<float>();
  std::vector<int64_t> cuts;
  const int64_t shortest = static_cast<int64_t>(0.5 * kRate);
  for (int64_t start = 0; n - start > max_piece;) {
    // The quietest window ending by start + max_piece, at most `search` before it, and leaving
    // at least 0.5 s after the cut.
    const int64_t end = std::min(start + max_piece, n - shortest);
    int64_t best = end - window;
    double quietest = INFINITY;
    for (int64_t at = end - search; at + window <= end; at += hop) {
      double energy = 0;
      for (int64_t k = 0; k < window; ++k) energy += static_cast<double>(s[at + k]) * s[at + k];
      if (energy < quietest) quietest = energy, best = at;
    }
    const int64_t cut = best + window / 2;
    cuts.push_back(cut);
    start = cut;
  }
  return cuts;
}

Recognizer::Recognizer(const std::string& model, const std::string& tokenizer, const at::Device& device)
    : checkpoint_(Checkpoint::of_target(model)), device_(device) {
  const TrainingState state = Checkpoint::load(checkpoint_);
  const config::Config cfg(config::load_yaml_string(state.config_yaml, checkpoint_ + " (its config)"));
  const std::string task = cfg.get_string("task", "");
  if (task != "asr")
    throw std::runtime_error(checkpoint_ + ": a checkpoint of a '" + task + "' run, not of an ASR model (task: asr)");
  const std::string tokenizer_file = tokenizer.empty() ? tokenizer_path(cfg) : tokenizer;
  if (!std::filesystem::exists(tokenizer_file))
    throw std::runtime_error(checkpoint_ + ": its tokenizer " + tokenizer_file +
                             " is not there (paths in a run's config are relative to where it was trained); name it with --tokenizer");
  tokenizer_ = std::make_unique<Tokenizer>(tokenizer_file);
  model_ = Transducer(transducer_config_from(cfg, tokenizer_->vocab_size()));
  load_state_dict(*model_, state.model, /*strict=*/true, checkpoint_);
  model_->to(device_);
  model_->eval();
}

std::pair<at::Tensor, at::Tensor> Recognizer::features(const std::vector<at::Tensor>& waveforms) const {
  const data::FbankOptions fbank = asr_fbank_options(model_->config());
  const at::Tensor mean = model_->feature_mean.to(at::kCPU), std = model_->feature_std.to(at::kCPU);
  std::vector<at::Tensor> feats;
  int64_t longest = 7;  // the subsampling's minimum
  for (const at::Tensor& w : waveforms) {
    feats.push_back((data::fbank(w.to(at::kFloat).view({-1}) * 32768.0, fbank) - mean) / std);
    longest = std::max(longest, feats.back().size(0));
  }
  const int64_t B = static_cast<int64_t>(feats.size());
  at::Tensor input = at::zeros({B, longest, fbank.num_mel_bins}), lengths = at::empty({B}, at::kLong);
  for (int64_t k = 0; k < B; ++k) {
    input[k].narrow(0, 0, feats[static_cast<size_t>(k)].size(0)).copy_(feats[static_cast<size_t>(k)]);
    lengths[k] = feats[static_cast<size_t>(k)].size(0);
  }
  return {input.to(device_), lengths.to(device_)};
}

Transcript Recognizer::transcribe(const at::Tensor& audio_16k, const TranscribeOptions& options) {
  options.decoding.validate();
  DecodingOptions decoding = options.decoding;
  decoding.unk_id = tokenizer_->unk_id();
  const auto start = std::chrono::steady_clock::now();
  Transcript out;
  const at::Tensor audio = audio_16k.to(at::kFloat).contiguous().view({-1});
  out.audio_seconds = static_cast<double>(audio.numel()) / kRate;
  std::vector<int64_t> bounds = cut_points(audio, options.max_piece_seconds, options.cut_search_seconds);
  for (int64_t c : bounds) out.cuts.push_back(static_cast<double>(c) / kRate);
  bounds.insert(bounds.begin(), 0);
  bounds.push_back(audio.numel());
  at::NoGradGuard no_grad;
  std::vector<int> all_tokens;
  for (size_t first = 0; first + 1 < bounds.size(); first += static_cast<size_t>(options.batch_size)) {
    const size_t last = std::min(bounds.size() - 1, first + static_cast<size_t>(options.batch_size));
    std::vector<at::Tensor> pieces;
    for (size_t p = first; p < last; ++p) pieces.push_back(audio.narrow(0, bounds[p], bounds[p + 1] - bounds[p]));
    const auto [input, lengths] = features(pieces);
    const at::Tensor encoded = model_->encoder->forward(input, lengths).first;
    const std::vector<Hypothesis> hyps = decode(*model_, encoded.to(at::kFloat), subsampled_frames(lengths), decoding);
    for (size_t k = 0; k < hyps.size(); ++k) {
      const double offset = static_cast<double>(bounds[first + k]) / kRate;
      for (size_t i = 0; i < hyps[k].tokens.size(); ++i)
        out.tokens.push_back({tokenizer_->piece(hyps[k].tokens[i]), offset + kFrameSeconds * hyps[k].frames[i]});
      all_tokens.insert(all_tokens.end(), hyps[k].tokens.begin(), hyps[k].tokens.end());
    }
  }
  // Pieces are cut between words, and a word's first piece carries its space (sentencepiece's
  // "▁"), so the pieces' tokens joined decode as one text.
  out.text = tokenizer_->decode(all_tokens);
  out.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

Transcript Recognizer::transcribe_file(const std::string& path, const TranscribeOptions& options) {
  data::ReadOptions read;
  read.sample_rate = static_cast<int>(kRate);
  data::Audio audio = data::read_audio(path, read);
  if (audio.samples.size(1) == 0) throw data::AudioError(path + ": no samples (an empty file)");
  const at::Tensor mono = audio.samples.mean(0);
  if (mono.numel() < static_cast<int64_t>(0.1 * kRate)) throw data::AudioError(path + ": " + std::to_string(mono.numel()) + " samples at 16 kHz; at least 0.1 s is needed");
  return transcribe(mono, options);
}

}  // namespace wavetrain::experiments::asr
