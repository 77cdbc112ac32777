// `wavetrain eval --split` and `wavetrain transcribe` on an ASR run, as a user runs them: icefall's
// files whose counts sclite agrees with, both decoding methods in the summary, long audio cut in
// its pauses, and bad input named with nothing written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "data/audio_io.h"
#include "data/hdf5_store.h"
#include "experiments/asr/asr_task.h"
#include "experiments/asr/corpus_synth.h"
#include "experiments/asr/transcribe.h"
#include "experiments/asr/wer.h"
#include "tests/run_process.h"
#include "trainer/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/config/compose.h"
#include "trainer/config/yaml_io.h"

namespace fs = std::filesystem;
using wavetrain::testing::ProcessResult;

namespace {

namespace asr = wavetrain::experiments::asr;

ProcessResult wavetrain_in(const fs::path& dir, const std::string& args) {
  return wavetrain::testing::run_shell("cd '" + dir.string() + "' && '" WAVETRAIN_BINARY "' " + args);
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Bursts of noise ("words", 0.3 to 0.9 s) with silences between them (0.2 to 0.5 s) after 1 s of
// silence, then 30 s of speech-like noise without a pause: every word lies whole in one piece; a
// silence of 0.3 s or more ends a piece, which keeps 0.3 s of it, and the next piece starts where
// the silence ends; the leading silence is left out; the pauseless stretch is cut into pieces no
// longer than the limit.
TEST(AsrTranscribe, PiecesAreTheSpeechBetweenPausesAndNoLongerThanTheLimit) {
  at::manual_seed(3);
  std::vector<at::Tensor> parts{at::zeros({16000})};
  std::vector<std::pair<int64_t, int64_t>> words, silences;
  int64_t at_sample = 16000;
  for (int w = 0; w < 60; ++w) {
    const int64_t word = 4800 + (w * 7919) % 9600, gap = 3200 + (w * 104729) % 4800;
    parts.push_back(at::randn({word}) * 0.3);
    parts.push_back(at::zeros({gap}));
    words.emplace_back(at_sample, at_sample + word);
    silences.emplace_back(at_sample + word, at_sample + word + gap);
    at_sample += word + gap;
  }
  const int64_t pauseless = at_sample;
  parts.push_back(at::randn({30 * 16000}) * 0.3 * (1 + at::sin(at::arange(30 * 16000) / 800.0)));  // loud and soft, never silent
  const at::Tensor audio = at::cat(parts);
  for (const double limit : {4.0, 10.0}) {
    asr::TranscribeOptions o;
    o.max_piece_seconds = limit;
    o.cut_search_seconds = 3;
    const std::vector<std::pair<int64_t, int64_t>> pieces = asr::speech_pieces(audio, o);
    ASSERT_FALSE(pieces.empty());
    EXPECT_GE(pieces.front().first, 16000 - 400);  // the leading second of silence, to a 25 ms frame
    for (const auto& [from, to] : words)
      EXPECT_EQ(std::count_if(pieces.begin(), pieces.end(), [&](const auto& p) { return p.first <= from && to <= p.second; }), 1)
          << "word " << from << "-" << to;
    for (const auto& [from, to] : silences) {
      if (to - from < 5600) continue;  // 0.35 s: a pause whatever the 10 ms frames' alignment
      const auto ends = std::find_if(pieces.begin(), pieces.end(), [&](const auto& p) { return p.second > from; });
      ASSERT_NE(ends, pieces.end());
      EXPECT_NEAR(static_cast<double>(ends->second - from), 4800, 400) << "silence " << from << "-" << to;  // 0.3 s, to a frame
      ASSERT_NE(ends + 1, pieces.end());
      EXPECT_GE((ends + 1)->first, ends->second);
      EXPECT_NEAR(static_cast<double>(to - (ends + 1)->first), 200, 200) << "silence " << from << "-" << to;
    }
    int64_t previous_end = 0, after_pauses = 0;
    for (const auto& [from, to] : pieces) {
      EXPECT_GE(from, previous_end);
      EXPECT_LE(to - from, static_cast<int64_t>(limit * 16000));
      if (from >= pauseless) ++after_pauses;
      previous_end = to;
    }
    EXPECT_EQ(previous_end, audio.numel());
    EXPECT_GE(after_pauses, static_cast<int64_t>(30 / limit)) << limit;
  }
  EXPECT_TRUE(asr::speech_pieces(at::zeros({16000 * 5}), {}).empty());  // silence: nothing to decode
}

// The pauses of speech over a noise floor are found relative to that floor; audio that is noise or
// silence throughout (dithered 16-bit silence, white or brown noise at any level) has no speech.
TEST(AsrTranscribe, PausesAreFoundAboveTheNoiseFloorAndNoiseAloneIsNoSpeech) {
  at::manual_seed(5);
  std::vector<at::Tensor> parts;
  std::vector<std::pair<int64_t, int64_t>> sentences;
  int64_t at_sample = 8000;
  parts.push_back(at::zeros({8000}));
  for (int k = 0; k < 8; ++k) {  // 2-3 s "sentences" with 0.6 s pauses
    const int64_t length = 32000 + k * 2000, gap = 9600;
    // Syllables: loud and soft within the sentence, as speech is.
    parts.push_back(at::randn({length}) * 0.2 * (1.2 + at::sin(at::arange(length) / 400.0)));
    parts.push_back(at::zeros({gap}));
    sentences.emplace_back(at_sample, at_sample + length);
    at_sample += length + gap;
  }
  const at::Tensor speech = at::cat(parts);
  // White noise 27 dB below the speech's RMS: loud - 35 dB alone would put no frame below it.
  const double speech_rms = std::sqrt(at::cat(parts).pow(2).sum().item<double>() / 300000.0);
  const at::Tensor noisy = speech + at::randn({speech.numel()}) * speech_rms * std::pow(10.0, -27.0 / 20);
  asr::TranscribeOptions o;
  const std::vector<std::pair<int64_t, int64_t>> pieces = asr::speech_pieces(noisy, o);
  ASSERT_EQ(pieces.size(), sentences.size());
  for (size_t k = 0; k < pieces.size(); ++k) {
    EXPECT_NEAR(static_cast<double>(pieces[k].first), static_cast<double>(sentences[k].first), 800) << k;
    EXPECT_NEAR(static_cast<double>(pieces[k].second), static_cast<double>(sentences[k].second + 4800), 800) << k;
  }
  // Nothing but noise or silence.
  const int64_t n = 16000 * 20;
  const at::Tensor dithered_silence = (at::rand({n}) - at::rand({n})) / 32768.0;  // sox's TPDF dither of digital silence
  at::Tensor brown = at::randn({n});  // leaky-integrated white noise: -6 dB per octave above ~50 Hz
  float* b = brown.data_ptr<float>();
  for (int64_t i = 1; i < n; ++i) b[i] = 0.98f * b[i - 1] + 0.2f * b[i];
  for (const auto& [name, audio] : std::vector<std::pair<std::string, at::Tensor>>{
           {"dithered silence", dithered_silence},
           {"white noise at -20 dBFS", at::randn({n}) * 0.1},
           {"white noise at -60 dBFS", at::randn({n}) * 0.001},
           {"brown noise", brown / brown.abs().max() * 0.5}})
    EXPECT_TRUE(asr::speech_pieces(audio, o).empty()) << name << ": " << asr::speech_pieces(audio, o).size() << " pieces";
}

class AsrEvalRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("wavetrain_asr_eval_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const std::string& args :
         {std::string("data asr-synth -o corpus --train 24 --dev 4 --test 5 --seed 4"), std::string("data asr-bpe corpus/corpus.h5 --vocab 40"),
          std::string("train +experiment=asr asr.data=corpus/corpus.h5 model.d_model=32 model.ff_dim=64 model.num_layers=1 "
                      "model.predictor_dim=32 model.joiner_dim=32 model.subsampling_channels=8 trainer.batch_size=8 trainer.max_epochs=2 "
                      "trainer.checkpoint.every_n_epochs=1 trainer.cpu_batch_parts=1 asr.features.cmvn_utterances=24 run.dir=run")}) {
      const ProcessResult r = wavetrain_in(dir_, args);
      ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
};
fs::path AsrEvalRun::dir_;

TEST_F(AsrEvalRun, EvalWritesIcefallsFilesThatScliteAgreesWith) {
  ProcessResult r = wavetrain_in(dir_, "eval run --split test-unseen-voices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(%WER (\d+\.\d\d) \[ (\d+) / (\d+), (\d+) ins, (\d+) del, (\d+) sub \])"))) << r.out;
  const std::string wer = m[1];
  const int64_t errors = std::stoll(m[2]), words = std::stoll(m[3]), ins = std::stoll(m[4]), del = std::stoll(m[5]), sub = std::stoll(m[6]);
  EXPECT_EQ(errors, ins + del + sub);
  EXPECT_NE(r.out.find("x real time"), std::string::npos) << r.out;

