// The `data:` config group, mapped onto the loader's options (data/loader.h): the one place where
// config keys meet data/, which does not know about configs.
#pragma once

#include <vector>

#include "data/loader.h"
#include "trainer/config/config.h"

namespace wavetrain::experiments {

// Keys read (all optional; defaults in configs/config.yaml): data.workers,
// data.prefetch_per_worker, data.shuffle, data.drop_last, data.bucket_windows, data.pin_memory,
// data.skip_bad_items, data.even_shards. batch_size, seed, rank and world size come from the caller
// (trainer.batch_size, the run's seed, the process group).
std::vector<config::KeySpec> data_config_keys();
data::LoaderOptions loader_options(const config::Config& config, int64_t batch_size, uint64_t seed, int64_t rank = 0,
                                   int64_t world_size = 1);

}  // namespace wavetrain::experiments
