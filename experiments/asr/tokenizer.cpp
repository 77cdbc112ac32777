// The ASR tokenizer (tokenizer.h), through libwavetrain_sentencepiece.so.
#include "experiments/asr/tokenizer.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "data/hdf5_store.h"
#include "experiments/asr/corpus_synth.h"
#include "trainer/serialization/atomic_file.h"

namespace wavetrain::experiments::asr {
namespace {

namespace fs = std::filesystem;

// The module's C interface (sentencepiece_module.cpp).
struct Module {
  void* (*load)(const char*, const char*, size_t, char*, size_t);
  void (*free)(void*);
  int (*size)(const void*);
  int (*unk_id)(const void*);
  size_t (*piece)(const void*, int, char*, size_t);
  int (*encode)(const void*, const char*, size_t, int*, int);
  size_t (*decode)(const void*, const int*, int, char*, size_t);
  char* (*train)(const char* const*, const size_t*, size_t, const char* const*, const char* const*, size_t, unsigned, size_t*, char*,
                 size_t);
  void (*free_buffer)(char*);
};

std::string module_path() {
  if (const char* env = std::getenv("WAVETRAIN_SENTENCEPIECE_MODULE")) return env;
  // Beside this library: in the build tree and in an installed prefix's lib/ alike.
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&module_path), &self) != 0 && self.dli_fname) {
    const fs::path beside = fs::path(self.dli_fname).parent_path() / "libwavetrain_sentencepiece.so";
    if (fs::exists(beside)) return beside.string();
  }
#ifdef WAVETRAIN_SENTENCEPIECE_MODULE
  if (fs::exists(WAVETRAIN_SENTENCEPIECE_MODULE)) return WAVETRAIN_SENTENCEPIECE_MODULE;
#endif
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path().parent_path() / "experiments" / "libwavetrain_sentencepiece.so").string();
}

const Module& module() {
  static Module m;
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    const std::string path = module_path();
    // Local and deep-bound: sentencepiece's protobuf copy must serve sentencepiece only.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
      failure = "cannot load the sentencepiece module " + path + ": " + dlerror() +
                " (build it with the rest of wavetrain, or set WAVETRAIN_SENTENCEPIECE_MODULE)";
      return;
    }
    const auto get = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(handle, name));
      if (!f && failure.empty()) failure = path + ": no symbol " + name;
    };
    get(m.load, "wt_spm_load");
    get(m.free, "wt_spm_free");
    get(m.size, "wt_spm_size");
    get(m.unk_id, "wt_spm_unk_id");
    get(m.piece, "wt_spm_piece");
    get(m.encode, "wt_spm_encode");
    get(m.decode, "wt_spm_decode");
    get(m.train, "wt_spm_train");
    get(m.free_buffer, "wt_spm_free_buffer");
  });
  if (!failure.empty()) throw std::runtime_error(failure);
  return m;
}

std::string piece_of(const void* sp, int id) {
  char buffer[256];
  const size_t n = module().piece(sp, id, buffer, sizeof buffer);
  if (n < sizeof buffer) return std::string(buffer, n);
  std::string big(n + 1, '\0');
  module().piece(sp, id, big.data(), big.size());
  big.resize(n);
  return big;
}

}  // namespace

