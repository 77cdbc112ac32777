#include "experiments/asr/audio_cache.h"

namespace wavetrain::experiments::asr {

AudioCache::AudioCache(std::shared_ptr<data::DatasetReader> store, int64_t budget_bytes)
    : store_(std::move(store)), budget_bytes_(budget_bytes) {}

at::Tensor AudioCache::audio(const std::string& split, int64_t item) {
  const std::pair<std::string, int64_t> key{split, item};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = kept_.find(key); it != kept_.end()) return it->second;
  }
  at::Tensor audio = store_->field(split, "audio", item);
  const int64_t size = static_cast<int64_t>(audio.numel()) * static_cast<int64_t>(audio.element_size());
  std::lock_guard<std::mutex> lock(mutex_);
  // Two threads may have read the same item: the one kept first is the one every caller gets.
  if (const auto it = kept_.find(key); it != kept_.end()) return it->second;
  if (full_ || bytes_ + size > budget_bytes_) full_ = true;  // the first item that does not fit closes the cache
  else kept_.emplace(key, audio), bytes_ += size;
  return audio;
}

int64_t AudioCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

int64_t AudioCache::items() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(kept_.size());
}

}  // namespace wavetrain::experiments::asr
