// The "asr" training task: a transducer (transducer.h) learns to transcribe an ASR store with
// icefall's pruned RNN-T recipe, validated by greedy-search WER.
#pragma once

#include <memory>

#include "data/fbank.h"
#include "experiments/asr/decode.h"
#include "experiments/asr/tokenizer.h"
#include "experiments/asr/transducer.h"
#include "trainer/task.h"

namespace wavetrain::experiments::asr {

std::unique_ptr<Task> make_asr_task(const config::Config& cfg);
// The types of asr.* and decoding.* keys (the model's size keys take null and are checked when
// read): checked in every run, whether or not it reads them.
std::vector<config::KeySpec> asr_config_keys();

// What evaluating an ASR run needs beyond Task (the "asr" task implements it): the model, the
// tokenizer, and the validation split's utterances (asr.valid_split; `wavetrain eval --split`
// sets it).
class AsrEvaluation {
 public:
  virtual ~AsrEvaluation() = default;
  struct Utterance {
    std::string id, text, speaker;  // speaker: the store's "speaker" field ("" when it has none)
    std::string voice;              // the store's "voice" field ("engine:voice"; "" when it has none)
    int64_t samples = 0;            // 16 kHz
  };
  virtual TransducerImpl& transducer() = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual const DecodingOptions& decoding() const = 0;  // decoding.*, checked (unk_id: the tokenizer's)
  virtual std::string validation_split() const = 0;
  virtual Utterance validation_utterance(int64_t i) const = 0;  // i < size(Split::Validation)
  virtual at::Tensor validation_audio(int64_t i) const = 0;     // float32 [samples], 16 kHz
  virtual at::Tensor encoder_lengths(const Batch& batch) const = 0;
};

// The model of model.preset (tiny, small) with any model.* size key overriding it, for
// `vocab_size` tokens. Throws config::ConfigError naming the key.
TransducerConfig transducer_config_from(const config::Config& cfg, int64_t vocab_size);

// The fbank the model of `config` reads: Kaldi's, of 16 kHz audio at Kaldi's scale (x 32768), with
// Kaldi's dither (1.0: Gaussian noise of one int16 step).
data::FbankOptions asr_fbank_options(const TransducerConfig& config);
// The model's input features of 16 kHz waveforms (float, [-1, 1]): that fbank, each waveform's
// dither drawn from a generator seeded by its dither_seeds entry, then the model's CMVN
// (feature_mean, feature_std); [frames][bins] each, on the CPU, the waveforms in parallel. With
// vtln_warps (one per waveform; training's VTLP), each waveform's mel banks are warped by its factor.
std::vector<at::Tensor> asr_features(const std::vector<at::Tensor>& waveforms, const TransducerImpl& model,
                                     const std::vector<uint64_t>& dither_seeds, const std::vector<double>& vtln_warps = {});

// The tokenizer of a run: asr.tokenizer, else bpe.model beside the store asr.data.
std::string tokenizer_path(const config::Config& cfg);

// icefall's warm-up of the pruned loss: over warm_step steps the simple loss's scale falls
// linearly from 1 to simple_scale and the pruned loss's rises from 0.1 to 1.
std::pair<double, double> loss_scales(int64_t step, int64_t warm_step, double simple_scale);

}  // namespace wavetrain::experiments::asr
