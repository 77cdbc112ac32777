// The "asr" training task: a transducer (transducer.h) learns to transcribe an ASR store with
// icefall's pruned RNN-T recipe, validated by greedy-search WER.
#pragma once

#include <memory>

#include "experiments/asr/transducer.h"
#include "trainer/task.h"

namespace wavetrain::experiments::asr {

std::unique_ptr<Task> make_asr_task(const config::Config& cfg);

// The model of model.preset (tiny, small) with any model.* size key overriding it, for
// `vocab_size` tokens. Throws config::ConfigError naming the key.
TransducerConfig transducer_config_from(const config::Config& cfg, int64_t vocab_size);

// The tokenizer of a run: asr.tokenizer, else bpe.model beside the store asr.data.
std::string tokenizer_path(const config::Config& cfg);

// icefall's warm-up of the pruned loss: over warm_step steps the simple loss's scale falls
// linearly from 1 to simple_scale and the pruned loss's rises from 0.1 to 1.
std::pair<double, double> loss_scales(int64_t step, int64_t warm_step, double simple_scale);

}  // namespace wavetrain::experiments::asr