TokenizerFiles train_tokenizer(const TokenizerTraining& o) {
  if (o.model_type != "unigram" && o.model_type != "bpe")
    throw std::invalid_argument("asr-bpe: --type must be unigram or bpe, got '" + o.model_type + "'");
  if (o.vocab_size < 4)
    throw std::invalid_argument("asr-bpe: --vocab must be at least 4 (<blk>, <sos/eos>, <unk> and one piece), got " +
                                std::to_string(o.vocab_size));
  const data::DatasetReader store(o.store);
  const std::vector<std::string> splits = store.splits();
  if (std::find(splits.begin(), splits.end(), "train") == splits.end())
    throw std::runtime_error(o.store + ": no 'train' split to train the tokenizer on");
  const std::vector<std::string> fields = store.fields("train");
  if (std::find(fields.begin(), fields.end(), "text") == fields.end())
    throw std::runtime_error(o.store + ": the 'train' split has no transcripts (no 'text' field); an ASR store from "
                             "`wavetrain data asr-synth` or `asr-import` has them");
  const int64_t n = store.size("train");
  if (n == 0) throw std::runtime_error(o.store + ": the 'train' split is empty");

  std::vector<std::string> texts;
  for (int64_t i = 0; i < n; ++i) texts.push_back(utf8_field(store.field("train", "text", i)));
  std::vector<const char*> sentences;
  std::vector<size_t> sizes;
  for (const std::string& t : texts) {
    sentences.push_back(t.data());
    sizes.push_back(t.size());
  }
  // icefall's train_bpe_model.py settings; one thread, so that the same transcripts give the same model.
  const std::vector<std::pair<std::string, std::string>> args = {
      {"vocab_size", std::to_string(o.vocab_size)}, {"model_type", o.model_type}, {"character_coverage", "1.0"},
      {"user_defined_symbols", "<blk>,<sos/eos>"}, {"unk_id", "2"}, {"bos_id", "-1"}, {"eos_id", "-1"},
      {"input_sentence_size", "100000000"}, {"num_threads", "1"}, {"model_prefix", ""}, {"minloglevel", "1"},
  };
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : args) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  char error[1024] = "";
  size_t model_size = 0;
  char* model = module().train(sentences.data(), sizes.data(), sentences.size(), keys.data(), values.data(), keys.size(),
                               o.seed + 1, &model_size, error, sizeof error);  // seed 0 would mean "random" to sentencepiece
  if (!model)
    // "Vocabulary size is too high (5000). Please set it to a value <= 812." and the like.
    throw std::runtime_error(o.store + ": cannot train a " + std::to_string(o.vocab_size) + "-piece " + o.model_type +
                             " tokenizer on its " + std::to_string(n) + " training transcripts: " + error);
  const std::string serialized(model, model_size);
  module().free_buffer(model);

  const fs::path dir = o.output_dir.empty() ? fs::path(o.store).parent_path() : fs::path(o.output_dir);
  if (!dir.empty()) fs::create_directories(dir);
  TokenizerFiles files;
  files.model = (dir / "bpe.model").string();
  files.tokens = (dir / "tokens.txt").string();
  files.sentences = n;
  void* sp = module().load(nullptr, serialized.data(), serialized.size(), error, sizeof error);
  if (!sp) throw std::runtime_error(files.model + ": sentencepiece cannot read the model it made: " + error);
  std::string table;
  files.vocab_size = module().size(sp);
  for (int id = 0; id < files.vocab_size; ++id) table += piece_of(sp, id) + " " + std::to_string(id) + "\n";
  module().free(sp);
  write_file_atomic(files.model, serialized);
  write_file_atomic(files.tokens, table);
  return files;
}

Tokenizer::Tokenizer(const std::string& model_path) : path_(model_path) {
  if (!fs::exists(model_path))
    throw std::runtime_error(model_path + ": no such tokenizer model (make one with `wavetrain data asr-bpe STORE`)");
  char error[1024] = "";
  sp_ = module().load(model_path.c_str(), nullptr, 0, error, sizeof error);
  if (!sp_) throw std::runtime_error(model_path + ": not a sentencepiece model: " + error);
  if (module().size(sp_) < 1 || piece_of(sp_, 0) != "<blk>") {
    const std::string first = module().size(sp_) > 0 ? piece_of(sp_, 0) : "";
    module().free(sp_);
    throw std::runtime_error(model_path + ": expected the blank <blk> at id 0 (icefall's convention), found '" + first + "'");
  }
}

Tokenizer::~Tokenizer() {
  if (sp_) module().free(sp_);
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids(text.size() + 8);
  const int n = module().encode(sp_, text.data(), text.size(), ids.data(), static_cast<int>(ids.size()));
  if (n > static_cast<int>(ids.size())) {
    ids.resize(static_cast<size_t>(n));
    module().encode(sp_, text.data(), text.size(), ids.data(), n);
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  // <blk> and <sos/eos> are user-defined pieces to sentencepiece, which would print them; they are
  // never text.
  std::vector<int> kept;
  const int size = module().size(sp_);
  for (int id : ids)
    if (id > 1 && id < size) kept.push_back(id);
  std::string out(256, '\0');
  const size_t n = module().decode(sp_, kept.data(), static_cast<int>(kept.size()), out.data(), out.size());
  if (n >= out.size()) {
    out.assign(n + 1, '\0');
    module().decode(sp_, kept.data(), static_cast<int>(kept.size()), out.data(), out.size());
  }
  out.resize(n);
  return out;
}

int Tokenizer::vocab_size() const { return module().size(sp_); }
int Tokenizer::unk_id() const { return module().unk_id(sp_); }
std::string Tokenizer::piece(int id) const { return piece_of(sp_, id); }

}  // namespace wavetrain::experiments::asr
