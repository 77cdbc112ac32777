// The "asr" training task (asr_task.h).
//
// Data: an ASR store (asr.data; corpus_synth.h's layout: "audio" float32 at 16 kHz and "text"
// per utterance) and its tokenizer. A batch is made on the CPU: audio -> speed perturbation
// (training: 0.9, 1.0 or 1.1, by libsoxr) -> 80-bin Kaldi fbank -> global CMVN (the statistics of
// the model's feature_mean/feature_std buffers, computed when the task is made) -> SpecAugment
// (training) -> padded [B][T][80]; tokens padded [B][S]. Only the finished tensors move to the
// device. Augmentation draws from (seed, epoch, item), so batches do not depend on threads or on
// where a run was resumed. Training batches are made one ahead on a second thread, and hold items
// of similar duration (asr.bucket_windows).
//
// Loss (icefall's pruned transducer): the smoothed simple loss from the linear "simple" maps of
// encoder and predictor outputs (lm_scale 0.25, am_scale 0) gives the prune ranges (prune_range
// 5); the joiner runs only on those; loss = simple_scale x simple + pruned_scale x pruned with
// icefall's warm-up (loss_scales), summed over utterances and divided by encoder frames. An
// utterance whose loss is not finite is left out and counted (train/nonfinite_utterances).
// Validation: the same loss at the final scales, and WER (percent) of greedy search on the
// validation split, averaged over its reference words.
#include "experiments/asr/asr_task.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "data/audio_io.h"
#include "data/fbank.h"
#include "data/hdf5_store.h"
#include "experiments/asr/audio_cache.h"
#include "experiments/asr/augment.h"
#include "experiments/asr/corpus_synth.h"
#include "experiments/asr/seeding.h"
#include "experiments/asr/test_condition.h"
#include "experiments/asr/decode.h"
#include "experiments/asr/tokenizer.h"
#include "experiments/asr/transducer_loss.h"
#include "experiments/asr/wer.h"

