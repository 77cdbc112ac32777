// The amp-modeling commands as a user runs them: capture data with its checks and latency
// estimate, a short training run, .nam export and import, and inference on a file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/audio_io.h"
#include "experiments/amp/amp_model.h"
#include "tests/run_process.h"

namespace fs = std::filesystem;

namespace {

using Result = wavetrain::testing::ProcessResult;

Result wavetrain_in(const fs::path& dir, const std::string& args) {
  fs::create_directories(dir);
  return wavetrain::testing::run_shell("cd '" + dir.string() + "' && '" WAVETRAIN_BINARY "' " + args);
}

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_amp_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A 6 s dry signal (a sweep and noise) and a toy amp: 0.5 tanh(3x), one-pole smoothed, 37 samples
// late, with 100 samples of tail.
void write_capture(const fs::path& dir, int64_t delay = 37, int rate = 48000) {
  const int64_t n = 6 * rate;
  at::manual_seed(0);
  const at::Tensor t = at::arange(n, at::kDouble) / static_cast<double>(rate);
  const at::Tensor dry = 0.4 * at::sin(2 * M_PI * (50 * t + 300 * t * t)) + 0.1 * at::randn({n}, at::kDouble);
  at::Tensor wet = 0.5 * at::tanh(3 * dry);
  for (int64_t i = 1; i < n; ++i) wet[i] = 0.7 * wet[i] + 0.3 * wet[i - 1];  // small: 288k samples
  const at::Tensor out = at::cat({at::zeros({delay}, at::kDouble), wet, at::zeros({100 - delay}, at::kDouble)});
  wavetrain::data::write_wav((dir / "dry.wav").string(), dry, rate, wavetrain::data::WavSubtype::kFloat32);
  wavetrain::data::write_wav((dir / "amp.wav").string(), out, rate, wavetrain::data::WavSubtype::kFloat32);
}

TEST(CliAmp, CaptureEstimatesTheLatencyAndChecksTheFiles) {
  const fs::path dir = fresh("capture");
  write_capture(dir);
  const Result r = wavetrain_in(dir, "data amp --input dry.wav --output amp.wav -o capture.h5 --valid-seconds 1.5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("latency: 37 samples detected (0.77 ms); aligned at 35 (2 early, for safety)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train 4.50 s, validation 1.50 s"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "capture.h5"));

  using wavetrain::data::write_wav;
  write_wav((dir / "stereo.wav").string(), at::zeros({2, 48000}), 48000);
  write_wav((dir / "slow.wav").string(), at::zeros({300000}), 44100);
  write_wav((dir / "short.wav").string(), at::zeros({1000}), 48000);
  write_wav((dir / "clipped.wav").string(), at::cat({at::zeros({1000}), at::ones({5}), at::zeros({288000})}), 48000,
            wavetrain::data::WavSubtype::kFloat32);
  const Result no_valid = wavetrain_in(dir, "data amp --input dry.wav --output amp.wav -o bad.h5 --valid-seconds 0");
  EXPECT_EQ(no_valid.exit_code, 1);
  EXPECT_NE(no_valid.err.find("--valid-seconds must be > 0, got 0"), std::string::npos) << no_valid.err;
  const std::pair<std::string, std::string> bad[] = {
      {"--input stereo.wav --output amp.wav", "stereo.wav: expected 1 channel, found 2"},
      {"--input dry.wav --output slow.wav", "slow.wav: sample rate 44100 Hz differs from the input's (dry.wav: 48000 Hz)"},
      {"--input dry.wav --output short.wav", "short.wav: 1000 samples, shorter than the input's 288000"},
      {"--input dry.wav --output clipped.wav", "clipped.wav: clipped: 5 samples at full scale (|y| >= 1), the first at 1000"},
  };
  for (const auto& [args, message] : bad) {
    const Result e = wavetrain_in(dir, "data amp " + args + " -o bad.h5");
    EXPECT_EQ(e.exit_code, 1) << args;
    EXPECT_NE(e.err.find(message), std::string::npos) << args << "\n" << e.err;
    EXPECT_FALSE(fs::exists(dir / "bad.h5")) << args;
  }
}

TEST(CliAmp, TrainExportImportInfer) {
  const fs::path dir = fresh("train");
  write_capture(dir);
  ASSERT_EQ(wavetrain_in(dir, "data amp --input dry.wav --output amp.wav -o capture.h5 --valid-seconds 1.5").exit_code, 0);
  const Result train = wavetrain_in(dir, "train +experiment=amp amp.data=capture.h5 model.preset=nano trainer.max_epochs=3 "
                                         "trainer.batch_size=8 trainer.seed=1 run.dir=run");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  // Throughput in audio seconds: "samples" would read as audio samples, items hide their length.
  EXPECT_NE(train.out.find(" s audio/s"), std::string::npos) << train.out;
  EXPECT_EQ(train.out.find("samples/s"), std::string::npos) << train.out;
  std::ifstream result(dir / "run/result.json");
  const nlohmann::json j = nlohmann::json::parse(result);
  const double esr = j["best"]["val/esr"].get<double>();
  EXPECT_TRUE(std::isfinite(esr));
  EXPECT_LT(esr, 1.0);  // better than predicting silence after 3 short epochs

  // The report: numbers and plots, and (when Debian's chromium is installed) rendered headless.
  const Result eval = wavetrain_in(dir, "eval run");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_NE(eval.out.find("report: run/report.html (and run/report.md)"), std::string::npos) << eval.out;
  std::ifstream report_in(dir / "run/report.html");
  const std::string report((std::istreambuf_iterator<char>(report_in)), std::istreambuf_iterator<char>());
  for (const char* part : {"id='esr'", "id='verdict'", "Prediction and target", "Target spectrogram", "Prediction spectrogram",
                           "aria-label='Training'", "data: capture.h5", "device cpu"})
    EXPECT_NE(report.find(part), std::string::npos) << part;
  EXPECT_EQ(report.find("http"), report.find("http://www.w3.org/2000/svg"));  // no network: only the SVG namespace
  EXPECT_TRUE(fs::exists(dir / "run/report.md"));
  const Result dom = wavetrain::testing::run_shell("command -v chromium >/dev/null && cd '" + dir.string() +
                                                    "' && timeout 60 chromium --headless --no-sandbox --disable-gpu "
                                                    "--dump-dom file://" + (dir / "run/report.html").string());
  if (dom.exit_code == 0 && !dom.out.empty()) {
    EXPECT_NE(dom.out.find("<svg"), std::string::npos);
    EXPECT_NE(dom.out.find("id=\"esr\""), std::string::npos) << dom.out.substr(0, 400);
    size_t svgs = 0;
    for (size_t p = dom.out.find("<svg"); p != std::string::npos; p = dom.out.find("<svg", p + 1)) ++svgs;
    EXPECT_EQ(svgs, 4u);
  } else {
    std::cout << "chromium not available: the report was checked as text only\n";
  }

  const Result exported = wavetrain_in(dir, "export nam run/checkpoints/last.ckpt -o model.nam");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find("wrote model.nam (WaveNet, 841 parameters)"), std::string::npos) << exported.out;
  std::ifstream nam(dir / "model.nam");
  const nlohmann::json m = nlohmann::json::parse(nam);
  EXPECT_EQ(m["architecture"], "WaveNet");
  EXPECT_EQ(m["weights"].size(), 842u);
  EXPECT_EQ(m["sample_rate"], 48000.0);
  EXPECT_EQ(m["version"], "0.5.4");

  const Result imported = wavetrain_in(dir, "import nam model.nam -o imported.ckpt");
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.out.find("preset nano"), std::string::npos) << imported.out;

