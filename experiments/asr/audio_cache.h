// Decoded audio of an ASR store, kept in memory up to a byte budget (asr.cache_audio_mb).
//
// Why: the store keeps audio gzip-compressed in chunks of 65,536 samples (data/hdf5_store.h), so
// reading one utterance decodes one or two whole chunks, every epoch again. In the ASR recipe that
// was about 5% of the CPU (perf: zlib's inflate), spent on the thread that makes the next batch
// while both cores train this one. Items are kept as they are first read until the budget is
// spent; later items are read from the store each time, as before.
//
// The tensors handed out are shared with the cache and must not be written: everything that
// follows (speed perturbation, augmentation, test conditions, features) works out of place.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "data/hdf5_store.h"

namespace wavetrain::experiments::asr {

class AudioCache {
 public:
  AudioCache(std::shared_ptr<data::DatasetReader> store, int64_t budget_bytes);

  // The "audio" field of `item` in `split`; thread-safe (the store is read outside the lock).
  at::Tensor audio(const std::string& split, int64_t item);

  int64_t bytes() const;  // what the kept items hold
  int64_t items() const;

 private:
  std::shared_ptr<data::DatasetReader> store_;
  int64_t budget_bytes_;
  mutable std::mutex mutex_;
  int64_t bytes_ = 0;
  bool full_ = false;
  std::map<std::pair<std::string, int64_t>, at::Tensor> kept_;
};

}  // namespace wavetrain::experiments::asr
