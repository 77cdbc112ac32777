// The ASR experiment's data: the sentence generator, the synthetic corpus (espeak-ng, flite and festival run
// for real), the tokenizer, and the `data asr-*` commands.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "data/hdf5_store.h"
#include "experiments/asr/audio_cache.h"
#include "experiments/asr/corpus_synth.h"
#include "experiments/asr/sentences.h"
#include "experiments/asr/tokenizer.h"
#include "tests/run_process.h"

namespace asr = wavetrain::experiments::asr;
namespace fs = std::filesystem;
using wavetrain::data::DatasetReader;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_asr_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string text_of(const at::Tensor& bytes) {
  return {reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel())};
}

// A small corpus, made once for the tests that only read it.
const std::string& small_corpus() {
  static const std::string store = [] {
    asr::SynthOptions o;
    o.dir = fresh_dir("small").string();
    o.seed = 7;
    o.train = 24;
    o.dev = 4;
    o.test = 6;
    o.jobs = 2;
    return asr::synthesize_corpus(o).store;
  }();
  return store;
}

}  // namespace

TEST(AsrSentences, NumbersAreSpelledAsSpoken) {
  EXPECT_EQ(asr::spell_number(0), "zero");
  EXPECT_EQ(asr::spell_number(13), "thirteen");
  EXPECT_EQ(asr::spell_number(40), "forty");
  EXPECT_EQ(asr::spell_number(115), "one hundred fifteen");
  EXPECT_EQ(asr::spell_number(999), "nine hundred ninety nine");
  EXPECT_EQ(asr::spell_ordinal(1), "first");
  EXPECT_EQ(asr::spell_ordinal(12), "twelfth");
  EXPECT_EQ(asr::spell_ordinal(20), "twentieth");
  EXPECT_EQ(asr::spell_ordinal(23), "twenty third");
  EXPECT_EQ(asr::spell_ordinal(30), "thirtieth");
}

TEST(AsrSentences, SeededAndWithinTheVocabulary) {
  const std::vector<std::string> vocabulary = asr::SentenceGenerator::vocabulary();
  const std::set<std::string> words(vocabulary.begin(), vocabulary.end());
  EXPECT_GE(words.size(), 300u);
  EXPECT_LE(words.size(), 3000u);
  asr::SentenceGenerator a(3), b(3), c(4);
  int differ = 0;
  std::set<std::string> used;
  for (int i = 0; i < 2000; ++i) {
    const std::string s = a.next();
    EXPECT_EQ(s, b.next());
    differ += s != c.next();
    ASSERT_EQ(asr::normalize_transcript(s), s) << "not in transcript form: '" << s << "'";
    std::istringstream in(s);
    for (std::string w; in >> w;) {
      EXPECT_TRUE(words.count(w)) << "'" << w << "' of '" << s << "' is not in vocabulary()";
      used.insert(w);
    }
  }
  EXPECT_GT(differ, 1900);
  EXPECT_GT(used.size(), words.size() / 2) << "2000 sentences use few of the words";
}