  for (const char* model : {"model.nam", "imported.ckpt", "run/checkpoints/last.ckpt"}) {
    const Result r = wavetrain_in(dir, std::string("infer ") + model + " dry.wav -o out_" + fs::path(model).filename().string() + ".wav --chunk 10000");
    ASSERT_EQ(r.exit_code, 0) << model << r.err;
    EXPECT_NE(r.out.find("x real time (chunk 10000, exact)"), std::string::npos) << r.out;
  }
  const at::Tensor a = wavetrain::data::read_audio((dir / "out_model.nam.wav").string()).samples;
  const at::Tensor b = wavetrain::data::read_audio((dir / "out_imported.ckpt.wav").string()).samples;
  const at::Tensor c = wavetrain::data::read_audio((dir / "out_last.ckpt.wav").string()).samples;
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-6);
  EXPECT_LE((a - c).abs().max().item<double>(), 1e-5 * c.abs().max().item<double>());
  EXPECT_EQ(a.size(1), 6 * 48000);
}

// What the plugin plays beyond the classic WaveNet trains too: A2 (a2_small here, for time) and a
// preset with another activation and gating; the export is 0.7.0 (whose spellings it uses), carries
// the validation ESR, and plays as the checkpoint computes.
TEST(CliAmp, TrainsA2AndOtherActivations) {
  const fs::path dir = fresh("train_a2");
  write_capture(dir);
  ASSERT_EQ(wavetrain_in(dir, "data amp --input dry.wav --output amp.wav -o capture.h5 --valid-seconds 1.5").exit_code, 0);
  for (const std::string& model : {std::string("model.preset=a2_small"), std::string("model.preset=nano model.activation=SiLU model.gating=blended")}) {
    fs::remove_all(dir / "run");
    const Result train = wavetrain_in(dir, "train +experiment=amp amp.data=capture.h5 " + model +
                                               " trainer.max_steps=4 trainer.batch_size=2 amp.segment=4096 trainer.seed=1 run.dir=run");
    ASSERT_EQ(train.exit_code, 0) << model << train.err;
    std::ifstream result(dir / "run/result.json");
    const double esr = nlohmann::json::parse(result)["best"]["val/esr"].get<double>();
    EXPECT_TRUE(std::isfinite(esr)) << model;
    const Result exported = wavetrain_in(dir, "export nam run/checkpoints/last.ckpt -o model.nam");
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    std::ifstream nam(dir / "model.nam");
    const nlohmann::json m = nlohmann::json::parse(nam);
    EXPECT_EQ(m["version"], "0.7.0") << model;
    EXPECT_DOUBLE_EQ(m["metadata"]["training"]["validation_esr"].get<double>(), esr) << model;
    for (const char* source : {"model.nam", "run/checkpoints/last.ckpt"}) {
      const Result r = wavetrain_in(dir, std::string("infer ") + source + " dry.wav -o out_" + fs::path(source).filename().string() + ".wav --mode stream --chunk 64");
      ASSERT_EQ(r.exit_code, 0) << source << r.err;
    }
    const at::Tensor a = wavetrain::data::read_audio((dir / "out_model.nam.wav").string()).samples;
    const at::Tensor b = wavetrain::data::read_audio((dir / "out_last.ckpt.wav").string()).samples;
    EXPECT_GT(a.abs().max().item<double>(), 1e-4) << model;
    EXPECT_LE((a - b).abs().max().item<double>(), 1e-6) << model;
  }
  const Result bad = wavetrain_in(dir, "train +experiment=amp amp.data=capture.h5 model.preset=nano model.activation=Swish trainer.max_steps=1 run.dir=bad");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("model.activation: activation 'Swish' is not supported; supported: Tanh"), std::string::npos) << bad.err;
}

}  // namespace

