// The amp-modeling commands as a user runs them: capture data with its checks and latency
// estimate, a short training run, .nam export and import, and inference on a file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <nlohmann/json.hpp>

#include "data/audio_io.h"
#include "experiments/amp/amp_model.h"
#include "tests/run_process.h"

namespace fs = std::filesystem;

namespace {

using Result = wavetrain::testing::ProcessResult;

using wavetrain::testing::wavetrain_in;

fs::path fresh_amp(const std::string& name) {
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
  const fs::path dir = fresh_amp("capture");
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
  const fs::path dir = fresh_amp("train");
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
  // Beside the exact ESR, the ESR as the NAM plugin plays the model (its fast tanh): close to it
  // and, for this tanh WaveNet, not the same number.
  const auto cell = [&report](const std::string& id) {
    const size_t at = report.find("id='" + id + "'>");
    return at == std::string::npos ? std::string() : report.substr(at + id.size() + 6, report.find('<', at) - at - id.size() - 6);
  };
  ASSERT_FALSE(cell("plugin_esr").empty()) << report.substr(0, 2000);
  const double exact_esr = std::stod(cell("esr")), plugin_esr = std::stod(cell("plugin_esr"));
  EXPECT_NE(plugin_esr, exact_esr);
  EXPECT_NEAR(plugin_esr, exact_esr, 0.05 * exact_esr + 1e-4);
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

  // The checkpoint carries the model's sample rate (it came from the capture): exporting and
  // playing it need neither the capture nor the directory the run was trained in. Evaluating a
  // split does need the capture: the error says where it looked and how to give it.
  fs::create_directories(dir / "elsewhere");
  const Result exported_elsewhere = wavetrain_in(dir / "elsewhere", "export nam ../run/checkpoints/last.ckpt -o model.nam");
  ASSERT_EQ(exported_elsewhere.exit_code, 0) << exported_elsewhere.err;
  std::ifstream nam_elsewhere(dir / "elsewhere/model.nam");
  EXPECT_EQ(nlohmann::json::parse(nam_elsewhere)["sample_rate"], 48000.0);
  const Result infer_elsewhere = wavetrain_in(dir / "elsewhere", "infer ../run/checkpoints/last.ckpt ../dry.wav -o out.wav");
  EXPECT_EQ(infer_elsewhere.exit_code, 0) << infer_elsewhere.err;
  const Result eval_elsewhere = wavetrain_in(dir / "elsewhere", "eval ../run");
  EXPECT_EQ(eval_elsewhere.exit_code, 1);
  EXPECT_NE(eval_elsewhere.err.find("amp.data: the capture store 'capture.h5' does not exist (looked for " +
                                    (dir / "elsewhere/capture.h5").string() + "); give its path with amp.data=PATH"),
            std::string::npos)
      << eval_elsewhere.err;
  const Result eval_given = wavetrain_in(dir / "elsewhere", "eval ../run amp.data=../capture.h5");
  EXPECT_EQ(eval_given.exit_code, 0) << eval_given.err;
  EXPECT_NE(eval_given.out.find("val/esr"), std::string::npos) << eval_given.out;

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
  const fs::path dir = fresh_amp("train_a2");
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
  const fs::path dir = fresh_amp("metadata");
  const nlohmann::json metadata = {{"name", "Bob's \"Plexi\": crunch"}, {"modeled_by", "Bob"}, {"gear_make", "Marshall"},
                                   {"gear_type", "amp"}, {"tone_type", "crunch"}, {"loudness", -12.5},
                                   {"date", {{"year", 2024}, {"month", 2}, {"day", 29}, {"hour", 1}, {"minute", 2}, {"second", 3}}},
                                   {"training", {{"validation_esr", 0.0042}, {"settings", {{"epochs", 100}}}}}};
  for (const std::string& preset : {std::string("nano"), std::string("custom")}) {
    namespace amp = wavetrain::experiments::amp;
    amp::AmpModel m = amp::make_amp_model("wavenet", "nano");
    if (preset == "custom") {
      amp::WaveNetConfig c = *m.wavenet->classic_config();
      c.layers[1].kernel_size = 2;
      m.wavenet = amp::NamWaveNet(amp::nam_of(c));
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
  const fs::path dir = fresh_amp("stream_note");
  namespace amp = wavetrain::experiments::amp;
  amp::WaveNetConfig c = amp::wavenet_preset("nano");
  c.layers[0].gated = true;
  amp::AmpModel m = amp::make_amp_model("wavenet", "nano");
  m.wavenet = amp::NamWaveNet(amp::nam_of(c));
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
  const fs::path dir = fresh_amp("lstm");
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

// NAM's ConvNet and Linear train too (their presets), and export files the NAM plugin reads
// (AmpNamFiles.ConvNetAndLinearModulesEqualTheCore: the module computes what the core plays).
TEST(CliAmp, ConvNetAndLinearTrainAndExport) {
  const fs::path dir = fresh_amp("convnet_linear");
  write_capture(dir);
  ASSERT_EQ(wavetrain_in(dir, "data amp --input dry.wav --output amp.wav -o capture.h5 --valid-seconds 1.5").exit_code, 0);
  for (const auto& [architecture, preset, weights] : std::vector<std::tuple<std::string, std::string, size_t>>{
           {"convnet", "small", 8 * 2 + 33 + 7 * (8 * 8 * 2 + 33) + 9}, {"linear", "short", 65}}) {
    // NAM's learning rate and items: the recipe's (lr 0.01, 16384 samples, tuned on the WaveNet)
    // make 2 steps per epoch of this short capture, too few for the Linear's ESR to fall every epoch.
    const Result train = wavetrain_in(dir, "train +experiment=amp amp.data=capture.h5 model.architecture=" + architecture +
                                               " model.preset=" + preset + " trainer.max_epochs=3 trainer.batch_size=8 "
                                               "optimizer.lr=0.004 scheduler.gamma=0.993 amp.segment=8192 run.dir=" + architecture);
    ASSERT_EQ(train.exit_code, 0) << train.err;
    // It learns: the validation ESR of each epoch (metrics.csv's third column) below the one before.
    std::ifstream metrics(dir / architecture / "metrics.csv");
    std::vector<double> esr;
    for (std::string line; std::getline(metrics, line);) {
      const size_t a = line.find(','), b = line.find(',', a + 1), c = line.find(',', b + 1);
      if (line.rfind("step", 0) != 0 && c != b + 1) esr.push_back(std::stod(line.substr(b + 1, c - b - 1)));
    }
    ASSERT_EQ(esr.size(), 3u) << architecture;
    EXPECT_LT(esr[1], esr[0]) << architecture;
    EXPECT_LT(esr[2], esr[1]) << architecture;
    const Result exported = wavetrain_in(dir, "export nam " + architecture + "/checkpoints/last.ckpt -o " + architecture + ".nam");
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    std::ifstream nam(dir / (architecture + ".nam"));
    const nlohmann::json m = nlohmann::json::parse(nam);
    EXPECT_EQ(m["architecture"], architecture == "convnet" ? "ConvNet" : "Linear");
    EXPECT_EQ(m["weights"].size(), weights) << architecture;
    EXPECT_EQ(m["version"], "0.5.4");
    // Imported and exported again: the same file.
    ASSERT_EQ(wavetrain_in(dir, "import nam " + architecture + ".nam -o " + architecture + ".ckpt").exit_code, 0);
    ASSERT_EQ(wavetrain_in(dir, "export nam " + architecture + ".ckpt -o " + architecture + "_again.nam").exit_code, 0);
    std::ifstream nam_again(dir / (architecture + "_again.nam"));
    EXPECT_EQ(nlohmann::json::parse(nam_again)["weights"], m["weights"]) << architecture;
  }
}

}  // namespace

namespace {

TEST(CliAmp, BuiltInCaptureIsDeterministic) {
  if (wavetrain::testing::run_shell("command -v sox").exit_code != 0) GTEST_SKIP() << "sox is not installed (scripts/setup installs it)";
  const fs::path dir = fresh_amp("synth");
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

// ---- data amp and the capture store: failures are one line naming the file (issue 21) ---------
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "data/hdf5_store.h"
#include "experiments/amp/amp_task.h"
#include "experiments/amp/capture.h"
#include "trainer/config/yaml_io.h"

namespace {

// write_capture's signals with the one-pole smoothing done on raw samples (its tensor loop takes
// seconds): a 6 s capture, 37 samples late.
void write_quick_capture(const fs::path& dir) {
  const int64_t n = 6 * 48000, delay = 37;
  at::manual_seed(0);
  const at::Tensor t = at::arange(n, at::kDouble) / 48000.0;
  const at::Tensor dry = 0.4 * at::sin(2 * M_PI * (50 * t + 300 * t * t)) + 0.1 * at::randn({n}, at::kDouble);
  at::Tensor wet = (0.5 * at::tanh(3 * dry)).contiguous();
  double* w = wet.data_ptr<double>();
  for (int64_t i = 1; i < n; ++i) w[i] = 0.7 * w[i] + 0.3 * w[i - 1];
  const at::Tensor out = at::cat({at::zeros({delay}, at::kDouble), wet, at::zeros({100 - delay}, at::kDouble)});
  wavetrain::data::write_wav((dir / "dry.wav").string(), dry, 48000, wavetrain::data::WavSubtype::kFloat32);
  wavetrain::data::write_wav((dir / "amp.wav").string(), out, 48000, wavetrain::data::WavSubtype::kFloat32);
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A full disk without root: RLIMIT_FSIZE (ulimit -f, in KiB) makes a write past it fail with EFBIG,
// with SIGXFSZ ignored (trap '' XFSZ) so that write() returns the error instead of killing the
// process. Limits that fail in the first data write and in a later one (the store is 1.8 MB).
TEST(CliAmpStore, DataAmpOnAFullDiskSaysWhyExitsOneAndLeavesNothing) {
  const fs::path dir = fresh_amp("full_disk");
  write_quick_capture(dir);
  for (const int kib : {64, 1500}) {
    const Result r = wavetrain::testing::run_shell("cd '" + dir.string() + "' && bash -c \"trap '' XFSZ; ulimit -f " + std::to_string(kib) +
                                                   "; exec '" WAVETRAIN_BINARY "' data amp --input dry.wav --output amp.wav -o capture.h5 "
                                                   "--valid-seconds 1.5\"");
    EXPECT_EQ(r.exit_code, 1) << kib << " KiB (-1: killed by a signal)\n" << r.err;
    const std::string prefix = "wavetrain: error: capture.h5: cannot be written: File too large (";
    EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << kib << " KiB: " << r.err;
    EXPECT_NE(r.err.find("); nothing was left behind\n"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(names_in(dir), (std::vector<std::string>{"amp.wav", "dry.wav"})) << kib << " KiB";
  }
}

// A directory the user cannot write to: the system's reason, not only "cannot be written". Root
// writes anywhere, so as root the command runs as nobody (setpriv).
TEST(CliAmpStore, DataAmpIntoAReadOnlyDirectorySaysPermissionDenied) {
  const fs::path dir = fresh_amp("read_only");
  write_quick_capture(dir);
  fs::create_directories(dir / "out");
  ::chmod((dir / "out").c_str(), 0555);
  std::string as_user;
  if (::geteuid() == 0) {
    if (wavetrain::testing::run_shell("command -v setpriv >/dev/null").exit_code != 0) GTEST_SKIP() << "root without setpriv";
    ::chmod(dir.c_str(), 0755);
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  const Result r = wavetrain::testing::run_shell("cd '" + dir.string() + "' && " + as_user +
                                                 "'" WAVETRAIN_BINARY "' data amp --input dry.wav --output amp.wav -o out/capture.h5");
  ::chmod((dir / "out").c_str(), 0755);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("wavetrain: error: out/capture.h5: cannot be created: Permission denied (writing its temporary out/.capture.h5.partial-", 0),
            0u)
      << r.err;
  EXPECT_TRUE(fs::is_empty(dir / "out"));
}

// A mono float32 WAV written byte by byte: write_wav refuses NaN and inf, which this test needs.
void write_float_wav(const fs::path& path, const std::vector<float>& samples, int rate) {
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [](uint16_t v) { return std::string(reinterpret_cast<const char*>(&v), 2); };
  const uint32_t data_bytes = static_cast<uint32_t>(samples.size() * 4);
  std::ofstream out(path, std::ios::binary);
  out << "RIFF" << u32(36 + data_bytes) << "WAVE" << "fmt " << u32(16) << u16(3) << u16(1) << u32(static_cast<uint32_t>(rate))
      << u32(static_cast<uint32_t>(rate) * 4) << u16(4) << u16(32) << "data" << u32(data_bytes);
  out.write(reinterpret_cast<const char*>(samples.data()), static_cast<std::streamsize>(data_bytes));
}

// NaN or inf in either file: refused, naming the file and the first bad sample's index and time.
// Before, the latency came out 0 and training failed at its first step.
TEST(CliAmpStore, DataAmpRefusesNaNAndInfSamples) {
  const fs::path dir = fresh_amp("non_finite");
  write_quick_capture(dir);
  const at::Tensor dry = wavetrain::data::read_audio((dir / "dry.wav").string()).samples[0].contiguous();
  const at::Tensor wet = wavetrain::data::read_audio((dir / "amp.wav").string()).samples[0].contiguous();
  std::vector<float> x(dry.data_ptr<float>(), dry.data_ptr<float>() + dry.numel());
  std::vector<float> y(wet.data_ptr<float>(), wet.data_ptr<float>() + wet.numel());
  x[24000] = std::nanf("");
  write_float_wav(dir / "dry_nan.wav", x, 48000);
  y[96000] = -INFINITY;
  y[100000] = INFINITY;
  write_float_wav(dir / "amp_inf.wav", y, 48000);
  const Result a = wavetrain_in(dir, "data amp --input dry_nan.wav --output amp.wav -o bad.h5");
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_EQ(a.err, "wavetrain: error: dry_nan.wav: sample 24000 (0.500000 s) is NaN; a capture must hold finite samples (export it again, "
                   "or check the plugin chain)\n");
  const Result b = wavetrain_in(dir, "data amp --input dry.wav --output amp_inf.wav -o bad.h5");
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_EQ(b.err, "wavetrain: error: amp_inf.wav: sample 96000 (2.000000 s) is -inf (the first of 2 that are not finite); a capture must "
                   "hold finite samples (export it again, or check the plugin chain)\n");
  EXPECT_FALSE(fs::exists(dir / "bad.h5"));
}

// A capture store written by hand (h5py, a script): each problem is one error naming the store and
// the split, item and field.
std::string capture_error(const fs::path& path, const std::function<void(wavetrain::data::DatasetWriter&)>& fill) {
  {
    wavetrain::data::DatasetWriter w(path.string());
    fill(w);
    w.finish();
  }
  try {
    (void)wavetrain::experiments::amp::read_capture(wavetrain::data::DatasetReader(path.string()));
  } catch (const wavetrain::data::StoreError& e) {
    return e.what();
  }
  return "read";
}

TEST(CliAmpStore, CaptureStoreErrorsNameTheStoreAndField) {
  const fs::path dir = fresh_amp("store_errors");
  const std::string p = (dir / "c.h5").string();
  const at::Tensor x = at::zeros({100});
  auto valid = [&](wavetrain::data::DatasetWriter& w) { w.add("valid", {{"input", x}, {"target", x}}); };
  EXPECT_EQ(capture_error(p, [&](auto& w) { w.add("train", {{"input", x}}); valid(w); }),
            p + ": split 'train' has no field 'target'; a capture store's items have the fields input and target");
  EXPECT_EQ(capture_error(p, [&](auto& w) { valid(w); }),
            p + ": no split 'train'; a capture store has the splits train and valid (wavetrain data amp)");
  EXPECT_EQ(capture_error(p, [&](auto& w) { w.add("train", {{"input", at::zeros({100, 2})}, {"target", at::zeros({100, 2})}}); valid(w); }),
            p + ": split 'train' item 0 field 'input' has shape [100, 2]; a capture field is one-dimensional [samples] (mono)");
  EXPECT_EQ(capture_error(p, [&](auto& w) { w.add("train", {{"input", at::zeros({100}, at::kLong)}, {"target", x}}); valid(w); }),
            p + ": split 'train' item 0 field 'input' holds Long values; capture samples are float32, float64, or int32, int16 or uint8 PCM");
  EXPECT_EQ(capture_error(p, [&](auto& w) { w.add("train", {{"input", x}, {"target", at::zeros({99})}}); valid(w); }),
            p + ": split 'train' item 0: input has 100 samples and target 99; they must be aligned sample for sample");
  EXPECT_EQ(capture_error(p, [&](auto& w) { w.add("train", {{"input", x}, {"target", x}}); valid(w); valid(w); }),
            p + ": split 'valid' has 2 items; a capture store has one validation item (wavetrain data amp writes one)");
  at::Tensor nan = at::zeros({96000});
  nan[72000] = std::nan("");
  EXPECT_EQ(capture_error(p, [&](auto& w) {
              w.set_attribute("sample_rate", int64_t{48000});
              w.add("train", {{"input", x}, {"target", x}});
              w.add("train", {{"input", at::zeros({96000})}, {"target", nan}});
              valid(w);
            }),
            p + ": split 'train' item 1 field 'target': sample 72000 (1.500000 s) is NaN; a capture must hold finite samples");

  // Through the command: one line, exit status 1 (before: "map::at").
  capture_error(p, [&](auto& w) { w.add("train", {{"input", x}}); valid(w); });
  const Result r = wavetrain_in(dir, "train +experiment=amp amp.data=c.h5 model.preset=nano trainer.max_epochs=1 run.dir=run");
  EXPECT_EQ(r.exit_code, 1);
  const size_t error = r.err.find("wavetrain: error: ");
  ASSERT_NE(error, std::string::npos) << r.err;
  EXPECT_EQ(r.err.substr(error), "wavetrain: error: c.h5: split 'train' has no field 'target'; a capture store's items have the fields input "
                                  "and target\n");
}

// The dtypes docs/data-format.md lists are read as audio: float64 as is, PCM integers scaled as
// WAV scales them (int16 / 32768, (uint8 - 128) / 128, int32 / 2^31).
TEST(CliAmpStore, CaptureStoreDtypesAreReadAsAudio) {
  const fs::path dir = fresh_amp("store_dtypes");
  const std::string p = (dir / "c.h5").string();
  {
    wavetrain::data::DatasetWriter w(p);
    w.set_attribute("sample_rate", 44100.0);
    w.add("train", {{"input", at::tensor({-32768, 0, 16384}, at::kShort)}, {"target", at::tensor({0, 128, 192}, at::kByte)}});
    w.add("valid", {{"input", at::tensor({0.25, -0.5, 1.0}, at::kDouble)}, {"target", at::tensor({-1073741824, 0, 1073741824}, at::kInt)}});
    w.finish();
  }
  const wavetrain::experiments::amp::CaptureData c = wavetrain::experiments::amp::read_capture(wavetrain::data::DatasetReader(p));
  EXPECT_EQ(c.sample_rate, 44100.0);
  EXPECT_TRUE(at::equal(c.train_input[0], at::tensor({-1.0f, 0.0f, 0.5f}))) << c.train_input[0];
  EXPECT_TRUE(at::equal(c.train_target[0], at::tensor({-1.0f, 0.0f, 0.5f}))) << c.train_target[0];
  EXPECT_TRUE(at::equal(c.valid_input, at::tensor({0.25f, -0.5f, 1.0f}))) << c.valid_input;
  EXPECT_TRUE(at::equal(c.valid_target, at::tensor({-0.5f, 0.0f, 0.5f}))) << c.valid_target;
}

// Several training items (several captures of one amp): every one gives windows, none straddles
// two items. Before, only item 0 was used, silently.
TEST(CliAmpStore, AmpTaskTrainsOnEveryTrainingItem) {
  const fs::path dir = fresh_amp("store_items");
  const std::string p = (dir / "c.h5").string();
  const at::Tensor a = at::arange(5000, at::kFloat) / 5000, b = -at::arange(3000, at::kFloat) / 3000;
  {
    wavetrain::data::DatasetWriter w(p);
    w.add("train", {{"input", a}, {"target", a}});
    w.add("train", {{"input", b}, {"target", b}});
    w.add("valid", {{"input", a}, {"target", a}});
    w.finish();
  }
  const wavetrain::config::Config cfg(wavetrain::config::load_yaml_string(
      "amp:\n  data: " + p + "\n  segment: 1000\n  burn_in: 500\nmodel:\n  architecture: lstm\n  preset: 1x12\n", "test"));
  const std::unique_ptr<wavetrain::Task> task = wavetrain::experiments::amp::make_amp_task(cfg);
  // Windows of 500 + 1000 samples every 1000: 4 in item 0 (5000 samples), 2 in item 1 (3000).
  ASSERT_EQ(task->size(wavetrain::Split::Train), 6);
  const wavetrain::Batch last = task->make_batch(wavetrain::Split::Train, {4, 5}, at::kCPU);
  EXPECT_TRUE(at::equal(last.input[0][0], b.narrow(0, 0, 1500)));
  EXPECT_TRUE(at::equal(last.input[1][0], b.narrow(0, 1000, 1500)));
  EXPECT_TRUE(at::equal(last.target[1][0], b.narrow(0, 1500, 1000)));
}

// A capture store of one 5000-sample ramp in each split (input = target), with a sample_rate
// attribute unless `rate` is 0: for the tests of what the amp task checks when it is built.
std::string write_ramp_store(const fs::path& dir, int64_t rate) {
  const std::string p = (dir / "c.h5").string();
  const at::Tensor a = at::arange(5000, at::kFloat) / 5000;
  wavetrain::data::DatasetWriter w(p);
  w.add("train", {{"input", a}, {"target", a}});
  w.add("valid", {{"input", a}, {"target", a}});
  if (rate > 0) w.set_attribute("sample_rate", rate);
  w.finish();
  return p;
}

// A rate that no .nam file may have (a typo, a damaged store) is refused before training, not
// found at export time.
TEST(CliAmpStore, AmpTaskRefusesARateNoNamFileMayHave) {
  const std::string p = write_ramp_store(fresh_amp("store_rate"), 800);
  for (const auto& [extra, message] : std::vector<std::pair<std::string, std::string>>{
           {"", "the capture store's sample_rate: 800 Hz is outside 1000 to 768000 Hz"},
           {"  sample_rate: 1.0\n", "amp.sample_rate (test:5): 1 Hz is outside 1000 to 768000 Hz"}}) {
    const wavetrain::config::Config cfg(wavetrain::config::load_yaml_string(
        "amp:\n  data: " + p + "\n  segment: 1000\n  burn_in: 500\n" + extra + "model:\n  architecture: lstm\n  preset: 1x12\n", "test"));
    try {
      wavetrain::experiments::amp::make_amp_task(cfg);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const std::exception& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
}

// A segment shorter than the loss's largest STFT needs is refused when the task is built, naming
// amp.segment and the FFT size (the first step's STFT error named neither).
TEST(CliAmpStore, AmpTaskRefusesASegmentTooShortForTheLoss) {
  const std::string p = write_ramp_store(fresh_amp("store_segment"), 0);
  const auto task_error = [&p](const std::string& amp_keys) -> std::string {
    const wavetrain::config::Config cfg(wavetrain::config::load_yaml_string(
        "amp:\n  data: " + p + "\n  burn_in: 500\n" + amp_keys + "model:\n  architecture: lstm\n  preset: 1x12\n", "t.yaml"));
    try {
      wavetrain::experiments::amp::make_amp_task(cfg);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  const std::string mrstft = "  loss: {mse: 1.0, mrstft: 0.0002, pre_emphasis: 0.85}\n";
  EXPECT_EQ(task_error("  segment: 1024\n" + mrstft),
            "amp.segment=1024 (t.yaml:4) is too short for the loss: amp.loss.mrstft's largest FFT (2048) after pre_emphasis "
            "(one sample fewer) needs segments of at least 1026 samples");
  EXPECT_EQ(task_error("  segment: 1026\n" + mrstft), "");
  EXPECT_EQ(task_error("  segment: 1024\n  loss: {mse: 1.0, mrstft: 0.0002}\n"),
            "amp.segment=1024 (t.yaml:4) is too short for the loss: amp.loss.mrstft's largest FFT (2048) needs segments of at "
            "least 1025 samples");
  EXPECT_EQ(task_error("  segment: 1025\n  loss: {mse: 1.0, mrstft: 0.0002}\n"), "");
  EXPECT_EQ(task_error("  segment: 16\n  loss: {mse: 1.0}\n"), "");  // no STFT, no bound
}

// The rate a model got from its capture store is recorded in its checkpoints' config (where a
// model loaded without the store finds it); one the config gave stays as given.
TEST(CliAmpStore, AmpTaskRecordsTheCapturesSampleRate) {
  const std::string p = write_ramp_store(fresh_amp("store_rate_recorded"), 44100);
  for (const auto& [extra, expected] : std::vector<std::pair<std::string, double>>{{"", 44100.0}, {"  sample_rate: 22050\n", 22050.0}}) {
    const wavetrain::config::Node tree = wavetrain::config::load_yaml_string(
        "amp:\n  data: " + p + "\n  segment: 1000\n  burn_in: 500\n" + extra + "model:\n  architecture: lstm\n  preset: 1x12\n", "test");
    const auto task = wavetrain::experiments::amp::make_amp_task(wavetrain::config::Config(tree));
    wavetrain::config::Node recorded = tree;
    task->add_to_recorded_config(recorded);
    ASSERT_NE(recorded.find_path("amp.sample_rate"), nullptr) << extra;
    const wavetrain::config::Node& rate = *recorded.find_path("amp.sample_rate");
    EXPECT_EQ(rate.kind() == wavetrain::config::Node::Kind::Int ? static_cast<double>(rate.int_value()) : rate.float_value(), expected);
  }
}

}  // namespace

// ---- infer, import nam, export nam: long audio streamed, bad rates refused, full disks (issue 21) -
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <limits>
#include <tuple>

#include "trainer/checkpoint.h"

namespace cli_amp_nam_io {

namespace amp = wavetrain::experiments::amp;
const std::string kNamModels = std::string(WAVETRAIN_TEST_DATA) + "/reference/nam/models/";

// The peak resident memory (KiB) of `wavetrain ARGS...`, run in `dir`, as wait4 reports it for
// that one child (not the largest of every child this test process ever had).
long peak_rss_kib(const fs::path& dir, const std::vector<std::string>& args, int* exit_code) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(127);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    std::vector<char*> argv = {const_cast<char*>(WAVETRAIN_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(WAVETRAIN_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return usage.ru_maxrss;
}

at::Tensor infer_signal(int64_t n) {
  const at::Tensor t = at::arange(n, at::kDouble);
  return (0.3 * at::sin(0.05 * t) + 0.05 * at::sin(0.31 * t)).to(at::kFloat);
}

// infer streams the file (read, resampled, played and written a block of 65,536 samples at a
// time) and writes what processing the whole file in memory gives, bit for bit, in every mode;
// resampled in and out too.
TEST(CliAmpNamIo, InferStreamsALongFileAsProcessingItWholeDoes) {
  const fs::path dir = fresh_amp("infer_streams");
  const at::Tensor x = infer_signal(200000);  // 3 blocks and a part
  wavetrain::data::write_wav((dir / "in.wav").string(), x, 48000, wavetrain::data::WavSubtype::kFloat32);
  wavetrain::data::write_wav((dir / "in44.wav").string(), x.narrow(0, 0, 150000), 44100, wavetrain::data::WavSubtype::kFloat32);
  struct Case {
    std::string model, mode;
    int64_t chunk, overlap;
    bool at_44k;  // resampled to the model's 48 kHz, played, resampled back
  };
  for (const Case& c : std::vector<Case>{{"wavenet", "exact", 4096, 0, false},  // LibTorch batches
                                         {"wavenet", "exact", 4096, 0, true},
                                         {"wavenet", "stream", 1000, 0, false},
                                         {"wavenet", "crossfade", 30000, 5000, false},
                                         {"lstm", "exact", 4096, 0, false},  // the engine
                                         {"lstm", "crossfade", 30000, 70000, true}}) {
    amp::AmpModel m = amp::read_nam(kNamModels + c.model + ".nam");
    amp::ProcessOptions o;
    o.mode = c.mode, o.chunk = c.chunk, o.overlap = c.overlap;
    const std::string where = c.model + " " + c.mode + (c.at_44k ? " at 44.1 kHz" : "");
    const Result r = wavetrain_in(dir, "infer '" + kNamModels + c.model + ".nam' " + (c.at_44k ? "in44.wav" : "in.wav") + " -o out.wav --mode " +
                                           c.mode + " --chunk " + std::to_string(c.chunk) + " --overlap " + std::to_string(c.overlap));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const at::Tensor y = wavetrain::data::read_audio((dir / "out.wav").string()).samples[0];
    const at::Tensor whole = c.at_44k ? wavetrain::data::resample(
                                            amp::process(m, wavetrain::data::resample(x.narrow(0, 0, 150000), 44100, 48000), o), 48000, 44100)
                                      : amp::process(m, x, o);
    ASSERT_EQ(y.numel(), c.at_44k ? 150000 : 200000) << where;
    EXPECT_TRUE(at::equal(y, whole)) << where;
  }
  EXPECT_EQ(std::vector<std::string>({"in.wav", "in44.wav", "out.wav"}), [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }());  // no .out.wav.partial left
}

// Memory does not grow with the input's length: 45 s of audio takes no more than 5 s does, within
// 20 MB (whole-file processing held about 27 bytes a sample: 52 MB more for the 40 s between them).
TEST(CliAmpNamIo, InferMemoryDoesNotGrowWithTheInputLength) {
  const fs::path dir = fresh_amp("infer_memory");
  long peak[2];
  const int seconds[2] = {5, 45};
  for (int i = 0; i < 2; ++i) {
    const std::string name = "in" + std::to_string(seconds[i]) + ".wav";
    wavetrain::data::write_wav((dir / name).string(), infer_signal(48000 * seconds[i]), 48000, wavetrain::data::WavSubtype::kFloat32);
    // Chunks of 4096: LibTorch's batches (a chunk per thread, up to 16) stay small on any machine.
    // The smaller of two runs: the threads' allocations once made one run 19 MB larger.
    peak[i] = std::numeric_limits<long>::max();
    for (int run = 0; run < 2; ++run) {
      int exit_code = -1;
      peak[i] = std::min(peak[i], peak_rss_kib(dir, {"infer", kNamModels + "wavenet.nam", name, "-o", "out.wav", "--chunk", "4096"}, &exit_code));
      ASSERT_EQ(exit_code, 0);
    }
    EXPECT_EQ(wavetrain::data::AudioFileReader((dir / "out.wav").string()).frames(), 48000 * seconds[i]);
  }
  std::printf("infer peak RSS: %ld KiB for 5 s, %ld KiB for 45 s\n", peak[0], peak[1]);
  EXPECT_LT(peak[1] - peak[0], 20 * 1024) << peak[0] << " KiB for 5 s, " << peak[1] << " KiB for 45 s";
}

// A model whose rate no audio has is refused where it is read: a checkpoint recording amp.sample_rate
// 0, -48000 or 4.6e18 (export nam) or 1 (infer), naming the file and the key; nothing written.
TEST(CliAmpNamIo, ACheckpointWithAnImpossibleSampleRateIsRefused) {
  const fs::path dir = fresh_amp("bad_rate");
  ASSERT_EQ(wavetrain_in(dir, "import nam '" + kNamModels + "wavenet.nam' -o good.ckpt").exit_code, 0);
  wavetrain::data::write_wav((dir / "in.wav").string(), infer_signal(4800), 48000);
  const wavetrain::TrainingState good = wavetrain::Checkpoint::load((dir / "good.ckpt").string());
  const size_t at = good.config_yaml.find("sample_rate: ");
  ASSERT_NE(at, std::string::npos) << good.config_yaml;
  const size_t end = good.config_yaml.find('\n', at);
  for (const auto& [rate, shown] : {std::pair<std::string, std::string>{"0", "0"}, {"-48000", "-48000"}, {"4.6e18", "4.6e+18"}, {"1", "1"}}) {
    const bool infer = rate == "1";  // played at 1 Hz, 4800 samples became a file of 3
    wavetrain::TrainingState bad = good;
    bad.config_yaml = good.config_yaml.substr(0, at) + "sample_rate: " + rate + good.config_yaml.substr(end);
    wavetrain::Checkpoint::save((dir / "bad.ckpt").string(), bad);
    const std::string expected =
        "wavetrain: error: amp.sample_rate (bad.ckpt (recorded config):5): " + shown + " Hz is outside 1000 to 768000 Hz\n";
    const Result r = wavetrain_in(dir, infer ? "infer bad.ckpt in.wav -o out.wav" : "export nam bad.ckpt -o bad.nam");
    EXPECT_EQ(r.exit_code, 1) << rate;
    EXPECT_EQ(r.err, expected) << rate;
    EXPECT_FALSE(fs::exists(dir / (infer ? "out.wav" : "bad.nam"))) << rate;
  }
  // A model made with such a rate is not written either.
  amp::AmpModel m = amp::read_nam(kNamModels + "wavenet.nam");
  m.sample_rate = 0;
  try {
    amp::write_nam((dir / "zero.nam").string(), m);
    ADD_FAILURE() << "written at 0 Hz";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "zero.nam").string() + ": not written: sample_rate: 0 Hz is outside 1000 to 768000 Hz");
  }
  EXPECT_FALSE(fs::exists(dir / "zero.nam"));
}

// export nam on a full disk (RLIMIT_FSIZE of 1 KiB, SIGXFSZ ignored so that write() fails with
// EFBIG): exit 1, one line naming the file and the reason, no temporary left beside it.
TEST(CliAmpNamIo, ExportNamOnAFullDiskSaysWhyAndLeavesNothing) {
  const fs::path dir = fresh_amp("export_full");
  ASSERT_EQ(wavetrain_in(dir, "import nam '" + kNamModels + "my_model.nam' -o model.ckpt").exit_code, 0);
  fs::create_directories(dir / "out");
  const Result r = wavetrain::testing::run_shell("cd '" + dir.string() + "' && bash -c \"trap '' XFSZ; ulimit -f 1; exec '" WAVETRAIN_BINARY
                                                 "' export nam model.ckpt -o out/x.nam\"");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("wavetrain: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("out/x.nam"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir / "out"));
  // And with room, the same command writes it, and removes what an export killed while writing
  // this file left (the temporaries of write_file_atomic's naming, not other files).
  std::ofstream(dir / "out/x.nam.tmp.Ab12Cd") << "half of an earlier export";
  std::ofstream(dir / "out/y.nam.tmp.Ab12Cd") << "another file's";
  const Result ok = wavetrain_in(dir, "export nam model.ckpt -o out/x.nam");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_FALSE(fs::exists(dir / "out/x.nam.tmp.Ab12Cd"));
  EXPECT_TRUE(fs::exists(dir / "out/y.nam.tmp.Ab12Cd"));
  EXPECT_EQ(amp::read_nam_file((dir / "out/x.nam").string()).weights.size(), 13802u);
}

}  // namespace cli_amp_nam_io
