// libwavetrain_sentencepiece.so: Debian's libsentencepiece behind a C interface, loaded by
// tokenizer.cpp with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) instead of being linked.
//
// Why: Debian's libsentencepiece carries its own copy of protobuf-lite and exports it (1,602
// protobuf symbols), while Debian's LibTorch needs the system's libprotobuf.so.32. Linked into one
// program, whichever library comes first in the lookup order serves both: the system protobuf's
// start-up code then ran into sentencepiece's copy and crashed (SIGSEGV in
// ReflectionOps::FindInitializationErrors) before main. Loaded locally with deep binding,
// sentencepiece resolves protobuf to its own copy and nothing else sees it.
//
// Only C types cross this boundary. Errors come back as text in the caller's buffer.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

void put_error(const std::string& message, char* error, size_t error_size) {
  if (error == nullptr || error_size == 0) return;
  std::strncpy(error, message.c_str(), error_size - 1);
  error[error_size - 1] = '\0';
}

// The training sentences, from the caller's array.
class ArrayIterator : public sentencepiece::SentenceIterator {
 public:
  ArrayIterator(const char* const* sentences, const size_t* sizes, size_t count) : sentences_(sentences), sizes_(sizes), count_(count) {
    load();
  }
  bool done() const override { return index_ >= count_; }
  void Next() override {
    ++index_;
    load();
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void load() {
    if (!done()) value_.assign(sentences_[index_], sizes_[index_]);
  }
  const char* const* sentences_;
  const size_t* sizes_;
  size_t count_, index_ = 0;
  std::string value_;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* wt_spm_load(const char* path, const char* serialized, size_t serialized_size,
                                                         char* error, size_t error_size) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const sentencepiece::util::Status status =
      path != nullptr ? sp->Load(path) : sp->LoadFromSerializedProto(std::string(serialized, serialized_size));
  if (!status.ok()) {
    put_error(status.message(), error, error_size);
    delete sp;
    return nullptr;
  }
  return sp;
}

__attribute__((visibility("default"))) void wt_spm_free(void* sp) { delete static_cast<sentencepiece::SentencePieceProcessor*>(sp); }

__attribute__((visibility("default"))) int wt_spm_size(const void* sp) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(sp)->GetPieceSize();
}

__attribute__((visibility("default"))) int wt_spm_unk_id(const void* sp) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(sp)->unk_id();
}

// Copies piece `id` (NUL-terminated, truncated to out_size) and returns its full length.
__attribute__((visibility("default"))) size_t wt_spm_piece(const void* sp, int id, char* out, size_t out_size) {
  const std::string& p = static_cast<const sentencepiece::SentencePieceProcessor*>(sp)->IdToPiece(id);
  put_error(p, out, out_size);
  return p.size();
}

// Writes up to `capacity` ids and returns how many the text has (call again with more room when larger).
__attribute__((visibility("default"))) int wt_spm_encode(const void* sp, const char* text, size_t size, int* ids, int capacity) {
  const std::vector<int> v = static_cast<const sentencepiece::SentencePieceProcessor*>(sp)->EncodeAsIds(std::string(text, size));
  for (int i = 0; i < static_cast<int>(v.size()) && i < capacity; ++i) ids[i] = v[static_cast<size_t>(i)];
  return static_cast<int>(v.size());
}

// Writes the text (NUL-terminated, truncated to out_size) and returns its full length.
__attribute__((visibility("default"))) size_t wt_spm_decode(const void* sp, const int* ids, int count, char* out, size_t out_size) {
  const std::string text = static_cast<const sentencepiece::SentencePieceProcessor*>(sp)->DecodeIds(std::vector<int>(ids, ids + count));
  put_error(text, out, out_size);
  return text.size();
}

// Trains a model on `count` sentences with sentencepiece's options as key/value pairs. On success
// returns a malloc'ed serialized model (free with wt_spm_free_buffer) and its size; on failure
// nullptr and the message in `error`.
__attribute__((visibility("default"))) char* wt_spm_train(const char* const* sentences, const size_t* sizes, size_t count,
                                                          const char* const* keys, const char* const* values, size_t options,
                                                          unsigned seed, size_t* model_size, char* error, size_t error_size) {
  std::unordered_map<std::string, std::string> args;
  for (size_t i = 0; i < options; ++i) args[keys[i]] = values[i];
  sentencepiece::SetRandomGeneratorSeed(seed);
  ArrayIterator it(sentences, sizes, count);
  std::string model;
  const sentencepiece::util::Status status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  if (!status.ok()) {
    put_error(status.message(), error, error_size);
    return nullptr;
  }
  char* out = static_cast<char*>(std::malloc(model.size()));
  std::memcpy(out, model.data(), model.size());
  *model_size = model.size();
  return out;
}

__attribute__((visibility("default"))) void wt_spm_free_buffer(char* buffer) { std::free(buffer); }

}  // extern "C"
