// `wavetrain data asr-import`: a Kaldi data directory and a LibriSpeech-layout folder made here,
// each with bad entries, into one ASR store that h5py reads.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "data/audio_io.h"
#include "data/hdf5_store.h"
#include "experiments/asr/corpus_import.h"
#include "tests/run_process.h"

namespace asr = wavetrain::experiments::asr;
namespace fs = std::filesystem;

namespace {

fs::path fresh_import(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_asr_import_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A tone of `seconds` at `rate` with `channels` channels (the same signal in each).
void tone(const fs::path& path, double seconds, int rate, int channels = 1) {
  const int64_t n = static_cast<int64_t>(seconds * rate);
  const at::Tensor t = at::arange(n, at::kDouble) / rate;
  const at::Tensor x = (0.3 * at::sin(2 * M_PI * 440.0 * t)).to(at::kFloat);
  wavetrain::data::write_wav(path.string(), x.unsqueeze(0).expand({channels, n}).contiguous(), rate);
}

std::string bytes_text(const at::Tensor& b) { return {reinterpret_cast<const char*>(b.data_ptr<uint8_t>()), static_cast<size_t>(b.numel())}; }

// Builds the Kaldi directory: four recordings, segments, and one bad entry of each kind.
fs::path kaldi_dir(const fs::path& root) {
  const fs::path d = root / "kaldi";
  fs::create_directories(d);
  tone(d / "a.wav", 4.0, 8000, 2);   // stereo 8 kHz: resampled, averaged
  tone(d / "b.wav", 2.0, 22050);
  std::ofstream(d / "c.wav") << "not audio";
  std::ofstream(d / "wav.scp") << "recA " << (d / "a.wav").string() << "\n"
                               << "recB b.wav\n"  // relative to the data directory
                               << "recC " << (d / "c.wav").string() << "\n"
                               << "recD sox x.wav -t wav - |\n"
                               << "recE " << (d / "missing.wav").string() << "\n";
  std::ofstream(d / "segments") << "recA-1 recA 0.0 1.5\n"
                                << "recA-2 recA 1.5 3.0\n"
                                << "recA-3 recA 3.5 5.0\n"  // past the end (4 s)
                                << "recB-1 recB 0.25 2.0\n"
                                << "recC-1 recC 0 1\n"      // unreadable
                                << "recE-1 recE 0 1\n"      // missing file
                                << "recA-4 recA 2.0 2.0\n"; // empty segment
  std::ofstream(d / "text") << "recA-1 HELLO WORLD\n"
                            << "recA-2 good   morning\n"
                            << "recA-3 too far\n"
                            << "recA-4 nothing\n"
                            << "recB-1\n"                   // empty transcript
                            << "recC-1 bad audio\n"
                            << "recE-1 missing audio\n"
                            << "recZ-1 no audio at all\n";
  std::ofstream(d / "utt2spk") << "recA-1 alice\nrecA-2 alice\nrecB-1 bob\n";
  return d;
}

fs::path librispeech_dir(const fs::path& root) {
  const fs::path d = root / "LibriSpeech" / "dev-clean", chapter = d / "19" / "198";
  fs::create_directories(chapter);
  for (const char* id : {"19-198-0000", "19-198-0001"}) {
    tone(chapter / (std::string(id) + ".wav"), 1.0, 16000);
    const auto r = wavetrain::testing::run_shell("sox '" + (chapter / (std::string(id) + ".wav")).string() + "' '" +
                                                 (chapter / (std::string(id) + ".flac")).string() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    fs::remove(chapter / (std::string(id) + ".wav"));
  }
  std::ofstream(chapter / "19-198.trans.txt") << "19-198-0000 NORTHANGER ABBEY\n19-198-0001 CHAPTER ONE\n19-198-0002 NO SUCH FILE\n";
  return d;
}

}  // namespace

TEST(AsrImport, KaldiAndLibriSpeechIntoOneStoreWithBadEntriesNamed) {
  const fs::path root = fresh_import("both");
  asr::ImportOptions o;
  o.sources = {{"train", kaldi_dir(root).string()}, {"dev", librispeech_dir(root).string()}};
  o.store = (root / "imported.h5").string();
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  const asr::ImportReport r = asr::import_asr_data(o);
  ASSERT_EQ(r.splits.size(), 2u);
  EXPECT_EQ(r.splits[0].layout, "kaldi");
  EXPECT_EQ(r.splits[1].layout, "librispeech");
  EXPECT_EQ(r.splits[0].utterances, 2);  // recA-1, recA-2
  EXPECT_EQ(r.splits[1].utterances, 2);
  const std::string k = (root / "kaldi").string() + "/";
  const auto warned = [&](const std::string& text) {
    for (const std::string& w : warnings)
      if (w.find(text) != std::string::npos) return true;
    return false;
  };
  std::string all;
  for (const std::string& w : warnings) all += w + "\n";
  EXPECT_TRUE(warned(k + "wav.scp:4: 'recD' is a command")) << all;
  EXPECT_TRUE(warned(k + "segments:3: segment 'recA-3' ends at 5.00 s, past the end of its recording (4.00 s)")) << all;
  EXPECT_TRUE(warned(k + "text:5: the transcript of 'recB-1' is empty")) << all;
  EXPECT_TRUE(warned(k + "wav.scp:3: ")) << "unreadable audio\n" << all;
  EXPECT_TRUE(warned(k + "wav.scp:5: ")) << "missing audio\n" << all;
  EXPECT_TRUE(warned(k + "segments:7: segment 'recA-4' has start 2")) << all;
  EXPECT_TRUE(warned(k + "text:8: 'recZ-1' has a transcript but no audio")) << all;
  EXPECT_TRUE(warned("19-198.trans.txt:3: no audio file")) << all;
  EXPECT_EQ(r.splits[0].skipped + r.splits[1].skipped, static_cast<int64_t>(warnings.size()));

  const wavetrain::data::DatasetReader store(o.store);
  EXPECT_EQ(std::get<int64_t>(*store.attribute("sample_rate")), 16000);
  ASSERT_EQ(store.size("train"), 2);
  const auto a1 = store.item("train", 0), a2 = store.item("train", 1);
  EXPECT_EQ(store.id("train", 0), "recA-1");
  EXPECT_EQ(bytes_text(a1.at("text")), "HELLO WORLD");
  EXPECT_EQ(bytes_text(a2.at("text")), "good morning");  // whitespace collapsed
  EXPECT_EQ(bytes_text(a1.at("speaker")), "alice");
  EXPECT_EQ(a1.at("audio").numel(), 24000);  // 1.5 s at 16 kHz, from 8 kHz stereo
  EXPECT_DOUBLE_EQ(a1.at("duration").item<double>(), 1.5);
  // The tone survives resampling and the channel average: RMS 0.3 / sqrt(2).
  const double rms = std::sqrt(a1.at("audio").narrow(0, 1000, 20000).pow(2).mean().item<double>());
  EXPECT_NEAR(rms, 0.3 / std::sqrt(2.0), 0.01);
  ASSERT_EQ(store.size("dev"), 2);
  EXPECT_EQ(store.id("dev", 1), "19-198-0001");
  EXPECT_EQ(bytes_text(store.item("dev", 1).at("speaker")), "19");
  EXPECT_EQ(bytes_text(store.item("dev", 1).at("text")), "CHAPTER ONE");

  // h5py reads it without wavetrain.
  const std::string script = "import h5py; f = h5py.File('" + o.store + "'); o = f['dev/text/offsets'][:]; "
                             "print(bytes(f['dev/text/data'][o[0]:o[1]]).decode())";
  const auto py = wavetrain::testing::run_shell(std::string(WAVETRAIN_TEST_PYTHON) + " -c \"" + script + "\"");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(py.out, "NORTHANGER ABBEY\n");
}

TEST(AsrImport, StrictMakesABadEntryFatalAndWritesNothing) {
  const fs::path root = fresh_import("strict");
  asr::ImportOptions o;
  o.sources = {{"train", kaldi_dir(root).string()}};
  o.store = (root / "strict.h5").string();
  o.strict = true;
  try {
    asr::import_asr_data(o);
    FAIL() << "a bad entry was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("kaldi/wav.scp:4: 'recD' is a command"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(o.store));
  o.sources = {{"train", (root / "nowhere").string()}};
  EXPECT_THROW(asr::import_asr_data(o), std::runtime_error);
  fs::create_directories(root / "empty");
  o.sources = {{"train", (root / "empty").string()}};
  try {
    asr::import_asr_data(o);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("neither a Kaldi data directory (no wav.scp) nor LibriSpeech"), std::string::npos) << e.what();
  }
}

TEST(AsrImport, CommandLine) {
  const fs::path root = fresh_import("cli");
  librispeech_dir(root);
  auto r = wavetrain::testing::run_shell("cd '" + root.string() + "' && '" WAVETRAIN_BINARY "' data asr-import -o s.h5 dev=LibriSpeech/dev-clean");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 utterances"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("19-198.trans.txt:3: no audio file"), std::string::npos) << r.err;
  r = wavetrain::testing::run_shell("cd '" + root.string() + "' && '" WAVETRAIN_BINARY "' data asr-import -o s.h5 LibriSpeech/dev-clean");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("expected SPLIT=DIR"), std::string::npos) << r.err;
}
