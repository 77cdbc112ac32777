// The loader: the same batches whatever the worker count, disjoint rank shards covering the data,
// per-epoch shuffles from the seed, bucketing, padding, mid-epoch resume, and bad items.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "data/loader.h"

namespace wavetrain::data {
namespace {

// Item i: "input" [len] float32 with value i, "target" [len] float32, "tokens" [i % 3 + 1] int64.
std::shared_ptr<InMemoryDataset> dataset(int64_t n) {
  std::vector<Item> items;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = 5 + (i * 7919) % 23;
    items.push_back({{"input", at::full({len}, static_cast<float>(i))},
                     {"target", at::full({len}, static_cast<float>(-i))},
                     {"tokens", at::arange(i % 3 + 1, at::kLong)}});
  }
  return std::make_shared<InMemoryDataset>(std::move(items));
}

std::vector<Batch> epoch(Loader& loader) {
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

TEST(Loader, SameBatchesWhateverTheWorkerCount) {
  const auto data = dataset(103);
  LoaderOptions o;
  o.batch_size = 8;
  o.seed = 42;
  o.bucket_windows = 4;
  std::vector<std::vector<Batch>> runs;
  for (int workers : {0, 1, 3}) {
    o.workers = workers;
    Loader loader(data, o);
    loader.set_epoch(2);
    runs.push_back(epoch(loader));
  }
  ASSERT_EQ(runs[0].size(), 13u);
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t k = 0; k < runs[0].size(); ++k) {
      EXPECT_EQ(runs[r][k].indices, runs[0][k].indices) << r << " " << k;
      EXPECT_TRUE(at::equal(runs[r][k].fields.at("input"), runs[0][k].fields.at("input")));
    }
  }
}

TEST(Loader, ShardsAreDisjointAndCoverTheData) {
  const auto data = dataset(50);
  LoaderOptions o;
  o.batch_size = 4;
  o.world_size = 3;
  o.even_shards = false;
  std::multiset<int64_t> seen;
  for (int64_t rank = 0; rank < 3; ++rank) {
    o.rank = rank;
    for (const auto& batch : Loader::plan(*data, o, 5))
      for (int64_t i : batch) seen.insert(i);
  }
  EXPECT_EQ(seen.size(), 50u);
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(seen.count(i), 1u) << i;  // each item exactly once
  // Even shards: every rank has as many items (17; two ranks repeat one of theirs).
  o.even_shards = true;
  for (int64_t rank = 0; rank < 3; ++rank) {
    o.rank = rank;
    size_t items = 0;
    for (const auto& batch : Loader::plan(*data, o, 5)) items += batch.size();
    EXPECT_EQ(items, 17u) << rank;
  }
  o.rank = 3;
  EXPECT_THROW(Loader::plan(*data, o, 0), std::invalid_argument);
}

