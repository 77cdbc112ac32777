// The data: config group onto the loader, and the loader's position through a checkpoint: saved
// as TrainingState's epoch and batch_in_epoch, restored mid-epoch to the same batches.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "experiments/common/data_config.h"
#include "trainer/checkpoint.h"
#include "trainer/config/yaml_io.h"

namespace wavetrain {
namespace {

TEST(DataConfig, KeysReachTheLoader) {
  const config::Config c(config::load_yaml_string(
      "data:\n  workers: 3\n  skip_bad_items: true\n  bucket_windows: 8\n  shuffle: false\n", "test.yaml"));
  const data::LoaderOptions o = experiments::loader_options(c, 16, 99, 1, 4);
  EXPECT_EQ(o.workers, 3);
  EXPECT_TRUE(o.skip_bad_items);
  EXPECT_EQ(o.bucket_windows, 8);
  EXPECT_FALSE(o.shuffle);
  EXPECT_EQ(o.batch_size, 16);
  EXPECT_EQ(o.seed, 99u);
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_TRUE(o.even_shards);  // the default
  const config::Config bad(config::load_yaml_string("data:\n  workers: two\n", "bad.yaml"));
  EXPECT_THROW(experiments::loader_options(bad, 16, 0), std::exception);
  const config::Config negative(config::load_yaml_string("data:\n  workers: -1\n", "neg.yaml"));
  EXPECT_THROW(experiments::loader_options(negative, 16, 0), std::invalid_argument);
}

TEST(DataConfig, LoaderPositionSurvivesACheckpoint) {
  std::vector<data::Item> items;
  for (int64_t i = 0; i < 50; ++i) items.push_back({{"x", at::full({i % 5 + 1}, static_cast<float>(i))}});
  const auto dataset = std::make_shared<data::InMemoryDataset>(items);
  data::LoaderOptions o;
  o.batch_size = 4;
  o.seed = 11;
  data::Loader loader(dataset, o);
  loader.set_epoch(3);
  for (int k = 0; k < 6; ++k) loader.next();
  TrainingState s;
  s.epoch = loader.state().epoch;
  s.batch_in_epoch = loader.state().next_batch;
  const std::string path = (std::filesystem::temp_directory_path() / ("wavetrain_loader_" + std::to_string(::getpid()) + ".ckpt")).string();
  Checkpoint::save(path, s);
  std::vector<std::vector<int64_t>> rest;
  while (auto b = loader.next()) rest.push_back(b->indices);

  const TrainingState loaded = Checkpoint::load(path);
  data::Loader resumed(dataset, o);
  resumed.restore({loaded.epoch, loaded.batch_in_epoch});
  std::vector<std::vector<int64_t>> again;
  while (auto b = resumed.next()) again.push_back(b->indices);
  EXPECT_EQ(again, rest);
  EXPECT_EQ(rest.size(), 7u);  // 13 batches, 6 consumed before the save
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace wavetrain
