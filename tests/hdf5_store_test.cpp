// The HDF5 dataset store: round trip, h5py (Debian's python3-h5py, test-only) reading a store
// wavetrain built, an interrupted build leaving no valid-looking file, errors, concurrent readers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tests/run_process.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <nlohmann/json.hpp>

#include "data/hdf5_store.h"

namespace wavetrain::data {
namespace {

std::string temp_dir() {
  static const std::string dir = [] {
    const std::string d = (std::filesystem::temp_directory_path() / ("wavetrain_store_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Items with a variable-length float32 [n][3] field and an int64 [m] field.
Item make_item(int64_t i) {
  return {{"features", at::arange((i % 7 + 1) * 3, at::kFloat).view({-1, 3}) + static_cast<float>(i)},
          {"tokens", at::arange(i % 4, at::kLong) * 10 + i}};
}

void build(const std::string& path, int64_t train_items, int64_t valid_items) {
  DatasetWriter w(path, "hdf5_store_test build");
  w.set_attribute("sample_rate", int64_t{16000});
  w.set_attribute("features", std::string("{\"num_mel_bins\": 3}"));
  for (int64_t i = 0; i < train_items; ++i) w.add("train", make_item(i), "utt-" + std::to_string(i));
  for (int64_t i = 0; i < valid_items; ++i) w.add("valid", make_item(100 + i), "v-" + std::to_string(i));
  w.finish();
}

TEST(Hdf5Store, RoundTripWithLengthsIdsAndAttributes) {
  const std::string path = temp_dir() + "/round.h5";
  build(path, 30, 5);
  const DatasetReader r(path);
  EXPECT_EQ(r.splits(), (std::vector<std::string>{"train", "valid"}));
  EXPECT_EQ(r.fields("train"), (std::vector<std::string>{"features", "tokens"}));
  EXPECT_EQ(r.size("train"), 30);
  EXPECT_EQ(r.size("valid"), 5);
  for (int64_t i = 0; i < 30; ++i) {
    const Item got = r.item("train", i), want = make_item(i);
    EXPECT_TRUE(at::equal(got.at("features"), want.at("features"))) << i;
    EXPECT_TRUE(at::equal(got.at("tokens"), want.at("tokens"))) << i;
    EXPECT_EQ(r.length("train", "features", i), want.at("features").size(0));
    EXPECT_EQ(r.id("train", i), "utt-" + std::to_string(i));
  }
  EXPECT_EQ(std::get<int64_t>(*r.attribute("sample_rate")), 16000);
  EXPECT_EQ(std::get<std::string>(*r.attribute("format")), kStoreFormat);
  EXPECT_EQ(std::get<std::string>(*r.attribute("command")), "hdf5_store_test build");
  EXPECT_FALSE(r.attribute("nothing"));
}

TEST(Hdf5Store, H5pyReadsWhatWavetrainWrote) {
  const std::string path = temp_dir() + "/h5py.h5";
  build(path, 12, 3);
  const std::string out = wavetrain::testing::python_output("h5py_read_store.py " + path);
  if (out.empty()) GTEST_SKIP() << WAVETRAIN_TEST_PYTHON << " cannot import h5py: install Debian's python3-h5py";
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["attributes"]["format"], kStoreFormat);
  EXPECT_EQ(j["attributes"]["sample_rate"], 16000);
  EXPECT_EQ(j["attributes"]["complete"], 1);
  const DatasetReader r(path);
  for (const char* split : {"train", "valid"}) {
    ASSERT_EQ(j["splits"][split]["items"].get<int64_t>(), r.size(split));
    for (int64_t i = 0; i < r.size(split); ++i) {
      const nlohmann::json& item = j["splits"][split]["data"][static_cast<size_t>(i)];
      const Item mine = r.item(split, i);
      const at::Tensor f = mine.at("features");
      std::vector<std::vector<float>> rows(static_cast<size_t>(f.size(0)), std::vector<float>(3));
      for (int64_t a = 0; a < f.size(0); ++a)
        for (int64_t b = 0; b < 3; ++b) rows[static_cast<size_t>(a)][static_cast<size_t>(b)] = f[a][b].item<float>();
      EXPECT_EQ(item["features"].get<std::vector<std::vector<float>>>(), rows) << split << i;
      const at::Tensor t = mine.at("tokens");
      EXPECT_EQ(item["tokens"].get<std::vector<int64_t>>(), std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()));
      EXPECT_EQ(item["id"], r.id(split, i));
    }
  }
}

TEST(Hdf5Store, KillingTheBuilderLeavesNoValidLookingFile) {
  const std::string path = temp_dir() + "/killed.h5";
  build(path, 3, 1);  // an earlier, complete version
  const pid_t child = fork();
  if (child == 0) {
    DatasetWriter w(path, "endless build");
    for (int64_t i = 0;; ++i) w.add("train", {{"features", at::randn({1000, 80})}});  // killed below
  }
  // Wait until the partial file exists and has grown, then kill the builder.
  const std::string partial = temp_dir() + "/.killed.h5.partial-" + std::to_string(child);
  for (int i = 0; i < 400 && !(std::filesystem::exists(partial) && std::filesystem::file_size(partial) > (2u << 20)); ++i)
    usleep(10000);
  ASSERT_TRUE(std::filesystem::exists(partial));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // The target is still the earlier complete file; the partial one is refused.
  const DatasetReader r(path);
  EXPECT_EQ(r.size("train"), 3);
  try {
    DatasetReader bad(partial);
    ADD_FAILURE() << "a partial file was accepted";
  } catch (const StoreError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("incomplete") != std::string::npos || what.find("cannot be opened") != std::string::npos ||
                what.find("not an HDF5 file") != std::string::npos || what.find("not a wavetrain dataset") != std::string::npos)
        << what;
  }
  // An exception mid-build (here: a mismatched item) also removes the partial file.
  try {
    DatasetWriter w(temp_dir() + "/thrown.h5");
    w.add("train", make_item(1));
    w.add("train", {{"features", at::zeros({2, 4})}, {"tokens", at::zeros({1}, at::kLong)}});
    ADD_FAILURE() << "no error";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("split 'train' item 1 field 'features': expected [*, 3] Float like earlier items, got [2, 4] Float"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(temp_dir() + "/thrown.h5"));
  EXPECT_FALSE(std::filesystem::exists(temp_dir() + "/.thrown.h5.partial-" + std::to_string(::getpid())));
}

TEST(Hdf5Store, ErrorsNameTheFileAndItem) {
  const std::string text = temp_dir() + "/text.h5";
  std::ofstream(text) << "hello";
  try {
    DatasetReader r(text);
    ADD_FAILURE();
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), text + ": not an HDF5 file");
  }
  const std::string path = temp_dir() + "/errors.h5";
  build(path, 2, 0);
  const DatasetReader r(path);
  EXPECT_THROW(r.item("train", 2), StoreError);
  EXPECT_THROW(r.item("test", 0), StoreError);
  try {
    DatasetWriter w(temp_dir() + "/fields.h5");
    w.add("train", make_item(1));
    w.add("train", {{"features", at::zeros({2, 3})}});
    ADD_FAILURE();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("split 'train' item 1 has fields {features, id}, earlier items {features, id, tokens}"),
              std::string::npos)
        << e.what();
  }
}

TEST(Hdf5Store, ConcurrentReadersSeeTheSameItems) {
  const std::string path = temp_dir() + "/threads.h5";
  build(path, 200, 0);
  const DatasetReader r(path, /*cache_items=*/16);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t k = 0; k < 400; ++k) {
        const int64_t i = (k * 37 + t * 11) % 200;
        if (!at::equal(r.item("train", i).at("features"), make_item(i).at("features"))) ++mismatches;
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace wavetrain::data