TEST(AsrSentences, UserTextIsNormalisedAndDigitsAreRefused) {
  bool digit = true;
  EXPECT_EQ(asr::normalize_transcript("  Hello, World!  It's  FINE.", &digit), "hello world it's fine");
  EXPECT_FALSE(digit);
  asr::normalize_transcript("call me at 7", &digit);
  EXPECT_TRUE(digit);
  EXPECT_EQ(asr::normalize_transcript(" ... "), "");

  const fs::path dir = fresh_dir("text");
  std::ofstream(dir / "s.txt") << "Set the alarm.\n\n  \nmeet at 10 o'clock\n";
  try {
    asr::read_sentence_file((dir / "s.txt").string());
    FAIL() << "a digit was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("s.txt:4: a digit"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "ok.txt") << "Set the alarm.\n\n  \nmeet at ten\n";
  EXPECT_EQ(asr::read_sentence_file((dir / "ok.txt").string()), (std::vector<std::string>{"set the alarm", "meet at ten"}));
  std::ofstream(dir / "empty.txt") << "\n  ,\n";
  EXPECT_THROW(asr::read_sentence_file((dir / "empty.txt").string()), std::runtime_error);
}

TEST(AsrCorpus, SplitsShareNoVoiceAndNoRecordedSpeaker) {
  const auto voices = [](const std::string& split) {
    std::set<std::string> ids;
    for (const asr::Voice& v : asr::split_voices(split)) ids.insert(v.id());
    return ids;
  };
  const auto speakers = [](const std::string& split) {
    std::set<std::string> ids;
    for (const asr::Voice& v : asr::split_voices(split)) ids.insert(v.speaker);
    return ids;
  };
  const auto engines = [](const std::string& split) {
    std::set<std::string> ids;
    for (const asr::Voice& v : asr::split_voices(split)) ids.insert(v.engine);
    return ids;
  };
  const auto train = voices("train"), dev = voices("dev"), unseen = voices("test-unseen-voices"), held_out = voices("test-held-out-engine");
  EXPECT_EQ(train, dev);
  EXPECT_GE(train.size(), 40u);
  EXPECT_GE(unseen.size(), 20u);
  for (const std::string& v : unseen) EXPECT_FALSE(train.count(v)) << v;
  for (const std::string& v : held_out) {
    EXPECT_FALSE(train.count(v)) << v;
    EXPECT_EQ(v.rfind("festival:", 0), 0u) << v;
  }
  // The engines: espeak-ng and flite are trained on and tested with new voices; festival is held out.
  EXPECT_EQ(engines("train"), (std::set<std::string>{"espeak-ng", "flite"}));
  EXPECT_EQ(engines("test-unseen-voices"), (std::set<std::string>{"espeak-ng", "flite"}));
  EXPECT_EQ(engines("test-held-out-engine"), std::set<std::string>{"festival"});
  // No recorded speaker is both trained on and tested: flite's slt and festival's us-slt-hts are
  // one person (CMU ARCTIC's slt), as are flite's kal, kal16 and festival's kal_diphone.
  for (const std::string test : {"test-unseen-voices", "test-held-out-engine"})
    for (const std::string& who : speakers(test)) EXPECT_FALSE(speakers("train").count(who)) << test << ": " << who;
  std::map<std::string, std::string> speaker_of;
  for (const std::string& split : asr::corpus_splits())
    for (const asr::Voice& v : asr::split_voices(split)) speaker_of[v.id()] = v.speaker;
  EXPECT_EQ(speaker_of["flite:slt"], speaker_of["festival:cmu_us_slt_arctic_hts"]);
  EXPECT_EQ(speaker_of["flite:kal"], speaker_of["festival:kal_diphone"]);
  EXPECT_EQ(speaker_of["flite:kal16"], speaker_of["festival:kal_diphone"]);
  // Unseen means the variant itself is new, not only its pairing with an accent.
  std::set<std::string> train_variants;
  for (const std::string& v : train)
    if (v.find('+') != std::string::npos) train_variants.insert(v.substr(v.find('+')));
  for (const std::string& v : unseen)
    if (v.find('+') != std::string::npos) {
      EXPECT_FALSE(train_variants.count(v.substr(v.find('+')))) << v;
    }
  EXPECT_THROW(asr::split_voices("test"), std::invalid_argument);
}

TEST(AsrCorpus, StoreHoldsWhatWasSpokenByWhom) {
  const DatasetReader store(small_corpus());
  ASSERT_EQ(std::get<int64_t>(*store.attribute("sample_rate")), 16000);
  const nlohmann::json record = nlohmann::json::parse(std::get<std::string>(*store.attribute("corpus")));
  EXPECT_EQ(record["seed"], 7);
  EXPECT_EQ(record["held_out_engine"], "festival");
  EXPECT_NE(record["festival"].get<std::string>().find("2.5"), std::string::npos) << record["festival"];
  std::map<std::string, std::set<std::string>> speakers, engines;
  for (const std::string& split : asr::corpus_splits()) {
    const int64_t n = split == "train" ? 24 : split == "dev" ? 4 : 6;
    ASSERT_EQ(store.size(split), n) << split;
    std::map<std::string, std::string> offered;  // voice -> speaker
    for (const asr::Voice& v : asr::split_voices(split)) offered[v.id()] = v.speaker;
    double seconds = 0;
    for (int64_t i = 0; i < n; ++i) {
      const auto item = store.item(split, i);
      const std::string text = text_of(item.at("text")), voice = text_of(item.at("voice"));
      EXPECT_FALSE(text.empty());
      EXPECT_EQ(asr::normalize_transcript(text), text);
      ASSERT_TRUE(offered.count(voice)) << split << ": " << voice;
      EXPECT_EQ(text_of(item.at("speaker")), offered[voice]) << split << ": " << voice;
      speakers[split].insert(voice);
      engines[split].insert(voice.substr(0, voice.find(':')));
      const at::Tensor audio = item.at("audio");
      ASSERT_EQ(audio.dim(), 1);
      // A spoken sentence of 3 to 20 words lasts between 0.5 and 15 s, and is not silence.
      EXPECT_GT(audio.numel(), 8000) << split << " " << i;
      EXPECT_LT(audio.numel(), 16000 * 15) << split << " " << i;
      EXPECT_GT(audio.abs().max().item<double>(), 0.2);
      EXPECT_LE(audio.abs().max().item<double>(), 0.9 + 1e-6);
      EXPECT_DOUBLE_EQ(item.at("duration").item<double>(), static_cast<double>(audio.numel()) / 16000);
      seconds += static_cast<double>(audio.numel()) / 16000;
      EXPECT_EQ(store.id(split, i), split + "-" + std::string(6 - std::to_string(i).size(), '0') + std::to_string(i));
    }
    EXPECT_NEAR(record["splits"][split]["seconds"].get<double>(), seconds, 1e-6);
    const std::vector<std::string> used = record["splits"][split]["voices_used"];
    EXPECT_EQ(std::set<std::string>(used.begin(), used.end()), speakers[split]);
  }
  for (const std::string& v : speakers["test-unseen-voices"]) EXPECT_FALSE(speakers["train"].count(v)) << v;
  for (const std::string& v : speakers["test-held-out-engine"]) EXPECT_FALSE(speakers["train"].count(v)) << v;
  EXPECT_GE(speakers["train"].size(), 8u) << "24 utterances should come from many voices";
  // Each engine of a split gets its share: 24 training utterances from both of train's engines.
  EXPECT_EQ(engines["train"], (std::set<std::string>{"espeak-ng", "flite"}));
  EXPECT_EQ(engines["test-held-out-engine"], std::set<std::string>{"festival"});
}

TEST(AsrCorpus, SameSeedSameCorpusWhateverTheThreads) {
  asr::SynthOptions o;
  o.seed = 7;
  o.train = 6;
  o.dev = 2;
  o.test = 2;
  o.jobs = 1;
  o.dir = fresh_dir("again").string();
  const DatasetReader again(asr::synthesize_corpus(o).store), first(small_corpus());
  // The small corpus has more training utterances; a split's utterances depend only on the seed and
  // their index, so the first ones are the same.
  for (const std::string& split : asr::corpus_splits())
    for (int64_t i = 0; i < again.size(split); ++i) {
      const auto a = again.item(split, i), b = first.item(split, i);
      EXPECT_EQ(text_of(a.at("text")), text_of(b.at("text"))) << split << " " << i;
      EXPECT_EQ(text_of(a.at("speaker")), text_of(b.at("speaker"))) << split << " " << i;
      EXPECT_TRUE(at::equal(a.at("audio"), b.at("audio"))) << split << " " << i;
    }
  o.seed = 8;
  o.dir = fresh_dir("other_seed").string();
  const DatasetReader other(asr::synthesize_corpus(o).store);
  int same = 0;
  for (int64_t i = 0; i < other.size("train"); ++i) same += text_of(other.item("train", i).at("text")) == text_of(first.item("train", i).at("text"));
  EXPECT_LT(same, 2);
}

TEST(AsrCorpus, NoiseAndReverbChangeTheAudioNotTheText) {
  asr::SynthOptions o;
  o.seed = 7;
  o.train = 3;
  o.dev = 0;
  o.test = 0;
  o.noise = true;
  o.reverb = true;
  o.dir = fresh_dir("noisy").string();
  const DatasetReader noisy(asr::synthesize_corpus(o).store), clean(small_corpus());
  for (int64_t i = 0; i < 3; ++i) {
    const auto a = noisy.item("train", i), b = clean.item("train", i);
    EXPECT_EQ(text_of(a.at("text")), text_of(b.at("text")));
    EXPECT_FALSE(at::equal(a.at("audio"), b.at("audio")));
    // Noise at <= 30 dB SNR fills the pauses that espeak-ng leaves silent.
    const at::Tensor head = a.at("audio").narrow(0, 0, 160);
    EXPECT_GT(head.abs().max().item<double>(), 1e-4);
  }
}

TEST(AsrCorpus, MissingProgramsAreNamedWithTheirPackage) {
  const fs::path dir = fresh_dir("path");
  fs::create_symlink("/usr/bin/espeak-ng", dir / "espeak-ng");
  const std::string old = std::getenv("PATH");
  setenv("PATH", dir.c_str(), 1);
  try {
    asr::check_synth_programs(/*reverb=*/true);
    ADD_FAILURE() << "no error without flite, festival and sox";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("flite (Debian package flite)"), std::string::npos) << m;
    EXPECT_NE(m.find("text2wave (Debian package festival)"), std::string::npos) << m;
    EXPECT_NE(m.find("sox (Debian package sox)"), std::string::npos) << m;
    EXPECT_EQ(m.find("espeak-ng (Debian"), std::string::npos) << m;
  }
  setenv("PATH", old.c_str(), 1);
  EXPECT_NO_THROW(asr::check_synth_programs(true));
}

