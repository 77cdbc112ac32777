// Datasets and the batching loader (loader.h).
#include "data/loader.h"

#include <ATen/Context.h>

#include <algorithm>
#include <iostream>
#include <random>
#include <set>

namespace wavetrain::data {
namespace {

// A deterministic stream for (seed, epoch, purpose): the same everywhere (the standard library's
// distributions are implementation-defined, so indices are drawn from the raw 64-bit engine).
std::mt19937_64 stream(uint64_t seed, int64_t epoch, uint64_t purpose) {
  uint64_t x = seed ^ (0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(epoch) + 1)) ^ (purpose << 56);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's mixer
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return std::mt19937_64(x ^ (x >> 31));
}

template <typename T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(rng() % i)]);
}

// Why an item cannot go into a batch, or "" when it can.
std::string check_item(const Item& item, const LoaderOptions& o) {
  for (const auto& [name, t] : item) {
    if (t.dim() < 1) return "field '" + name + "' is a scalar";
    if (t.size(0) == 0) return "field '" + name + "' is empty (length 0)";
    if (at::isFloatingType(t.scalar_type()) && !at::isfinite(t).all().item<bool>())
      return "field '" + name + "' has NaN or infinite values";
  }
  for (const auto& [a, b] : o.equal_length_fields) {
    auto ia = item.find(a), ib = item.find(b);
    if (ia == item.end() || ib == item.end()) return "has no field '" + (ia == item.end() ? a : b) + "'";
    if (ia->second.size(0) != ib->second.size(0))
      return "fields '" + a + "' (" + std::to_string(ia->second.size(0)) + ") and '" + b + "' (" +
             std::to_string(ib->second.size(0)) + ") differ in length";
  }
  return "";
}

}  // namespace

int64_t Dataset::length(int64_t index) const {
  const Item item = get(index);
  return item.empty() ? 0 : item.begin()->second.size(0);
}

StoreDataset::StoreDataset(std::shared_ptr<const DatasetReader> reader, std::string split, std::string length_field)
    : reader_(std::move(reader)), split_(std::move(split)), length_field_(std::move(length_field)) {
  const std::vector<std::string> fields = reader_->fields(split_);  // throws for a missing split
  if (length_field_.empty() && !fields.empty()) length_field_ = fields.front();
  if (!length_field_.empty() && std::find(fields.begin(), fields.end(), length_field_) == fields.end())
    throw DataError(reader_->path() + ": split '" + split_ + "' has no field '" + length_field_ + "'");
}

int64_t StoreDataset::length(int64_t index) const { return reader_->length(split_, length_field_, index); }

std::string StoreDataset::describe(int64_t index) const {
  std::string id;
  try {
    id = reader_->id(split_, index);
  } catch (const StoreError&) {
  }
  return reader_->path() + " split '" + split_ + "' item " + std::to_string(index) + (id.empty() ? "" : " (" + id + ")");
}

std::vector<std::vector<int64_t>> Loader::plan(const Dataset& dataset, const LoaderOptions& o, int64_t epoch) {
  if (o.batch_size < 1) throw std::invalid_argument("loader: batch_size must be >= 1, got " + std::to_string(o.batch_size));
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    throw std::invalid_argument("loader: rank " + std::to_string(o.rank) + " is not in [0, world_size = " +
                                std::to_string(o.world_size) + ")");
  const int64_t n = dataset.size();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  if (o.shuffle) {
    std::mt19937_64 rng = stream(o.seed, epoch, 0);
    shuffle(order, rng);
  }
  // This rank's shard: positions rank, rank + W, ... of the epoch's order.
  std::vector<int64_t> shard;
  for (int64_t p = o.rank; p < n; p += o.world_size) shard.push_back(order[static_cast<size_t>(p)]);
  const int64_t longest = (n + o.world_size - 1) / o.world_size;
  if (o.world_size > 1 && o.even_shards && n > 0 && static_cast<int64_t>(shard.size()) < longest)
    shard.push_back(shard.empty() ? order.front() : shard.front());

  std::vector<std::vector<int64_t>> batches;
  auto cut = [&](std::vector<int64_t>::const_iterator begin, std::vector<int64_t>::const_iterator end) {
    for (auto it = begin; it < end; it += std::min<std::ptrdiff_t>(o.batch_size, end - it))
      batches.emplace_back(it, std::min(end, it + o.batch_size));
  };
  if (o.bucket_windows > 0) {
    // Windows of similar-length neighbours: sort each window by length, then cut it into batches.
    // bucket_windows x batch_size may not fit in 64 bits; a window as long as the shard is the same.
    const int64_t shard_size = static_cast<int64_t>(shard.size());
    const int64_t window = o.bucket_windows > shard_size / o.batch_size ? std::max<int64_t>(1, shard_size) : o.bucket_windows * o.batch_size;
    for (size_t w = 0; w < shard.size(); w += static_cast<size_t>(window)) {
      std::vector<int64_t> part(shard.begin() + static_cast<std::ptrdiff_t>(w),
                                shard.begin() + static_cast<std::ptrdiff_t>(std::min(shard.size(), w + static_cast<size_t>(window))));
      std::vector<std::pair<int64_t, int64_t>> keyed;
      for (int64_t i : part) keyed.emplace_back(dataset.length(i), i);
      std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t k = 0; k < part.size(); ++k) part[k] = keyed[k].second;
      cut(part.cbegin(), part.cend());
    }
  } else {
    cut(shard.cbegin(), shard.cend());
  }
  if (o.drop_last && !batches.empty() && static_cast<int64_t>(batches.back().size()) < o.batch_size) batches.pop_back();
  if (o.shuffle && o.bucket_windows > 0) {
    std::mt19937_64 rng = stream(o.seed, epoch, 1);
    shuffle(batches, rng);
  }
  return batches;
}