namespace wavetrain::experiments::asr {
namespace {

struct StoredUtterance {
  int64_t samples = 0;
  std::string text;
  std::vector<int> tokens;
  int64_t words = 0;
};

class AsrTask : public Task, public AsrEvaluation {
 public:
  explicit AsrTask(const config::Config& cfg)
      : store_path_(cfg.get_string("asr.data")),
        store_(std::make_shared<data::DatasetReader>(store_path_)),
        splits_{cfg.get_string("asr.train_split", "train"), cfg.get_string("asr.valid_split", "dev")},
        tokenizer_file_(tokenizer_path(cfg)),
        tokenizer_(tokenizer_file_),
        model_(transducer_config_from(cfg, tokenizer_.vocab_size())),
        seed_(static_cast<uint64_t>(cfg.get_int("trainer.seed", 0))) {
    fbank_ = asr_fbank_options(model_->config());
    speed_perturb_ = cfg.get_bool("asr.augment.speed_perturb", true);
    augmenter_ = std::make_unique<WaveAugmenter>(WaveAugmentOptions::from(cfg));
    condition_ = TestCondition::from(cfg);
    spec_augment_ = cfg.get_bool("asr.augment.spec_augment", true);
    // Bounded before the casts to int: 2^32 + 2 masks would otherwise read as 2.
    spec_.freq_masks = static_cast<int>(cfg.get_int_at_most("asr.augment.freq_masks", 2, 1000));
    spec_.freq_mask_width = static_cast<int>(cfg.get_int_at_most("asr.augment.freq_mask_width", 27, 1000000));
    spec_.time_masks = static_cast<int>(cfg.get_int_at_most("asr.augment.time_masks", 2, 1000));
    spec_.time_mask_width = static_cast<int>(cfg.get_int_at_most("asr.augment.time_mask_width", 40, 1000000));
    spec_.time_mask_ratio = cfg.get_float("asr.augment.time_mask_ratio", 0.2);
    simple_scale_ = cfg.get_float("asr.loss.simple_scale", 0.5);
    loss_options_.lm_scale = cfg.get_float("asr.loss.lm_scale", 0.25);
    loss_options_.am_scale = cfg.get_float("asr.loss.am_scale", 0.0);
    loss_options_.prune_range = cfg.get_int_at_most("asr.loss.prune_range", 5, 100000);
    loss_options_.ctc_scale = cfg.get_float("asr.loss.ctc_scale", 0.0);
    const std::string loss_type = cfg.get_string("asr.loss.type", "pruned");
    if (loss_type != "pruned" && loss_type != "full")
      throw config::ConfigError("asr.loss.type must be pruned or full, got '" + loss_type + "'");
    loss_options_.full = loss_type == "full";
    warm_step_ = cfg.get_int("asr.loss.warm_step", 2000);
    bucket_windows_ = cfg.get_int_at_most("asr.bucket_windows", 50, 1000000);
    // Decoded audio kept in memory (audio_cache.h), at most an eighth of what is available: other
    // ranks on the host, and everything else, keep room.
    const int64_t cache_mb = cfg.get_int_at_most("asr.cache_audio_mb", 2048, int64_t{1} << 40);
    if (cache_mb < 0) throw config::ConfigError("asr.cache_audio_mb must be >= 0 (0: off), got " + std::to_string(cache_mb));
    audio_ = std::make_unique<AudioCache>(
        store_, static_cast<int64_t>(std::min(static_cast<double>(cache_mb) * 1048576.0, available_memory_bytes() / 8)));
    decoding_.method = cfg.get_string("decoding.method", "greedy_search");
    decoding_.beam = static_cast<int>(cfg.get_int_at_most("decoding.beam", 4, 10000));
    decoding_.max_symbols_per_frame = static_cast<int>(cfg.get_int_at_most("decoding.max_sym_per_frame", 1, 1000));
    decoding_.unk_id = tokenizer_.unk_id();
    try {
      decoding_.validate();
    } catch (const std::invalid_argument& e) {
      throw config::ConfigError(e.what());
    }
    if (loss_options_.prune_range < 1)
      throw config::ConfigError("asr.loss.prune_range must be >= 1, got " + std::to_string(loss_options_.prune_range));
    if (warm_step_ < 0) throw config::ConfigError("asr.loss.warm_step must be >= 0, got " + std::to_string(warm_step_));
    if (loss_options_.ctc_scale > 0 && !model_->config().ctc_head)
      throw config::ConfigError("asr.loss.ctc_scale > 0 needs the CTC head: model.ctc_head=true");
    const bool skip_bad = cfg.get_bool("data.skip_bad_items", false);
    for (int s = 0; s < 2; ++s) load_split(s, skip_bad);
    if (cfg.get_bool("asr.features.cmvn", true)) compute_cmvn(cfg.get_int("asr.features.cmvn_utterances", 500));
    double seconds = 0;
    for (const StoredUtterance& u : utterances_[0]) seconds += static_cast<double>(u.samples) / kRate;
    mean_seconds_ = utterances_[0].empty() ? 1.0 : seconds / static_cast<double>(utterances_[0].size());
  }

  torch::nn::Module& model() override { return *model_; }
  // The store and the tokenizer as absolute paths: `eval` and `transcribe` of the run then work
  // from any directory (a config's relative paths are relative to where training started).
  void add_to_recorded_config(config::Node& recorded) const override {
    std::error_code ec;
    for (const auto& [key, path] : {std::pair<const char*, std::string>{"asr.data", store_path_}, {"asr.tokenizer", tokenizer_file_}}) {
      const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
      if (!ec) recorded.set_path(key, config::Node::string(absolute.lexically_normal().string()));
    }
  }
  int64_t size(Split split) const override { return static_cast<int64_t>(items_[index(split)].size()); }
  ThroughputUnit throughput_unit() const override { return {"s audio", mean_seconds_}; }
  bool prefetch_batches() const override { return true; }
  // The model's only random operator is its dropout (experiments/common/dropout.h).
  bool parallel_batch_parts() const override { return true; }