TEST(AsrTokenizer, IcefallConventionsAndRoundTrip) {
  const fs::path dir = fresh_dir("bpe");
  asr::TokenizerTraining t;
  t.store = small_corpus();
  t.output_dir = dir.string();
  t.vocab_size = 60;
  const asr::TokenizerFiles files = asr::train_tokenizer(t);
  EXPECT_EQ(files.vocab_size, 60);
  EXPECT_EQ(files.sentences, 24);
  const asr::Tokenizer tok(files.model);
  EXPECT_EQ(tok.piece(0), "<blk>");
  EXPECT_EQ(tok.piece(1), "<sos/eos>");
  EXPECT_EQ(tok.piece(2), "<unk>");
  EXPECT_EQ(tok.unk_id(), 2);
  // tokens.txt is "piece id" for every id.
  std::ifstream tokens(files.tokens);
  std::string piece;
  int id = -1, lines = 0;
  while (tokens >> piece >> id) {
    EXPECT_EQ(id, lines);
    EXPECT_EQ(piece, tok.piece(id));
    ++lines;
  }
  EXPECT_EQ(lines, 60);
  // Every training transcript encodes without <blk>/<unk> (character coverage 1.0) and decodes
  // back to itself. (Other splits may hold letters these 24 sentences lack: those become <unk>.)
  const DatasetReader store(small_corpus());
  for (const char* split : {"train"})
    for (int64_t i = 0; i < store.size(split); ++i) {
      const std::string text = text_of(store.item(split, i).at("text"));
      const std::vector<int> ids = tok.encode(text);
      ASSERT_FALSE(ids.empty());
      for (int x : ids) {
        EXPECT_GT(x, 2) << text;
        EXPECT_LT(x, 60) << text;
      }
      EXPECT_EQ(tok.decode(ids), text);
    }
  std::vector<int> with_blanks = tok.encode("call sarah");
  with_blanks.insert(with_blanks.begin(), 0);
  with_blanks.push_back(0);
  EXPECT_EQ(tok.decode(with_blanks), "call sarah");
  // Same transcripts, same model.
  t.output_dir = (dir / "again").string();
  const asr::TokenizerFiles again = asr::train_tokenizer(t);
  std::ifstream a(files.model, std::ios::binary), b(again.model, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}));
}

