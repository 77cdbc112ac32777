// The data: config group onto LoaderOptions (data_config.h).
#include "experiments/common/data_config.h"

namespace wavetrain::experiments {

std::vector<config::KeySpec> data_config_keys() {
  using config::ValueType;
  return {{"data.workers", ValueType::Int},        {"data.prefetch_per_worker", ValueType::Int},
          {"data.shuffle", ValueType::Bool},       {"data.drop_last", ValueType::Bool},
          {"data.bucket_windows", ValueType::Int}, {"data.pin_memory", ValueType::Bool},
          {"data.skip_bad_items", ValueType::Bool}, {"data.even_shards", ValueType::Bool}};
}

data::LoaderOptions loader_options(const config::Config& config, int64_t batch_size, uint64_t seed, int64_t rank,
                                   int64_t world_size) {
  config.check(data_config_keys());
  data::LoaderOptions o;
  o.batch_size = batch_size;
  o.seed = seed;
  o.rank = rank;
  o.world_size = world_size;
  o.workers = static_cast<int>(config.get_int_at_most("data.workers", o.workers, 1024));
  o.prefetch_per_worker = static_cast<int>(config.get_int_at_most("data.prefetch_per_worker", o.prefetch_per_worker, 1024));
  o.shuffle = config.get_bool("data.shuffle", o.shuffle);
  o.drop_last = config.get_bool("data.drop_last", o.drop_last);
  o.bucket_windows = config.get_int_at_most("data.bucket_windows", o.bucket_windows, 1000000);
  o.pin_memory = config.get_bool("data.pin_memory", o.pin_memory);
  o.skip_bad_items = config.get_bool("data.skip_bad_items", o.skip_bad_items);
  o.even_shards = config.get_bool("data.even_shards", o.even_shards);
  if (o.workers < 0) throw std::invalid_argument("data.workers must be >= 0, got " + std::to_string(o.workers));
  if (o.prefetch_per_worker < 1)
    throw std::invalid_argument("data.prefetch_per_worker must be >= 1, got " + std::to_string(o.prefetch_per_worker));
  if (o.bucket_windows < 0)
    throw std::invalid_argument("data.bucket_windows must be >= 0, got " + std::to_string(o.bucket_windows));
  return o;
}

}  // namespace wavetrain::experiments