  std::vector<int64_t> train_order(int64_t epoch, int64_t seed, int64_t batch_size) override {
    epoch_ = epoch;
    std::vector<int64_t> order = shuffled_order(size(Split::Train), seed, epoch);
    if (bucket_windows_ <= 0 || batch_size < 2) return order;
    // Windows of bucket_windows batches sorted by duration, cut into batches, batches shuffled.
    const auto& items = items_[0];
    const auto length = [&](int64_t i) { return utterances_[0][static_cast<size_t>(items[static_cast<size_t>(i)])].samples; };
    // bucket_windows x batch_size may not fit in 64 bits; a window as long as the split is the same.
    const int64_t n = static_cast<int64_t>(order.size());
    const int64_t window = bucket_windows_ > n / batch_size ? n : bucket_windows_ * batch_size;
    for (int64_t w = 0; w < n; w += window)
      std::stable_sort(order.begin() + w, order.begin() + std::min(n, w + window),
                       [&](int64_t a, int64_t b) { return length(a) < length(b); });
    std::vector<std::vector<int64_t>> batches;
    for (int64_t b = 0; b + batch_size <= n; b += batch_size) batches.emplace_back(order.begin() + b, order.begin() + b + batch_size);
    std::mt19937_64 rng(seed_of(static_cast<uint64_t>(seed), epoch, -1, 3));
    for (size_t i = batches.size(); i > 1; --i) std::swap(batches[i - 1], batches[rng() % i]);
    std::vector<int64_t> out;
    for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
    out.insert(out.end(), order.begin() + static_cast<int64_t>(batches.size()) * batch_size, order.end());  // the remainder
    return out;
  }

  Batch make_batch(Split split, const std::vector<int64_t>& indices, const at::Device& device) override {
    const int s = index(split);
    const bool train = split == Split::Train;
    std::vector<at::Tensor> waves;
    std::vector<uint64_t> dither_seeds;
    std::vector<double> warps;  // VTLP's factors (training only; none: no warp)
    const UtteranceSource others = [this](uint64_t pick) {
      return audio_->audio(splits_[0], items_[0][static_cast<size_t>(pick % items_[0].size())]);
    };
    for (int64_t i : indices) {
      const int64_t item = items_[s][static_cast<size_t>(i)];
      at::Tensor audio = audio_->audio(splits_[s], item);
      if (train && speed_perturb_) {
        const double factor = std::array<double, 3>{0.9, 1.0, 1.1}[seed_of(seed_, epoch_, item, 1) % 3];
        if (factor != 1.0) audio = data::resample(audio, kRate * factor, kRate).view({-1});
      }
      if (train && augmenter_->options().any()) audio = augmenter_->apply(audio, seed_of(seed_, epoch_, item, 6), others);
      if (!train) audio = conditioned(audio, item);
      waves.push_back(audio);
      dither_seeds.push_back(train ? seed_of(seed_, epoch_, item, 4) : seed_of(seed_, 0, item, 5));
      if (train && augmenter_->options().vtlp_prob > 0) warps.push_back(vtlp_factor(augmenter_->options(), seed_of(seed_, epoch_, item, 9)));
    }
    // With the normalisation the model holds (a loaded checkpoint's, in evaluation).
    std::vector<at::Tensor> feats = asr_features(waves, *model_, dither_seeds, warps);
    int64_t max_frames = 0, max_tokens = 0;
    for (size_t k = 0; k < feats.size(); ++k) {
      const int64_t item = items_[s][static_cast<size_t>(indices[k])];
      if (train && spec_augment_) {
        at::Generator g = at::detail::createCPUGenerator(seed_of(seed_, epoch_, item, 2));
        feats[k] = data::spec_augment(feats[k], spec_, g);
      }
      max_frames = std::max(max_frames, feats[k].size(0));
      max_tokens = std::max<int64_t>(max_tokens, static_cast<int64_t>(utterances_[s][static_cast<size_t>(item)].tokens.size()));
    }
    const int64_t B = static_cast<int64_t>(indices.size());
    at::Tensor input = at::zeros({B, max_frames, fbank_.num_mel_bins});
    at::Tensor input_lengths = at::empty({B}, at::kLong), target = at::zeros({B, max_tokens}, at::kLong),
               target_lengths = at::empty({B}, at::kLong);
    for (int64_t b = 0; b < B; ++b) {
      const at::Tensor& f = feats[static_cast<size_t>(b)];
      input[b].narrow(0, 0, f.size(0)).copy_(f);
      input_lengths[b] = f.size(0);
      const std::vector<int>& tokens = utterances_[s][static_cast<size_t>(items_[s][static_cast<size_t>(indices[static_cast<size_t>(b)])])].tokens;
      for (size_t t = 0; t < tokens.size(); ++t) target[b][static_cast<int64_t>(t)] = tokens[t];
      target_lengths[b] = static_cast<int64_t>(tokens.size());
    }
    Batch batch;
    batch.input = input.to(device);
    batch.target = target.to(device);
    batch.input_lengths = input_lengths.to(device);
    batch.target_lengths = target_lengths.to(device);
    batch.size = B;
    batch.indices = indices;
    return batch;
  }