  // recogs: every utterance of the split, in the store's order, references as stored.
  const wavetrain::data::DatasetReader store((dir_ / "corpus/corpus.h5").string());
  const std::string recogs = read(dir_ / "run/recogs-test-unseen-voices-greedy_search-max-sym-per-frame-2.txt");
  std::istringstream lines(recogs);
  std::vector<asr::Recognition> parsed;
  const std::regex line(R"(^(.*):\t(ref|hyp)=\[(.*)\]$)");
  for (std::string l; std::getline(lines, l);) {
    ASSERT_TRUE(std::regex_match(l, m, line)) << l;
    std::vector<std::string> words_of_line;
    const std::string list = m[3];
    const std::regex item(R"('([^']*)')");
    for (auto it = std::sregex_iterator(list.begin(), list.end(), item); it != std::sregex_iterator(); ++it) words_of_line.push_back((*it)[1]);
    if (m[2] == "ref") parsed.push_back({m[1], words_of_line, {}});
    else parsed.back().hyp = words_of_line;
  }
  ASSERT_EQ(static_cast<int64_t>(parsed.size()), store.size("test-unseen-voices"));
  int64_t reference_words = 0;
  for (int64_t i = 0; i < store.size("test-unseen-voices"); ++i) {
    EXPECT_EQ(parsed[static_cast<size_t>(i)].id, store.id("test-unseen-voices", i));
    const std::string text = asr::utf8_field(store.field("test-unseen-voices", "text", i));
    EXPECT_EQ(parsed[static_cast<size_t>(i)].ref, asr::split_words(text));
    reference_words += static_cast<int64_t>(asr::split_words(text).size());
  }
  EXPECT_EQ(words, reference_words);

