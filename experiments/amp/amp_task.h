// The "amp" training task (amp_task.cpp) and the model a run's config describes.
#pragma once

#include <memory>
#include <vector>

#include "data/hdf5_store.h"
#include "experiments/amp/amp_model.h"
#include "trainer/task.h"

namespace wavetrain::experiments::amp {

std::unique_ptr<Task> make_amp_task(const config::Config& cfg);
// The types of amp.* and the amp model's model.* keys: checked in every run (a WaveNet run does
// not read amp.burn_in, and its wrong type would otherwise go unnoticed).
std::vector<config::KeySpec> amp_config_keys();
// What the amp task checks of its config alone, without the capture (train runs it before the run
// directory is made): the loss terms, and amp.segment against the loss's largest STFT.
void check_amp_config(const config::Config& cfg);
// A capture store's sample rate (its sample_rate attribute; 48000 when it has none).
double capture_sample_rate(const data::DatasetReader& store);

// The capture store amp.data, opened; a ConfigError naming amp.data and the absolute path looked
// for when there is no such file.
data::DatasetReader open_capture_store(const config::Config& cfg, size_t cache_items = 4096);

// The (untrained) model of model.architecture and model.preset (or model.nam_config), e.g. to load
// a checkpoint into. Its sample rate is amp.sample_rate, else that of the capture store amp.data
// (`store` when the caller has it open, else opened here), else 48000.
AmpModel amp_model_from_config(const config::Config& cfg, const data::DatasetReader* store = nullptr);

}  // namespace wavetrain::experiments::amp
