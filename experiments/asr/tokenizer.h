// The ASR tokenizer: a sentencepiece model (Debian's libsentencepiece) trained on a store's training
// transcripts with icefall's conventions, so that its files drop into icefall's tools and back:
// id 0 is "<blk>" (the transducer's blank), 1 "<sos/eos>", 2 "<unk>"; no BOS/EOS; character
// coverage 1.0 (every letter of the transcripts is a piece); unigram by default, BPE on request.
//
// Files, in the directory given (the store's by default): bpe.model (sentencepiece's own format,
// which Python's sentencepiece loads) and tokens.txt ("piece id" per line, icefall's and k2's
// symbol table).
//
// sentencepiece is reached through libwavetrain_sentencepiece.so (sentencepiece_module.cpp says
// why it is loaded at run time rather than linked): found beside the build's experiments/, or at
// $WAVETRAIN_SENTENCEPIECE_MODULE.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace wavetrain::experiments::asr {

struct TokenizerTraining {
  std::string store;           // an ASR store; its "train" split's "text" field is the input
  std::string output_dir;      // empty: the store's directory
  int vocab_size = 500;
  std::string model_type = "unigram";  // or "bpe"
  uint32_t seed = 0;
};

struct TokenizerFiles {
  std::string model, tokens;
  int vocab_size = 0;
  int64_t sentences = 0;
};

// Throws std::runtime_error naming the store for a missing split or field, and for a vocabulary the
// transcripts cannot fill (with sentencepiece's largest possible size).
TokenizerFiles train_tokenizer(const TokenizerTraining& options);

class Tokenizer {
 public:
  // Throws std::runtime_error naming the file when it is not a sentencepiece model with <blk> at 0.
  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;  // ids of <blk> and other control pieces are skipped
  int vocab_size() const;
  int blank_id() const { return 0; }
  int unk_id() const;
  std::string piece(int id) const;

 private:
  void* sp_ = nullptr;  // the module's processor
  std::string path_;
};

}  // namespace wavetrain::experiments::asr