  // errs: the same counts; and sclite, run on the recogs, counts the same.
  const std::string errs = read(dir_ / "run/errs-test-unseen-voices-greedy_search-max-sym-per-frame-2.txt");
  const std::string header = "%WER = " + wer + "\nErrors: " + std::to_string(ins) + " insertions, " + std::to_string(del) + " deletions, " +
                             std::to_string(sub) + " substitutions, over " + std::to_string(words) + " reference words";
  EXPECT_EQ(errs.rfind(header, 0), 0u) << errs;
  const fs::path trn = dir_ / "trn";
  fs::create_directories(trn);
  std::ofstream ref(trn / "ref.trn"), hyp(trn / "hyp.trn");
  for (const asr::Recognition& x : parsed) {
    for (const std::string& w : x.ref) ref << w << " ";
    for (const std::string& w : x.hyp) hyp << w << " ";
    ref << "(spk_" << x.id << ")\n";  // sclite's speaker_utterance ids
    hyp << "(spk_" << x.id << ")\n";
  }
  ref.close();
  hyp.close();
  r = wavetrain::testing::run_shell("sctk sclite -r '" + (trn / "ref.trn").string() + "' trn -h '" + (trn / "hyp.trn").string() +
                                    "' trn -i spu_id -s -o pralign stdout");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int64_t s_sub = 0, s_del = 0, s_ins = 0;
  const std::regex scores(R"(Scores: \(#C #S #D #I\) (\d+) (\d+) (\d+) (\d+))");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), scores); it != std::sregex_iterator(); ++it)
    s_sub += std::stoll((*it)[2]), s_del += std::stoll((*it)[3]), s_ins += std::stoll((*it)[4]);
  EXPECT_EQ(std::make_tuple(s_sub, s_del, s_ins), std::make_tuple(sub, del, ins));

  // Beam search, and greedy search with one token per frame (the recipe allows two), join it in the
  // split's summary, lowest WER first: each setting has files of its own, named as icefall names
  // them, and none overwrites another.
  r = wavetrain_in(dir_, "eval run --split test-unseen-voices decoding.method=modified_beam_search decoding.beam=4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("modified_beam_search-beam-size-4 (beam 4)"), std::string::npos) << r.out;
  r = wavetrain_in(dir_, "eval run --split test-unseen-voices decoding.max_sym_per_frame=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string summary = read(dir_ / "run/wer-summary-test-unseen-voices.txt");
  const std::string row = "(greedy_search-max-sym-per-frame-2|greedy_search-max-sym-per-frame-1|modified_beam_search-beam-size-4)\t\\d+\\.\\d\\d\n";
  EXPECT_TRUE(std::regex_match(summary, std::regex("settings\tWER\n" + row + row + row))) << summary;
  for (const char* settings : {"greedy_search-max-sym-per-frame-2", "greedy_search-max-sym-per-frame-1", "modified_beam_search-beam-size-4"})
    EXPECT_NE(summary.find(std::string("\n") + settings + "\t"), std::string::npos) << settings << "\n" << summary;
  EXPECT_EQ(read(dir_ / "run/recogs-test-unseen-voices-greedy_search-max-sym-per-frame-2.txt"), recogs);  // not overwritten by max-sym 1
  EXPECT_TRUE(fs::exists(dir_ / "run/errs-test-unseen-voices-modified_beam_search-beam-size-4.txt"));
  for (const auto& [settings, max_sym] : {std::pair<std::string, int>{"greedy_search-max-sym-per-frame-2", 2}, {"greedy_search-max-sym-per-frame-1", 1}}) {
    const nlohmann::json j = nlohmann::json::parse(read(dir_ / ("run/asr-eval-test-unseen-voices-" + settings + ".json")));
    EXPECT_EQ(j["method"], settings);
    EXPECT_EQ(j["decoding"]["method"], "greedy_search");
    EXPECT_EQ(j["decoding"]["max_sym_per_frame"], max_sym);
  }
}

// icefall's --avg: the last epoch checkpoints' weights averaged, evaluated into files of their own;
// asking for more than the run kept is named with the setting that keeps them.
TEST_F(AsrEvalRun, EvalAndTranscribeAverageTheLastEpochCheckpoints) {
  ProcessResult r = wavetrain_in(dir_, "eval run/checkpoints/last.ckpt --split test-held-out-engine --avg 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(the average of 2 checkpoints, epoch=\d+-step=3\.ckpt to epoch=\d+-step=6\.ckpt)"))) << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "run/recogs-test-held-out-engine-greedy_search-max-sym-per-frame-2-avg-2.txt"));
  EXPECT_NE(read(dir_ / "run/wer-summary-test-held-out-engine.txt").find("greedy_search-max-sym-per-frame-2-avg-2\t"), std::string::npos);
  EXPECT_NE(read(dir_ / "run/report.html").find("data-split='test-held-out-engine' data-method='greedy_search-max-sym-per-frame-2-avg-2'>"), std::string::npos);
  r = wavetrain_in(dir_, "eval run/checkpoints/last.ckpt --split test-held-out-engine --avg 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("it has 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("trainer.checkpoint.every_n_epochs=1"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "run/recogs-test-held-out-engine-greedy_search-max-sym-per-frame-2-avg-3.txt"));
  const wavetrain::data::DatasetReader store((dir_ / "corpus/corpus.h5").string());
  wavetrain::data::write_wav((dir_ / "one.wav").string(), store.field("dev", "audio", 0).view({1, -1}), 16000,
                             wavetrain::data::WavSubtype::kFloat32);
  r = wavetrain_in(dir_, "transcribe run/checkpoints/last.ckpt one.wav --avg 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("last.ckpt averaged with the 1 epoch checkpoint before it"), std::string::npos) << r.err;
}