TEST(Loader, ShufflesPerEpochFromTheSeed) {
  const auto data = dataset(40);
  LoaderOptions o;
  o.batch_size = 40;
  const auto a = Loader::plan(*data, o, 0), b = Loader::plan(*data, o, 0), c = Loader::plan(*data, o, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  o.seed = 7;
  EXPECT_NE(Loader::plan(*data, o, 0), a);
  o.shuffle = false;
  std::vector<int64_t> in_order(40);
  for (int64_t i = 0; i < 40; ++i) in_order[static_cast<size_t>(i)] = i;
  EXPECT_EQ(Loader::plan(*data, o, 3).front(), in_order);
  o.batch_size = 16;
  o.drop_last = true;
  EXPECT_EQ(Loader::plan(*data, o, 0).size(), 2u);
}

TEST(Loader, BucketingGroupsSimilarLengths) {
  const auto data = dataset(256);
  LoaderOptions o;
  o.batch_size = 16;
  auto padding = [&](const LoaderOptions& opts) {
    int64_t waste = 0;
    for (const auto& batch : Loader::plan(*data, opts, 0)) {
      int64_t longest = 0, total = 0;
      for (int64_t i : batch) {
        longest = std::max(longest, data->length(i));
        total += data->length(i);
      }
      waste += longest * static_cast<int64_t>(batch.size()) - total;
    }
    return waste;
  };
  const int64_t plain = padding(o);
  o.bucket_windows = 16;  // the whole set in one window
  const int64_t bucketed = padding(o);
  EXPECT_LT(bucketed * 5, plain);  // padding falls more than 5x
  // Every item still appears once.
  std::set<int64_t> seen;
  for (const auto& batch : Loader::plan(*data, o, 0)) seen.insert(batch.begin(), batch.end());
  EXPECT_EQ(seen.size(), 256u);
}

TEST(Loader, PadsAndReportsLengths) {
  const auto data = dataset(10);
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  o.workers = 0;
  Loader loader(data, o);
  const Batch b = *loader.next();
  EXPECT_EQ(b.indices, (std::vector<int64_t>{0, 1, 2, 3}));
  const at::Tensor lengths = b.lengths.at("input");
  for (int64_t j = 0; j < 4; ++j) {
    const int64_t len = lengths[j].item<int64_t>();
    EXPECT_EQ(len, data->length(j));
    EXPECT_TRUE(at::equal(b.fields.at("input")[j].narrow(0, 0, len), at::full({len}, static_cast<float>(j))));
    EXPECT_EQ(b.fields.at("input")[j].narrow(0, len, b.fields.at("input").size(1) - len).abs().sum().item<float>(), 0.0f);
  }
  EXPECT_EQ(b.fields.at("tokens").sizes(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(loader.batches_per_epoch(), 3);
}

TEST(Loader, ResumesMidEpochExactly) {
  const auto data = dataset(70);
  LoaderOptions o;
  o.batch_size = 6;
  o.seed = 3;
  Loader first(data, o);
  first.set_epoch(4);
  for (int k = 0; k < 5; ++k) first.next();
  const LoaderState saved = first.state();
  EXPECT_EQ(saved.epoch, 4);
  EXPECT_EQ(saved.next_batch, 5);
  const std::vector<Batch> rest = epoch(first);
  o.workers = 1;
  Loader second(data, o);
  second.restore(saved);
  const std::vector<Batch> resumed = epoch(second);
  ASSERT_EQ(resumed.size(), rest.size());
  for (size_t k = 0; k < rest.size(); ++k) EXPECT_EQ(resumed[k].indices, rest[k].indices);
  EXPECT_THROW(second.restore({4, 99}), std::invalid_argument);
}

TEST(Loader, BadItemsAreNamedOrSkipped) {
  std::vector<Item> items;
  for (int64_t i = 0; i < 6; ++i) items.push_back({{"input", at::ones({10})}, {"target", at::ones({10})}});
  items[2]["input"][3] = NAN;
  items[3]["target"] = at::ones({9});
  items[4]["input"] = at::ones({0});
  items[4]["target"] = at::ones({0});
  const auto data = std::make_shared<InMemoryDataset>(items);
  LoaderOptions o;
  o.batch_size = 6;
  o.shuffle = false;
  o.workers = 1;
  o.equal_length_fields = {{"input", "target"}};
  Loader strict(data, o);
  try {
    strict.next();
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "item 2: field 'input' has NaN or infinite values (data.skip_bad_items=true skips such items)");
  }
  std::vector<std::string> warnings;
  o.skip_bad_items = true;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  Loader lenient(data, o);
  const Batch b = *lenient.next();
  EXPECT_EQ(b.indices, (std::vector<int64_t>{0, 1, 5}));
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0], "item 2: field 'input' has NaN or infinite values; skipped");
  EXPECT_EQ(warnings[1], "item 3: fields 'input' (10) and 'target' (9) differ in length; skipped");
  EXPECT_EQ(warnings[2], "item 4: field 'input' is empty (length 0); skipped");
}

TEST(Loader, ReadsAStoreAndNamesItsItems) {
  const std::string path = (std::filesystem::temp_directory_path() / ("wavetrain_loader_" + std::to_string(::getpid()) + ".h5")).string();
  {
    DatasetWriter w(path);
    for (int64_t i = 0; i < 9; ++i) w.add("train", {{"features", at::ones({i + 1, 2})}}, "utt" + std::to_string(i));
    w.add("train", {{"features", at::full({2, 2}, INFINITY)}}, "broken");
    w.finish();
  }
  const auto reader = std::make_shared<DatasetReader>(path);
  const auto data = std::make_shared<StoreDataset>(reader, "train", "features");
  EXPECT_EQ(data->length(4), 5);
  EXPECT_EQ(data->describe(9), path + " split 'train' item 9 (broken)");
  LoaderOptions o;
  o.batch_size = 5;
  o.shuffle = false;
  Loader loader(data, o);
  EXPECT_EQ(loader.next()->fields.at("features").sizes(), (std::vector<int64_t>{5, 5, 2}));
  try {
    loader.next();
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("item 9 (broken): field 'features' has NaN or infinite values"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace wavetrain::data