TEST(AsrTokenizer, BadInputIsNamed) {
  const fs::path dir = fresh_dir("bpe_bad");
  asr::TokenizerTraining t;
  t.store = small_corpus();
  t.output_dir = dir.string();
  t.vocab_size = 5000;
  try {
    asr::train_tokenizer(t);
    FAIL() << "a 5000-piece vocabulary from 24 sentences";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(small_corpus()), std::string::npos) << m;
    EXPECT_NE(m.find("Vocabulary size too high (5000). Please set it to a value <= "), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(dir / "bpe.model"));

  // A store without transcripts (an amp capture store, say).
  {
    wavetrain::data::DatasetWriter w((dir / "audio_only.h5").string());
    w.add("train", {{"audio", at::zeros({16000})}});
    w.finish();
  }
  t.store = (dir / "audio_only.h5").string();
  t.vocab_size = 50;
  try {
    asr::train_tokenizer(t);
    FAIL() << "a store without transcripts";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("audio_only.h5: the 'train' split has no transcripts"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "not_a_model") << "hello";
  EXPECT_THROW(asr::Tokenizer((dir / "not_a_model").string()), std::runtime_error);
}

TEST(AsrCli, SynthThenBpe) {
  const fs::path dir = fresh_dir("cli");
  auto r = wavetrain::testing::run_shell("'" WAVETRAIN_BINARY "' data asr-synth -o '" + dir.string() +
                                         "/corpus' --train 8 --dev 2 --test 2 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("test-unseen-voices"), std::string::npos) << r.out;
  r = wavetrain::testing::run_shell("'" WAVETRAIN_BINARY "' data asr-bpe '" + dir.string() + "/corpus/corpus.h5' --vocab 40");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "corpus" / "bpe.model"));
  EXPECT_TRUE(fs::exists(dir / "corpus" / "tokens.txt"));
  r = wavetrain::testing::run_shell("'" WAVETRAIN_BINARY "' data asr-bpe '" + dir.string() + "/corpus/corpus.h5' --vocab 4000");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("corpus.h5: cannot train a 4000-piece unigram tokenizer"), std::string::npos) << r.err;
}