TEST_F(AsrEvalRun, BadSplitsAndOptionsAreNamedAndWriteNothing) {
  ProcessResult r = wavetrain_in(dir_, "eval run --split test-martian");
  EXPECT_EQ(r.exit_code, 1);
  // Named as the user named it, with the store (its absolute path, as the run recorded it).
  EXPECT_NE(r.err.find("--split test-martian: the run's store " + (dir_ / "corpus/corpus.h5").string() + " has no such split"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("asr.valid_split"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("test-unseen-voices"), std::string::npos) << r.err;  // what there is
  r = wavetrain_in(dir_, "eval run --split dev decoding.method=beam");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("decoding.method 'beam' is not greedy_search or modified_beam_search"), std::string::npos) << r.err;
  for (const auto& e : fs::directory_iterator(dir_ / "run")) {
    EXPECT_EQ(e.path().filename().string().find("martian"), std::string::npos) << e.path();
    EXPECT_EQ(e.path().filename().string().find("beam.txt"), std::string::npos) << e.path();
  }
}

// Test conditions (asr.eval.*): every utterance of the split with leading silence, or in noise,
// evaluated into files of their own beside the clean ones.
TEST_F(AsrEvalRun, TestConditionsAddSilenceOrNoiseAndAreNamedApart) {
  ProcessResult r = wavetrain_in(dir_, "eval run --split test-unseen-voices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = wavetrain_in(dir_, "eval run --split test-unseen-voices asr.eval.lead_silence=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = wavetrain_in(dir_, "eval run --split test-unseen-voices asr.eval.snr_db=10 asr.eval.noise=babble");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = [&](const std::string& split) {
    return nlohmann::json::parse(read(dir_ / ("run/asr-eval-" + split + "-greedy_search-max-sym-per-frame-2.json")));
  };
  const nlohmann::json clean = json("test-unseen-voices"), lead = json("test-unseen-voices@lead=1s"),
                       noisy = json("test-unseen-voices@babble=10dB");
  const int64_t n = wavetrain::data::DatasetReader((dir_ / "corpus/corpus.h5").string()).size("test-unseen-voices");
  EXPECT_NEAR(lead["audio_seconds"].get<double>(), clean["audio_seconds"].get<double>() + static_cast<double>(n), 1e-6);
  EXPECT_NEAR(noisy["audio_seconds"].get<double>(), clean["audio_seconds"].get<double>(), 1e-6);
  EXPECT_EQ(lead["errors"]["words"], clean["errors"]["words"]);
  EXPECT_EQ(noisy["errors"]["words"], clean["errors"]["words"]);
  // What the evaluation hears: the run's task, made from its recorded config with the conditions.
  const wavetrain::TrainingState state = wavetrain::Checkpoint::load(wavetrain::Checkpoint::of_target((dir_ / "run").string()));
  const auto task_with = [&](const std::vector<std::string>& overrides) {
    wavetrain::config::Node tree = wavetrain::config::load_yaml_string(state.config_yaml, "run");
    for (const std::string& o : overrides) wavetrain::config::apply_value_override(tree, o);
    return asr::make_asr_task(wavetrain::config::Config(tree));
  };
  const wavetrain::data::DatasetReader store((dir_ / "corpus/corpus.h5").string());
  const auto silent = task_with({"asr.valid_split=test-unseen-voices", "asr.eval.lead_silence=1"});
  const auto babble = task_with({"asr.valid_split=test-unseen-voices", "asr.eval.snr_db=10", "asr.eval.noise=babble"});
  const auto& silent_eval = dynamic_cast<const asr::AsrEvaluation&>(*silent);
  const auto& babble_eval = dynamic_cast<const asr::AsrEvaluation&>(*babble);
  EXPECT_EQ(silent_eval.validation_split(), "test-unseen-voices@lead=1s");
  // As if recorded at 8 kHz: the same length, nothing left above 4 kHz.
  const auto phone = task_with({"asr.valid_split=test-unseen-voices", "asr.eval.sample_rate=8000"});
  const auto& phone_eval = dynamic_cast<const asr::AsrEvaluation&>(*phone);
  EXPECT_EQ(phone_eval.validation_split(), "test-unseen-voices@8000Hz");
  const at::Tensor band = phone_eval.validation_audio(0).to(at::kDouble), full = store.field("test-unseen-voices", "audio", 0).to(at::kDouble);
  ASSERT_EQ(band.numel(), full.numel());
  const at::Tensor band_spectrum = at::fft_rfft(band).abs().pow(2), full_spectrum = at::fft_rfft(full).abs().pow(2);
  const int64_t above = band_spectrum.size(0) * 4200 / 8000;
  EXPECT_LT(band_spectrum.narrow(0, above, band_spectrum.size(0) - above).sum().item<double>(),
            1e-4 * full_spectrum.narrow(0, above, full_spectrum.size(0) - above).sum().item<double>());
  EXPECT_EQ(babble_eval.validation_split(), "test-unseen-voices@babble=10dB");
  const at::Tensor original = store.field("test-unseen-voices", "audio", 0);
  const at::Tensor padded = silent_eval.validation_audio(0);
  ASSERT_EQ(padded.numel(), original.numel() + 16000);
  EXPECT_EQ(padded.narrow(0, 0, 16000).abs().max().item<double>(), 0.0);
  EXPECT_TRUE(at::equal(padded.narrow(0, 16000, original.numel()), original));
  const at::Tensor noise = babble_eval.validation_audio(0) - original;
  // 10 dB against the loud frames' power: against the whole utterance's (pauses too) a little less.
  const double snr = 10 * std::log10(original.pow(2).mean().item<double>() / noise.pow(2).mean().item<double>());
  EXPECT_GT(snr, 7.0);
  EXPECT_LT(snr, 10.01);
  EXPECT_TRUE(at::equal(babble_eval.validation_audio(0), babble_eval.validation_audio(0)));  // the same noise each time
  r = wavetrain_in(dir_, "eval run --split test-unseen-voices asr.eval.noise=pink asr.eval.snr_db=10");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("asr.eval.noise must be white, brown or babble, got 'pink'"), std::string::npos) << r.err;
}

TEST_F(AsrEvalRun, TranscribeAnyLengthAsTextOrTimedJson) {
  // The test utterances end to end with 0.4 s between them, at 22.05 kHz: resampled on reading,
  // and cut into one piece per utterance.
  const wavetrain::data::DatasetReader store((dir_ / "corpus/corpus.h5").string());
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < store.size("test-unseen-voices"); ++i) {
    parts.push_back(store.field("test-unseen-voices", "audio", i));
    parts.push_back(at::zeros({6400}));
  }
  const at::Tensor audio = at::cat(parts);
  const double seconds = static_cast<double>(audio.numel()) / 16000;
  ASSERT_GT(seconds, 8.0);
  const at::Tensor resampled = wavetrain::data::resample(audio, 16000, 22050);
  wavetrain::data::write_wav((dir_ / "long.wav").string(), resampled, 22050, wavetrain::data::WavSubtype::kFloat32);
  ProcessResult r = wavetrain_in(dir_, "transcribe run long.wav --max-piece 4 --format json -o long.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("x real time"), std::string::npos) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read(dir_ / "long.json"));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["file"], "long.wav");
  EXPECT_NEAR(j[0]["duration"].get<double>(), seconds, 0.01);
  EXPECT_EQ(j[0]["pieces"].size(), static_cast<size_t>(store.size("test-unseen-voices")));  // one per utterance
  double previous = 0;
  for (const auto& t : j[0]["tokens"]) {
    EXPECT_GE(t["time"].get<double>(), previous);
    EXPECT_LT(t["time"].get<double>(), seconds);
    previous = t["time"].get<double>();
  }
  // Text: the same words as the JSON's, one line.
  r = wavetrain_in(dir_, "transcribe run long.wav --max-piece 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, j[0]["text"].get<std::string>() + "\n");
  // From another directory: the run recorded where its tokenizer is.
  fs::create_directories(dir_ / "elsewhere");
  r = wavetrain_in(dir_ / "elsewhere", "transcribe ../run ../long.wav --max-piece 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, j[0]["text"].get<std::string>() + "\n");
  // Silence (sox's dithered 16-bit kind) and noise alone: an empty transcript.
  const at::Tensor hiss = (at::rand({16000 * 6}) - at::rand({16000 * 6})) / 32768.0;
  wavetrain::data::write_wav((dir_ / "silence.wav").string(), hiss, 16000, wavetrain::data::WavSubtype::kFloat32);
  wavetrain::data::write_wav((dir_ / "noise.wav").string(), at::randn({16000 * 6}) * 0.05, 16000, wavetrain::data::WavSubtype::kFloat32);
  r = wavetrain_in(dir_, "transcribe run silence.wav noise.wav");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "silence.wav\t\nnoise.wav\t\n");
}

TEST_F(AsrEvalRun, TranscribeNamesBadInputAndWritesNothing) {
  std::ofstream(dir_ / "not_audio.wav") << "hello";
  wavetrain::data::write_wav((dir_ / "empty.wav").string(), at::zeros({0}), 16000);
  wavetrain::TrainingState other;
  other.config_yaml = "task: amp\n";
  wavetrain::Checkpoint::save((dir_ / "amp.ckpt").string(), other);
  struct Case {
    std::string args, expected;
  };
  for (const Case& c : {Case{"transcribe run not_audio.wav -o out.txt", "not_audio.wav"},
                        Case{"transcribe run empty.wav -o out.txt", "empty.wav: no samples"},
                        Case{"transcribe amp.ckpt empty.wav -o out.txt", "amp.ckpt: a checkpoint of a 'amp' run, not of an ASR model"},
                        Case{"transcribe run missing.flac -o out.txt", "missing.flac"}}) {
    const ProcessResult r = wavetrain_in(dir_, c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.args << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out.txt"));
  // A piece limit under a second (or not positive) is a usage error, not a worse transcript.
  for (const std::string limit : {"0", "-5", "0.5"}) {
    const ProcessResult r = wavetrain_in(dir_, "transcribe run long.wav --max-piece " + limit + " -o out.txt");
    EXPECT_NE(r.exit_code, 0) << limit;
    EXPECT_NE(r.err.find("--max-piece"), std::string::npos) << limit << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out.txt"));
}


// The report after three evaluations: every split and method in its table and chart, the worst
// utterances with players whose audio Chromium loads (headless: a copy of the page with a script
// that records each player's duration once its metadata has loaded).
TEST_F(AsrEvalRun, ReportShowsEveryEvaluationAndItsAudioLoads) {
  for (const std::string& args : {std::string("eval run --split test-unseen-voices"), std::string("eval run --split dev"),
                                  std::string("eval run --split test-unseen-voices decoding.method=modified_beam_search")}) {
    const ProcessResult r = wavetrain_in(dir_, args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    EXPECT_NE(r.out.find("report: run/report.html (and run/report.md)"), std::string::npos) << r.out;
  }
  const std::string report = read(dir_ / "run/report.html");
  EXPECT_EQ(report.find("http"), report.find("http://www.w3.org/2000/svg"));  // no network
  EXPECT_EQ(report.find("<script"), std::string::npos);
  // The table's numbers are the summaries'.
  for (const char* split : {"test-unseen-voices", "dev"}) {
    std::istringstream summary(read(dir_ / (std::string("run/wer-summary-") + split + ".txt")));
    std::string line;
    std::getline(summary, line);
    int rows = 0;
    while (std::getline(summary, line)) {
      const std::string method = line.substr(0, line.find('\t')), wer = line.substr(line.find('\t') + 1);
      char cell[200];
      std::snprintf(cell, sizeof cell, "data-split='%s' data-method='%s'>%g%%<", split, method.c_str(), std::stod(wer));
      EXPECT_NE(report.find(cell), std::string::npos) << cell;
      ++rows;
    }
    // Both searches on test-unseen-voices (the suite's run is shared: an earlier test may have added
    // greedy search with one token per frame).
    EXPECT_GE(rows, std::string(split) == "dev" ? 1 : 2);
  }
  for (const char* part : {"aria-label='WER per split (%)'", "aria-label='WER per engine (%)'", "aria-label='WER per voice, test-unseen-voices (%)'",
                           "data-category='test-unseen-voices: espeak-ng'", "data-category='dev: espeak-ng'", "aria-label='Loss'", "Most frequent errors",
                           "id='latest-wer'", "task: asr"})
    EXPECT_NE(report.find(part), std::string::npos) << part;
  const nlohmann::json latest = nlohmann::json::parse(read(dir_ / "run/asr-eval-test-unseen-voices-modified_beam_search-beam-size-4.json"));
  EXPECT_FALSE(latest["by_speaker"].empty());
  for (const auto& [voice, w] : latest["by_speaker"].items())
    EXPECT_NE(report.find("data-category='" + voice + "'"), std::string::npos) << voice;
  size_t players = 0;
  for (size_t p = report.find("<audio"); p != std::string::npos; p = report.find("<audio", p + 1)) ++players;
  EXPECT_GT(players, 0u);  // a model trained for 3 steps gets most words wrong
  EXPECT_TRUE(fs::exists(dir_ / "run/report.md"));

  std::ofstream(dir_ / "run/probe.html") << report.substr(0, report.rfind("</body>"))
                                         << "<script>for (const a of document.querySelectorAll('audio')) {"
                                            "const mark = () => a.setAttribute('data-duration', a.duration.toFixed(3));"
                                            "if (a.readyState >= 1) mark(); else a.addEventListener('loadedmetadata', mark);"
                                            "a.addEventListener('error', () => a.setAttribute('data-error', 'yes'));}</script></body></html>";
  const ProcessResult dom = wavetrain::testing::run_shell(
      "timeout 90 chromium --headless --no-sandbox --disable-gpu --mute-audio --virtual-time-budget=10000 --dump-dom file://" +
      (dir_ / "run/probe.html").string());
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  size_t svgs = 0, loaded = 0;
  for (size_t p = dom.out.find("<svg"); p != std::string::npos; p = dom.out.find("<svg", p + 1)) ++svgs;
  EXPECT_GE(svgs, 4u);  // WER per split, engine and voice, the loss (and validation WER)
  const std::regex duration("data-duration=\"(\\d+\\.\\d+)\"");
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), duration); it != std::sregex_iterator(); ++it) {
    EXPECT_GT(std::stod((*it)[1]), 0.3);  // utterances of a few seconds
    EXPECT_LT(std::stod((*it)[1]), 20.0);
    ++loaded;
  }
  EXPECT_EQ(loaded, players) << dom.out.substr(0, 2000);
  EXPECT_EQ(dom.out.find("data-error=\"yes\""), std::string::npos);
}

}  // namespace