  at::Tensor forward(const Batch& batch) override { return model_->encoder->forward(batch.input, batch.input_lengths).first; }

  at::Tensor loss(const at::Tensor& prediction, const Batch& batch, Metrics& logged) override {
    const auto [simple_scale, pruned_scale] = loss_scales(batch.step, warm_step_, simple_scale_);
    const TransducerLoss p = losses_of(prediction, batch);
    logged.emplace_back("train/simple_loss", p.simple.item<double>() / p.frames);
    logged.emplace_back("train/pruned_loss", p.pruned.item<double>() / p.frames);
    if (p.ctc.defined()) logged.emplace_back("train/ctc_loss", p.ctc.item<double>() / p.frames);
    logged.emplace_back("train/nonfinite_utterances", static_cast<double>(p.nonfinite));
    at::Tensor total = simple_scale * p.simple + pruned_scale * p.pruned;
    if (p.ctc.defined()) total = total + loss_options_.ctc_scale * p.ctc;
    return total / p.frames;
  }

  Metrics validation_metrics(const at::Tensor& prediction, const Batch& batch) override {
    const TransducerLoss p = losses_of(prediction, batch);
    const double loss = (simple_scale_ * p.simple.item<double>() + p.pruned.item<double>()) / p.frames;
    const std::vector<Hypothesis> hyps = decode(*model_, prediction.to(at::kFloat), encoder_lengths(batch), decoding_);
    WordErrors errors;
    for (size_t b = 0; b < hyps.size(); ++b)
      errors += word_errors(utterances_[1][static_cast<size_t>(items_[1][static_cast<size_t>(batch.indices[b])])].text,
                            tokenizer_.decode(hyps[b].tokens));
    return {{"val/loss", loss}, {"val/wer", 100.0 * errors.rate()}};
  }

  double metric_weight(const std::string& name, const Batch& batch) const override {
    if (name != "val/wer") return static_cast<double>(batch.size);
    double words = 0;
    for (int64_t i : batch.indices) words += static_cast<double>(utterances_[1][static_cast<size_t>(items_[1][static_cast<size_t>(i)])].words);
    return words;
  }

  // AsrEvaluation
  TransducerImpl& transducer() override { return *model_; }
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  const DecodingOptions& decoding() const override { return decoding_; }
  // The split's name, with the test condition when there is one ("test-unseen-voices@lead=1s"):
  // the evaluation's files and report rows are named by it, apart from the clean ones.
  std::string validation_split() const override { return splits_[1] + condition_.name(); }
  AsrEvaluation::Utterance validation_utterance(int64_t i) const override {
    const int64_t item = items_[1][static_cast<size_t>(i)];
    const auto& u = utterances_[1][static_cast<size_t>(item)];
    AsrEvaluation::Utterance out{store_->id(splits_[1], item), u.text, "", "", u.samples + condition_.lead_samples()};  // as heard
    if (has_speaker_[1]) out.speaker = utf8_field(store_->field(splits_[1], "speaker", item));
    if (has_voice_) out.voice = utf8_field(store_->field(splits_[1], "voice", item));
    return out;
  }
  at::Tensor validation_audio(int64_t i) const override {
    const int64_t item = items_[1][static_cast<size_t>(i)];
    return conditioned(audio_->audio(splits_[1], item), item);
  }
  at::Tensor encoder_lengths(const Batch& batch) const override { return subsampled_frames(batch.input_lengths.to(at::kLong)); }