namespace {

// import nam -> export nam keeps the file's version and all of its metadata (an outside audit
// found everything but the date dropped and the version rewritten), for a preset and a custom model.
TEST(CliAmp, ImportExportKeepsVersionAndMetadata) {
  const fs::path dir = fresh("metadata");
  const nlohmann::json metadata = {{"name", "Bob's \"Plexi\": crunch"}, {"modeled_by", "Bob"}, {"gear_make", "Marshall"},
                                   {"gear_type", "amp"}, {"tone_type", "crunch"}, {"loudness", -12.5},
                                   {"date", {{"year", 2024}, {"month", 2}, {"day", 29}, {"hour", 1}, {"minute", 2}, {"second", 3}}},
                                   {"training", {{"validation_esr", 0.0042}, {"settings", {{"epochs", 100}}}}}};
  for (const std::string& preset : {std::string("nano"), std::string("custom")}) {
    namespace amp = wavetrain::experiments::amp;
    amp::AmpModel m = amp::make_amp_model("wavenet", "nano");
    if (preset == "custom") {
      amp::WaveNetConfig c = m.wavenet->config();
      c.layers[1].kernel_size = 2;
      m.wavenet = amp::WaveNet(c);
    }
    m.metadata = metadata;
    m.nam_version = "0.5.2";
    amp::write_nam((dir / (preset + ".nam")).string(), m);
    const Result imported = wavetrain_in(dir, "import nam " + preset + ".nam -o " + preset + ".ckpt");
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    const Result exported = wavetrain_in(dir, "export nam " + preset + ".ckpt -o " + preset + "_again.nam");
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    std::ifstream in(dir / (preset + "_again.nam"));
    const nlohmann::json again = nlohmann::json::parse(in);
    EXPECT_EQ(again["version"], "0.5.2") << preset;
    EXPECT_EQ(again["metadata"], metadata) << preset << "\n" << again["metadata"].dump();
  }
}

// Every model streams (a gated WaveNet too, with no note and the same output as exact mode), and
// infer says when it resamples: a 44.1 kHz file through a 48 kHz model is resampled in and written
// back at 44.1 kHz, or at --rate.
TEST(CliAmp, InferStreamsEveryModelAndSaysWhenItResamples) {
  const fs::path dir = fresh("stream_note");
  namespace amp = wavetrain::experiments::amp;
  amp::WaveNetConfig c = amp::wavenet_preset("nano");
  c.layers[0].gated = true;
  amp::AmpModel m = amp::make_amp_model("wavenet", "nano");
  m.wavenet = amp::WaveNet(c);
  amp::write_nam((dir / "gated.nam").string(), m);
  const at::Tensor x = 0.3 * at::sin(at::arange(4800, at::kFloat) * 0.05);
  wavetrain::data::write_wav((dir / "in.wav").string(), x, 48000);
  const Result stream = wavetrain_in(dir, "infer gated.nam in.wav -o stream.wav --mode stream --chunk 64");
  ASSERT_EQ(stream.exit_code, 0) << stream.err;
  EXPECT_EQ(stream.err.find("note:"), std::string::npos) << stream.err;
  const Result exact = wavetrain_in(dir, "infer gated.nam in.wav -o exact.wav");
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  const at::Tensor ys = wavetrain::data::read_audio((dir / "stream.wav").string()).samples;
  const at::Tensor ye = wavetrain::data::read_audio((dir / "exact.wav").string()).samples;
  ASSERT_EQ(ys.sizes(), ye.sizes());
  EXPECT_GT(ye.abs().max().item<double>(), 1e-4);
  EXPECT_LE((ys - ye).abs().max().item<double>(), 1e-5 * ye.abs().max().item<double>());

  wavetrain::data::write_wav((dir / "in44.wav").string(), x.narrow(0, 0, 4410), 44100);
  const Result resampled = wavetrain_in(dir, "infer gated.nam in44.wav -o out44.wav");
  ASSERT_EQ(resampled.exit_code, 0) << resampled.err;
  EXPECT_NE(resampled.err.find("note: in44.wav is at 44100 Hz and the model at 48000 Hz: resampling the input to 48000 Hz"), std::string::npos)
      << resampled.err;
  const wavetrain::data::Audio out44 = wavetrain::data::read_audio((dir / "out44.wav").string());
  EXPECT_EQ(out44.sample_rate, 44100);
  EXPECT_EQ(out44.samples.size(1), 4410);
  const Result at48 = wavetrain_in(dir, "infer gated.nam in44.wav -o out48.wav --rate 48000");
  ASSERT_EQ(at48.exit_code, 0) << at48.err;
  const wavetrain::data::Audio out48 = wavetrain::data::read_audio((dir / "out48.wav").string());
  EXPECT_EQ(out48.sample_rate, 48000);
  EXPECT_EQ(out48.samples.size(1), 4800);
  EXPECT_EQ(at48.err.find("note: writing"), std::string::npos) << at48.err;  // the model's own rate: nothing resampled out
}

TEST(CliAmp, LstmTrainsAndExports) {
  const fs::path dir = fresh("lstm");
  write_capture(dir, 37, 44100);  // the exported model must carry the capture's rate
  ASSERT_EQ(wavetrain_in(dir, "data amp --input dry.wav --output amp.wav -o capture.h5 --valid-seconds 1.5").exit_code, 0);
  const Result train = wavetrain_in(dir, "train +experiment=amp amp.data=capture.h5 model.architecture=lstm model.preset=1x12 "
                                         "trainer.max_steps=3 trainer.batch_size=4 amp.segment=2048 amp.burn_in=1024 run.dir=run");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const Result exported = wavetrain_in(dir, "export nam run/checkpoints/last.ckpt -o lstm.nam");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  std::ifstream nam(dir / "lstm.nam");
  const nlohmann::json m = nlohmann::json::parse(nam);
  EXPECT_EQ(m["architecture"], "LSTM");
  EXPECT_EQ(m["config"]["hidden_size"], 12);
  EXPECT_EQ(m["weights"].size(), 757u - 4 * 12);  // the file keeps one summed bias per layer
  EXPECT_EQ(m["sample_rate"], 44100.0);
  const Result infer = wavetrain_in(dir, "infer lstm.nam dry.wav -o out.wav --chunk 3000");
  ASSERT_EQ(infer.exit_code, 0) << infer.err;
}

}  // namespace

