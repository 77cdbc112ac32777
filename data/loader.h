// Datasets and the batching loader.
//
// An epoch's plan is a pure function of (seed, epoch, rank, world size, dataset lengths): shuffle
// the item indices, take this rank's shard (every world_size-th item: shards are disjoint and
// together cover the data), optionally group items of similar length (bucketing), cut batches, and
// shuffle the batch order. Worker threads build batches ahead of time, but the plan fixes what
// each batch holds, so the batches are the same whatever the worker count. The position in the
// plan (epoch, batch) is the loader's state: saved in a checkpoint, it resumes mid-epoch exactly.
//
// A batch pads every field along its first dimension to the longest item and gives the lengths.
// Items are checked as they are collated: an empty field, NaN or inf in a floating field, or fields
// that must have equal lengths but do not, throw a DataError naming the item; with
// skip_bad_items they are left out of the batch with a warning instead.
#pragma once

#include <ATen/ATen.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "data/hdf5_store.h"

namespace wavetrain::data {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Item get(int64_t index) const = 0;  // called from several threads at once
  // The length used for bucketing; reading the item is the fallback.
  virtual int64_t length(int64_t index) const;
  // How errors name the item, e.g. "data.h5 split 'train' item 17 (utt-17)".
  virtual std::string describe(int64_t index) const { return "item " + std::to_string(index); }
};

// Items held in memory (tests, small synthetic sets).
class InMemoryDataset : public Dataset {
 public:
  explicit InMemoryDataset(std::vector<Item> items) : items_(std::move(items)) {}
  int64_t size() const override { return static_cast<int64_t>(items_.size()); }
  Item get(int64_t index) const override { return items_.at(static_cast<size_t>(index)); }

 private:
  std::vector<Item> items_;
};

// One split of an HDF5 store; lengths for bucketing come from `length_field`'s offsets.
class StoreDataset : public Dataset {
 public:
  StoreDataset(std::shared_ptr<const DatasetReader> reader, std::string split, std::string length_field = "");
  int64_t size() const override { return reader_->size(split_); }
  Item get(int64_t index) const override { return reader_->item(split_, index); }
  int64_t length(int64_t index) const override;
  std::string describe(int64_t index) const override;

 private:
  std::shared_ptr<const DatasetReader> reader_;
  std::string split_, length_field_;
};

struct LoaderOptions {
  int64_t batch_size = 16;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
  // Bucketing: 0 = off; else windows of bucket_windows x batch_size consecutive (shuffled) items
  // are sorted by length before they are cut into batches, and the batches are shuffled again.
  int64_t bucket_windows = 0;
  int workers = 2;             // threads building batches; 0 builds them in next()
  int prefetch_per_worker = 2;  // batches in flight per worker
  int64_t rank = 0, world_size = 1;
  // With world_size > 1, shards shorter by one item repeat their first item so that every rank has
  // the same number of batches (ranks step together). Off: shards are exactly disjoint.
  bool even_shards = true;
  bool pin_memory = false;  // page-locked batches for faster copies to CUDA (ignored without CUDA)
  bool skip_bad_items = false;
  std::vector<std::pair<std::string, std::string>> equal_length_fields;  // e.g. {"input", "target"}
  std::function<void(const std::string&)> warn;  // skipped-item warnings; stderr when unset
};

struct Batch {
  std::map<std::string, at::Tensor> fields;   // [B][max length][...], zero padded
  std::map<std::string, at::Tensor> lengths;  // int64 [B]
  std::vector<int64_t> indices;               // dataset indices, in batch order
  int64_t epoch = 0, number = 0;              // position in the plan
};

struct LoaderState {
  int64_t epoch = 0;
  int64_t next_batch = 0;  // batches of this epoch already handed out
};

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts `epoch` from its first batch (the plan depends on it).
  void set_epoch(int64_t epoch);
  // The next batch of the current epoch; nullopt when the epoch is over.
  std::optional<Batch> next();
  int64_t batches_per_epoch() const { return static_cast<int64_t>(plan_.size()); }
  LoaderState state() const { return {epoch_, position_}; }
  void restore(const LoaderState& state);

  // The epoch plan without loading anything: batches of dataset indices (tests, inspection).
  static std::vector<std::vector<int64_t>> plan(const Dataset& dataset, const LoaderOptions& options, int64_t epoch);

 private:
  Batch build(int64_t number) const;
  void start_workers();
  void stop_workers();

  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  int64_t epoch_ = 0, position_ = 0;
  std::vector<std::vector<int64_t>> plan_;

  // Workers claim batch numbers in order and leave results (or errors) in `ready_`.
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t claimed_ = 0;
  bool stopping_ = false;
  std::map<int64_t, Batch> ready_;
  std::map<int64_t, std::exception_ptr> failed_;
};

// Pads and stacks items into a batch (the loader's collation), checking them as the loader does;
// bad items are dropped (with a warning) when skip_bad_items, else they throw.
Batch collate(const Dataset& dataset, const std::vector<int64_t>& indices, const LoaderOptions& options);

}  // namespace wavetrain::data