 private:
  static constexpr double kRate = 16000;

  int index(Split split) const { return split == Split::Train ? 0 : 1; }

  TransducerLoss losses_of(const at::Tensor& prediction, const Batch& batch) {
    return transducer_loss(*model_, prediction, encoder_lengths(batch), batch.target, batch.target_lengths, loss_options_);
  }

  void load_split(int s, bool skip_bad) {
    const std::string& split = splits_[s];
    const std::vector<std::string> splits = store_->splits();
    if (std::find(splits.begin(), splits.end(), split) == splits.end()) {
      std::string have;
      for (const std::string& x : splits) have += (have.empty() ? "" : ", ") + x;
      throw config::ConfigError(store_path_ + ": no split '" + split + "' (asr." + (s == 0 ? "train" : "valid") +
                                "_split); the store has " + (have.empty() ? "none" : have));
    }
    const std::vector<std::string> fields = store_->fields(split);
    has_speaker_[s] = std::find(fields.begin(), fields.end(), "speaker") != fields.end();
    if (s == 1) has_voice_ = std::find(fields.begin(), fields.end(), "voice") != fields.end();
    for (const char* f : {"audio", "text"})
      if (std::find(fields.begin(), fields.end(), f) == fields.end())
        throw config::ConfigError(store_path_ + ": split '" + split + "' has no '" + f + "' field" +
                                  (std::string(f) == "text" ? " (no transcripts)" : "") +
                                  "; an ASR store from `wavetrain data asr-synth` or `asr-import` has audio and text");
    const int64_t n = store_->size(split);
    if (n == 0) throw config::ConfigError(store_path_ + ": split '" + split + "' is empty");
    // The shortest audio after the fastest speed perturbation must still give the subsampling
    // its 7 feature frames.
    const double fastest = s == 0 && speed_perturb_ ? 1.1 : 1.0;
    for (int64_t i = 0; i < n; ++i) {
      StoredUtterance u;
      u.samples = store_->length(split, "audio", i);
      u.text = utf8_field(store_->field(split, "text", i));
      u.tokens = tokenizer_.encode(u.text);
      u.words = static_cast<int64_t>(split_words(u.text).size());
      const int64_t frames = fbank_.num_frames(static_cast<int64_t>(std::floor(static_cast<double>(u.samples) / fastest)));
      std::string problem;
      if (subsampled_frames(frames) < 1) {
        char text[200];
        std::snprintf(text, sizeof text, "%lld samples (%.3f s) give %lld feature frames; the encoder's subsampling needs at least 7 (%.3f s%s)",
                      static_cast<long long>(u.samples), static_cast<double>(u.samples) / kRate, static_cast<long long>(frames),
                      static_cast<double>(fbank_.window_size() + 6 * fbank_.window_shift()) * fastest / kRate,
                      fastest > 1 ? " before speed perturbation by 1.1" : "");
        problem = text;
      }
      else if (u.words == 0)
        problem = "the transcript is empty";
      if (!problem.empty()) {
        const std::string where = store_path_ + " split '" + split + "' item " + std::to_string(i) + " (" + store_->id(split, i) + ")";
        if (!skip_bad) throw config::ConfigError(where + ": " + problem + "; data.skip_bad_items=true leaves such items out");
        std::fprintf(stderr, "warning: %s: %s: left out\n", where.c_str(), problem.c_str());
      } else {
        items_[s].push_back(i);
      }
      utterances_[s].push_back(std::move(u));
    }
    if (items_[s].empty()) throw config::ConfigError(store_path_ + ": split '" + split + "' has no usable utterance");
  }

  // A validation utterance under the test condition (asr.eval.*); babble comes from the split's
  // other utterances, and the noise is drawn from the item, so every evaluation hears the same.
  at::Tensor conditioned(const at::Tensor& audio, int64_t item) const {
    const UtteranceSource others = [this, item](uint64_t pick) {
      const size_t n = items_[1].size();
      size_t k = static_cast<size_t>(pick % n);
      if (n > 1 && items_[1][k] == item) k = (k + 1) % n;  // not the utterance itself
      return audio_->audio(splits_[1], items_[1][k]);
    };
    return condition_.apply(audio, seed_of(1234, static_cast<uint64_t>(item), 0, 8), others);
  }

