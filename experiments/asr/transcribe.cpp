// Transcribing files with a trained ASR run (transcribe.h).
#include "experiments/asr/transcribe.h"

#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "data/audio_io.h"
#include "experiments/asr/asr_task.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_average.h"
#include "trainer/config/config.h"
#include "trainer/config/yaml_io.h"
#include "trainer/weights.h"

namespace wavetrain::experiments::asr {
namespace {

constexpr double kRate = 16000;
constexpr double kFrameSeconds = 0.04;  // an encoder frame: 4 feature frames of 10 ms

}  // namespace

std::vector<std::pair<int64_t, int64_t>> speech_pieces(const at::Tensor& audio, const TranscribeOptions& options) {
  const at::Tensor x = audio.to(at::kFloat).contiguous().view({-1});
  const float* s = x.data_ptr<float>();
  const int64_t n = x.numel(), window = 400, hop = 160;  // RMS over 25 ms every 10 ms
  const int64_t frames = n < window ? 0 : (n - window) / hop + 1;
  if (frames == 0) return n > 0 ? std::vector<std::pair<int64_t, int64_t>>{{0, n}} : std::vector<std::pair<int64_t, int64_t>>{};
  std::vector<double> rms(static_cast<size_t>(frames));
  for (int64_t f = 0; f < frames; ++f) {
    double e = 0;
    for (int64_t k = 0; k < window; ++k) e += static_cast<double>(s[f * hop + k]) * s[f * hop + k];
    rms[static_cast<size_t>(f)] = std::sqrt(e / window);
  }
  const auto centre = [&](int64_t f) { return f * hop + window / 2; };
  // Quiet: 35 dB below the loud frames (the 95th percentile), within 6 dB of the noise floor (the
  // 10th percentile: in audio with pauses, the level of the pauses), or below -80 dBFS. Without the
  // floor, speech over noise 27 dB down had no quiet frame at all and was decoded in pieces of
  // several sentences. Audio whose loud frames are within 10 dB of its floor is noise (or
  // silence, or a hum) throughout: there is nothing to decode.
  std::vector<double> sorted = rms;
  std::sort(sorted.begin(), sorted.end());
  const auto percentile = [&](double p) { return sorted[static_cast<size_t>(p * static_cast<double>(frames - 1))]; };
  const double loud = percentile(0.95), floor = percentile(0.10);
  const double absolute_floor = 1e-4;  // -80 dBFS: 16-bit audio's dither and hiss lie below it
  if (loud <= absolute_floor || loud < floor * std::pow(10.0, 10.0 / 20)) return {};
  const double quiet = std::max({loud * std::pow(10.0, -35.0 / 20), floor * std::pow(10.0, 6.0 / 20), absolute_floor});
  const int64_t min_run = std::max<int64_t>(1, static_cast<int64_t>(options.min_pause_seconds * kRate / hop));
  const int64_t lead = static_cast<int64_t>(options.lead_seconds * kRate), tail = static_cast<int64_t>(options.tail_seconds * kRate);
  // 1. Speech: what lies between pauses (quiet runs of min_pause or more; quiet at the audio's
  //    start or end is a pause of any length), widened by the margin into the pauses around it.
  std::vector<std::pair<int64_t, int64_t>> pauses;  // [first frame, end frame)
  for (int64_t f = 0; f < frames;) {
    if (rms[static_cast<size_t>(f)] > quiet) {
      ++f;
      continue;
    }
    int64_t end = f;
    while (end < frames && rms[static_cast<size_t>(end)] <= quiet) ++end;
    if (f == 0 || end == frames || end - f >= min_run) pauses.emplace_back(f, end);
    f = end;
  }
  std::vector<std::pair<int64_t, int64_t>> speech;
  int64_t from = 0;  // the first frame after the last pause
  for (size_t k = 0; k <= pauses.size(); ++k) {
    const int64_t to = k < pauses.size() ? pauses[k].first : frames;
    // The tail reaches into the pause, never into the next piece.
    const int64_t next_start = k < pauses.size() && pauses[k].second < frames ? pauses[k].second * hop - lead : n;
    if (to > from) speech.emplace_back(std::max<int64_t>(0, from * hop - lead), std::min({n, (to - 1) * hop + window + tail, next_start}));
    if (k < pauses.size()) from = pauses[k].second;
  }
  // 2. Speech longer than max_piece (no pause long enough): cut at the quietest frame of the
  //    last `search` before the limit (the latest of equally quiet ones), at least 0.5 s in.
  const int64_t shortest = static_cast<int64_t>(0.5 * kRate);
  const int64_t max_piece = std::max(static_cast<int64_t>(options.max_piece_seconds * kRate), 2 * shortest);
  const int64_t search = std::clamp<int64_t>(static_cast<int64_t>(options.cut_search_seconds * kRate), hop, max_piece / 2);
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (auto [start, stop] : speech) {
    while (stop - start > max_piece) {
      const int64_t limit = std::min(start + max_piece, stop - shortest);
      int64_t best = limit;
      double quietest = INFINITY;
      for (int64_t f = std::max<int64_t>(0, (limit - search) / hop - 2); f < frames && centre(f) <= limit; ++f)
        if (centre(f) >= limit - search && rms[static_cast<size_t>(f)] <= quietest) quietest = rms[static_cast<size_t>(f)], best = centre(f);
      pieces.emplace_back(start, best);
      start = best;
    }
    pieces.emplace_back(start, stop);
  }
  return pieces;
}

Recognizer::Recognizer(const std::string& model, const std::string& tokenizer, const at::Device& device, int64_t average)
    : checkpoint_(Checkpoint::of_target(model)), device_(device) {
  TrainingState state = Checkpoint::load(checkpoint_);
  if (average > 1) {
    std::vector<std::string> used;
    state.model = averaged_model(std::filesystem::path(checkpoint_).parent_path().string(), state.global_step, average, &used);
    checkpoint_ += " averaged with the " + std::to_string(average - 1) + " epoch checkpoint" + (average > 2 ? "s" : "") + " before it";
  }
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

std::pair<at::Tensor, at::Tensor> Recognizer::features(const std::vector<at::Tensor>& waveforms,
                                                       std::vector<uint64_t> dither_seeds) const {
  for (size_t k = dither_seeds.size(); k < waveforms.size(); ++k) dither_seeds.push_back(k);
  const std::vector<at::Tensor> feats = asr_features(waveforms, *model_, dither_seeds);
  int64_t longest = 7;  // the subsampling's minimum
  for (const at::Tensor& f : feats) longest = std::max(longest, f.size(0));
  const int64_t B = static_cast<int64_t>(feats.size());
  at::Tensor input = at::zeros({B, longest, model_->config().encoder.feature_dim}), lengths = at::empty({B}, at::kLong);
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
  const std::vector<std::pair<int64_t, int64_t>> pieces = speech_pieces(audio, options);
  for (const auto& [begin, end] : pieces) out.pieces.emplace_back(static_cast<double>(begin) / kRate, static_cast<double>(end) / kRate);
  at::NoGradGuard no_grad;
  std::vector<int> all_tokens;
  for (size_t first = 0; first < pieces.size(); first += static_cast<size_t>(options.batch_size)) {
    const size_t last = std::min(pieces.size(), first + static_cast<size_t>(options.batch_size));
    std::vector<at::Tensor> waves;
    std::vector<uint64_t> seeds;  // a piece's dither depends on where it starts, not on its batch
    for (size_t p = first; p < last; ++p) {
      waves.push_back(audio.narrow(0, pieces[p].first, pieces[p].second - pieces[p].first));
      seeds.push_back(static_cast<uint64_t>(pieces[p].first));
    }
    const auto [input, lengths] = features(waves, seeds);
    const at::Tensor encoded = model_->encoder->forward(input, lengths).first;
    const std::vector<Hypothesis> hyps = decode(*model_, encoded.to(at::kFloat), subsampled_frames(lengths), decoding);
    for (size_t k = 0; k < hyps.size(); ++k) {
      const double offset = static_cast<double>(pieces[first + k].first) / kRate;
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