namespace {

TEST(CliAmp, BuiltInCaptureIsDeterministic) {
  if (wavetrain::testing::run_shell("command -v sox").exit_code != 0) GTEST_SKIP() << "sox is not installed (scripts/setup installs it)";
  const fs::path dir = fresh("synth");
  for (const char* sub : {"a", "b"}) {
    const Result r = wavetrain_in(dir, std::string("data amp-synth -o ") + sub + " --seconds 20 --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // The same samples (the files' headers carry a time stamp in their PEAK chunk).
  for (const char* f : {"dry.wav", "amp.wav"}) {
    const at::Tensor a = wavetrain::data::read_audio((dir / "a" / f).string()).samples;
    const at::Tensor b = wavetrain::data::read_audio((dir / "b" / f).string()).samples;
    EXPECT_GT(a.size(1), 48000 * 15) << f;
    EXPECT_TRUE(at::equal(a, b)) << f;
  }
  const at::Tensor amp = wavetrain::data::read_audio((dir / "a/amp.wav").string()).samples;
  EXPECT_LT(amp.abs().max().item<double>(), 1.0);  // normalised to -1 dBFS: never clipped
  EXPECT_GT(amp.abs().max().item<double>(), 0.85);
  const Result capture = wavetrain_in(dir, "data amp --input a/dry.wav --output a/amp.wav -o a.h5");
  ASSERT_EQ(capture.exit_code, 0) << capture.err;
  EXPECT_NE(capture.out.find("latency: 65 samples detected"), std::string::npos) << capture.out;  // 64 + the amp's onset
}

}  // namespace