  void compute_cmvn(int64_t max_utterances) {
    const int64_t n = std::min<int64_t>(max_utterances, static_cast<int64_t>(items_[0].size()));
    std::vector<at::Tensor> waves;
    std::vector<uint64_t> dither_seeds;
    for (int64_t k = 0; k < n; ++k) {
      waves.push_back(audio_->audio(splits_[0], items_[0][static_cast<size_t>(k)]) * 32768.0);
      dither_seeds.push_back(seed_of(seed_, 0, static_cast<uint64_t>(k), 7));
    }
    data::GlobalCmvn cmvn;
    for (const at::Tensor& f : data::fbank(waves, fbank_, dither_seeds)) cmvn.accumulate(f);
    cmvn.finalize();
    at::NoGradGuard no_grad;
    model_->feature_mean.copy_(cmvn.mean());
    model_->feature_std.copy_(cmvn.std());
  }

  std::string store_path_;
  std::shared_ptr<data::DatasetReader> store_;
  std::unique_ptr<AudioCache> audio_;  // the store's audio, decoded (asr.cache_audio_mb)
  std::string splits_[2];
  std::string tokenizer_file_;
  Tokenizer tokenizer_;
  Transducer model_;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
  std::vector<StoredUtterance> utterances_[2];  // every item of the split, by store index
  std::vector<int64_t> items_[2];         // the store indices used (bad items left out)
  bool has_speaker_[2] = {false, false};  // the split has a "speaker" field
  bool has_voice_ = false;                 // the validation split has a "voice" field
  data::FbankOptions fbank_;
  data::SpecAugmentOptions spec_;
  bool speed_perturb_ = true, spec_augment_ = true;
  std::unique_ptr<WaveAugmenter> augmenter_;
  TestCondition condition_;  // asr.eval.*
  TransducerLossOptions loss_options_;
  double simple_scale_ = 0.5, mean_seconds_ = 1.0;
  int64_t warm_step_ = 2000, bucket_windows_ = 50;
  DecodingOptions decoding_;
};

}  // namespace

std::pair<double, double> loss_scales(int64_t step, int64_t warm_step, double simple_scale) {
  if (step >= warm_step) return {simple_scale, 1.0};
  const double f = static_cast<double>(step) / static_cast<double>(warm_step);
  return {1.0 - f * (1.0 - simple_scale), 0.1 + 0.9 * f};
}

data::FbankOptions asr_fbank_options(const TransducerConfig& config) {
  data::FbankOptions o;
  o.num_mel_bins = static_cast<int>(config.encoder.feature_dim);
  // Kaldi's dither of one int16 step: without it, a band the audio does not have (8 kHz audio
  // resampled to 16 kHz has nothing above 4 kHz) or digital silence puts the mel bins at
  // log(FLT_EPSILON) = -15.9, further from anything the model was trained on than any speech.
  o.dither = 1.0;
  return o;
}

std::vector<at::Tensor> asr_features(const std::vector<at::Tensor>& waveforms, const TransducerImpl& model,
                                     const std::vector<uint64_t>& dither_seeds, const std::vector<double>& vtln_warps) {
  std::vector<at::Tensor> scaled;
  for (const at::Tensor& w : waveforms) scaled.push_back(w.to(at::kFloat).view({-1}) * 32768.0);  // Kaldi's scale
  std::vector<at::Tensor> feats = data::fbank(scaled, asr_fbank_options(model.config()), dither_seeds, vtln_warps);
  const at::Tensor mean = model.feature_mean.to(at::kCPU), std = model.feature_std.to(at::kCPU);
  for (at::Tensor& f : feats) f = (f - mean) / std;
  return feats;
}

std::string tokenizer_path(const config::Config& cfg) {
  if (cfg.has("asr.tokenizer") && !cfg.get_string("asr.tokenizer", "").empty()) return cfg.get_string("asr.tokenizer");
  return (std::filesystem::path(cfg.get_string("asr.data")).parent_path() / "bpe.model").string();
}

TransducerConfig transducer_config_from(const config::Config& cfg, int64_t vocab_size) {
  TransducerConfig c;
  try {
    c = transducer_preset(cfg.get_string("model.preset", "tiny"));
  } catch (const std::invalid_argument& e) {
    throw config::ConfigError(std::string("model.preset: ") + e.what());
  }
  c.vocab_size = vocab_size;
  // A size key that is absent or null keeps the preset's value.
  const auto given = [&](const std::string& key) { return cfg.has(key) && !cfg.value(key).is_null(); };
  const auto set = [&](const char* key, int64_t& field) {
    if (given(std::string("model.") + key)) field = cfg.get_int(std::string("model.") + key);
  };
  set("feature_dim", c.encoder.feature_dim);
  set("subsampling_channels", c.encoder.subsampling_channels);
  set("d_model", c.encoder.d_model);
  set("num_heads", c.encoder.num_heads);
  set("ff_dim", c.encoder.ff_dim);
  set("num_layers", c.encoder.num_layers);
  set("conv_kernel", c.encoder.conv_kernel);
  set("predictor_dim", c.predictor_dim);
  set("context_size", c.context_size);
  set("joiner_dim", c.joiner_dim);
  if (given("model.dropout")) c.encoder.dropout = cfg.get_float("model.dropout");
  if (given("model.ctc_head")) c.ctc_head = cfg.get_bool("model.ctc_head");
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw config::ConfigError(e.what());
  }
  return c;
}