Batch collate(const Dataset& dataset, const std::vector<int64_t>& indices, const LoaderOptions& o) {
  std::vector<Item> items;
  Batch batch;
  std::set<std::string> names;
  for (int64_t index : indices) {
    Item item = dataset.get(index);
    std::string why = check_item(item, o);
    if (why.empty() && !items.empty()) {
      std::set<std::string> these;
      for (const auto& [name, t] : item) these.insert(name);
      if (these != names) why = "has different fields from the other items of its batch";
      for (const auto& [name, t] : item) {
        const at::Tensor& first = items.front().at(name);
        if (why.empty() && (t.scalar_type() != first.scalar_type() || !t.sizes().slice(1).equals(first.sizes().slice(1))))
          why = "field '" + name + "' is " + c10::str(t.sizes()) + " " + c10::toString(t.scalar_type()) +
                ", other items of its batch " + c10::str(first.sizes()) + " " + c10::toString(first.scalar_type());
      }
    }
    if (!why.empty()) {
      const std::string message = dataset.describe(index) + ": " + why;
      if (!o.skip_bad_items) throw DataError(message + " (data.skip_bad_items=true skips such items)");
      if (o.warn) o.warn(message + "; skipped");
      else std::cerr << "warning: " << message << "; skipped\n";
      continue;
    }
    if (items.empty())
      for (const auto& [name, t] : item) names.insert(name);
    items.push_back(std::move(item));
    batch.indices.push_back(index);
  }
  if (items.empty()) return batch;
  const int64_t b = static_cast<int64_t>(items.size());
  const bool pin = o.pin_memory && at::hasCUDA();
  for (const std::string& name : names) {
    int64_t longest = 0;
    for (const Item& item : items) longest = std::max(longest, item.at(name).size(0));
    const at::Tensor& first = items.front().at(name);
    std::vector<int64_t> shape{b, longest};
    shape.insert(shape.end(), first.sizes().begin() + 1, first.sizes().end());
    at::Tensor padded = at::zeros(shape, at::TensorOptions().dtype(first.scalar_type()).pinned_memory(pin));
    at::Tensor lengths = at::empty({b}, at::kLong);
    for (int64_t j = 0; j < b; ++j) {
      const at::Tensor& t = items[static_cast<size_t>(j)].at(name);
      padded[j].narrow(0, 0, t.size(0)).copy_(t);
      lengths[j] = t.size(0);
    }
    batch.fields[name] = padded;
    batch.lengths[name] = lengths;
  }
  return batch;
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  if (options_.workers < 0) throw std::invalid_argument("loader: workers must be >= 0");
  set_epoch(0);
}

Loader::~Loader() { stop_workers(); }

void Loader::set_epoch(int64_t epoch) {
  stop_workers();
  epoch_ = epoch;
  position_ = claimed_ = 0;
  plan_ = plan(*dataset_, options_, epoch);
  ready_.clear();
  failed_.clear();
  start_workers();
}

void Loader::restore(const LoaderState& state) {
  set_epoch(state.epoch);
  if (state.next_batch < 0 || state.next_batch > batches_per_epoch())
    throw std::invalid_argument("loader: saved position " + std::to_string(state.next_batch) + " is outside epoch " +
                                std::to_string(state.epoch) + "'s " + std::to_string(batches_per_epoch()) + " batches");
  stop_workers();
  position_ = claimed_ = state.next_batch;
  start_workers();
}

Batch Loader::build(int64_t number) const {
  Batch b = collate(*dataset_, plan_[static_cast<size_t>(number)], options_);
  b.epoch = epoch_;
  b.number = number;
  return b;
}

void Loader::start_workers() {
  stopping_ = false;
  const int64_t ahead = std::max(1, options_.workers * options_.prefetch_per_worker);
  for (int w = 0; w < options_.workers; ++w)
    workers_.emplace_back([this, ahead] {
      for (;;) {
        int64_t n;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          changed_.wait(lock, [&] {
            return stopping_ || (claimed_ < batches_per_epoch() && claimed_ < position_ + ahead);
          });
          if (stopping_) return;
          n = claimed_++;
        }
        try {
          Batch b = build(n);
          std::lock_guard<std::mutex> lock(mutex_);
          ready_[n] = std::move(b);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex_);
          failed_[n] = std::current_exception();
        }
        changed_.notify_all();
      }
    });
}

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  ready_.clear();
  failed_.clear();
}

std::optional<Batch> Loader::next() {
  while (position_ < batches_per_epoch()) {
    Batch b;
    if (options_.workers == 0) {
      b = build(position_);
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return ready_.count(position_) > 0 || failed_.count(position_) > 0; });
      auto failed = failed_.find(position_);
      if (failed != failed_.end()) {
        const std::exception_ptr e = failed->second;
        failed_.erase(failed);
        ++position_;
        lock.unlock();
        changed_.notify_all();
        std::rethrow_exception(e);
      }
      b = std::move(ready_[position_]);
      ready_.erase(position_);
    }
    ++position_;
    changed_.notify_all();
    if (!b.indices.empty()) return b;  // every item of it was skipped: go on to the next one
  }
  return std::nullopt;
}

}  // namespace wavetrain::data