// Decoded audio kept until the budget is spent: the same values as the store's, the kept items
// handed out again without a read (the same tensor), the first that does not fit closes the cache,
// and two threads reading at once get equal audio.
TEST(AsrAudioCache, KeepsDecodedItemsWithinItsBudget) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_audio_cache_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    wavetrain::data::DatasetWriter w((dir / "s.h5").string());
    for (int i = 0; i < 6; ++i) w.add("train", {{"audio", at::arange(1000 * (i + 1), at::kFloat) / 1000.0 + i}});
    w.add("dev", {{"audio", at::full({500}, 0.25f)}});
    w.finish();
  }
  const auto store = std::make_shared<wavetrain::data::DatasetReader>((dir / "s.h5").string());
  // Items 0, 1 and 2 hold 1000, 2000 and 3000 floats: 24,000 bytes; item 3's 16,000 more do not fit.
  asr::AudioCache cache(store, 30000);
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 6; ++i) {
      const at::Tensor a = cache.audio("train", i);
      EXPECT_TRUE(at::equal(a, store->field("train", "audio", i))) << i;
      const bool kept = i < 3;
      EXPECT_EQ(a.data_ptr() == cache.audio("train", i).data_ptr(), kept) << i;
    }
  EXPECT_EQ(cache.items(), 3);
  EXPECT_EQ(cache.bytes(), 24000);
  // Closed: a small item read now is not kept either.
  EXPECT_TRUE(at::equal(cache.audio("dev", 0), at::full({500}, 0.25f)));
  EXPECT_EQ(cache.items(), 3);

  asr::AudioCache shared(store, 1 << 20);
  std::vector<at::Tensor> got(12);
  std::thread other([&] {
    for (int i = 0; i < 6; ++i) got[static_cast<size_t>(6 + i)] = shared.audio("train", i);
  });
  for (int i = 0; i < 6; ++i) got[static_cast<size_t>(i)] = shared.audio("train", i);
  other.join();
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(at::equal(got[static_cast<size_t>(i)], got[static_cast<size_t>(6 + i)])) << i;
  EXPECT_EQ(shared.items(), 6);
  EXPECT_EQ(shared.bytes(), 4 * 1000 * (1 + 2 + 3 + 4 + 5 + 6));
  asr::AudioCache off(store, 0);
  EXPECT_NE(off.audio("train", 0).data_ptr(), off.audio("train", 0).data_ptr());
  EXPECT_EQ(off.items(), 0);
  fs::remove_all(dir);
}