std::unique_ptr<Task> make_asr_task(const config::Config& cfg) { return std::make_unique<AsrTask>(cfg); }

std::vector<config::KeySpec> asr_config_keys() {
  using config::ValueType;
  const ValueType Int = ValueType::Int, Num = ValueType::Number, Str = ValueType::String, Bool = ValueType::Bool;
  return {{"asr.data", Str},
          {"asr.tokenizer", Str},
          {"asr.train_split", Str},
          {"asr.valid_split", Str},
          {"asr.bucket_windows", Int},
          {"asr.cache_audio_mb", Int},
          {"asr.features.cmvn", Bool},
          {"asr.features.cmvn_utterances", Int},
          {"asr.augment.speed_perturb", Bool},
          {"asr.augment.spec_augment", Bool},
          {"asr.augment.freq_masks", Int},
          {"asr.augment.freq_mask_width", Int},
          {"asr.augment.time_masks", Int},
          {"asr.augment.time_mask_width", Int},
          {"asr.augment.time_mask_ratio", Num},
          {"asr.augment.band_limit", Num},
          {"asr.augment.reverb", Num},
          {"asr.augment.rt60_min", Num},
          {"asr.augment.rt60_max", Num},
          {"asr.augment.silence", Num},
          {"asr.augment.silence_max_seconds", Num},
          {"asr.augment.noise", Num},
          {"asr.augment.snr_min", Num},
          {"asr.augment.snr_max", Num},
          {"asr.augment.noise_types", config::ValueType::List},
          {"asr.augment.noise_dir", Str},
          {"asr.augment.gain", Num},
          {"asr.augment.gain_min_db", Num},
          {"asr.augment.gain_max_db", Num},
          {"asr.augment.vtlp", Num},
          {"asr.augment.vtlp_min", Num},
          {"asr.augment.vtlp_max", Num},
          {"asr.eval.lead_silence", Num},
          {"asr.eval.sample_rate", Num},
          {"asr.eval.noise", Str},
          {"asr.loss.type", Str},
          {"asr.loss.simple_scale", Num},
          {"asr.loss.lm_scale", Num},
          {"asr.loss.am_scale", Num},
          {"asr.loss.prune_range", Int},
          {"asr.loss.warm_step", Int},
          {"asr.loss.ctc_scale", Num},
          {"model.dropout", Num},
          {"model.ctc_head", Bool},
          {"decoding.method", Str},
          {"decoding.beam", Int},
          {"decoding.max_sym_per_frame", Int}};
}

}  // namespace wavetrain::experiments::asr
