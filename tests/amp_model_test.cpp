// NAM's models: preset sizes and receptive fields, the .nam round trip, an independent reading of an
// exported file (tests/python/nam_forward.py), and long-audio processing in chunks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tests/run_process.h"
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <nlohmann/json.hpp>

#include "data/audio_io.h"
#include "experiments/amp/amp_model.h"
#include "experiments/amp/wavenet_cpu.h"
#include "experiments/amp/dsp_kernels.h"

namespace wavetrain::experiments::amp {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("wavetrain_amp_" + std::to_string(::getpid()) + "_" + name)).string();
}

at::Tensor test_signal(int64_t n) {
  const at::Tensor t = at::arange(n, at::kDouble);
  return (0.5 * at::sin(0.01 * t) + 0.1 * at::sin(0.37 * t)).to(at::kFloat);
}

// Random weights, so that every weight matters in the comparisons below.
void randomize(AmpModel& m, uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::manual_seed(seed);
  for (at::Tensor p : m.module().parameters()) p.copy_(at::randn_like(p) * 0.3);
}

TEST(AmpModels, PresetSizesAndReceptiveFields) {
  const std::pair<const char*, int64_t> wavenets[] = {{"standard", 13801}, {"lite", 6553}, {"feather", 3025}, {"nano", 841}};
  for (const auto& [name, params] : wavenets) {
    const AmpModel m = make_amp_model("wavenet", name);
    EXPECT_EQ(m.parameters(), params) << name;
    EXPECT_EQ(m.receptive_field(), 4093) << name;
    EXPECT_EQ(m.wavenet->export_weights().size(), static_cast<size_t>(params + 1)) << name;  // + head_scale
  }
  // 4h(1 + h) + 8h (two biases) + 2h (initial states) + h + 1 (head), per layer for the first; the
  // second of 2x8 takes 8 inputs.
  const std::pair<const char*, int64_t> lstms[] = {{"1x24", 2665}, {"2x8", 969}, {"1x16", 1265}, {"1x12", 757}};
  for (const auto& [name, params] : lstms) {
    AmpModel m = make_amp_model("lstm", name);
    // PyTorch keeps two biases per layer, NAM's file their sum: the file has hidden x 4 fewer.
    const LstmConfig c = m.lstm->config();
    EXPECT_EQ(m.parameters(), params) << name;
    EXPECT_EQ(m.lstm->export_weights().size(), static_cast<size_t>(params - 4 * c.hidden_size * c.num_layers)) << name;
  }
  AmpModel w = make_amp_model("wavenet", "nano");
  EXPECT_EQ(w.wavenet->forward(at::zeros({2, 1, 5000})).sizes(), (std::vector<int64_t>{2, 1, 5000 - 4093 + 1}));
  EXPECT_THROW(w.wavenet->forward(at::zeros({1, 1, 4000})), std::invalid_argument);
  EXPECT_THROW(make_amp_model("wavenet", "huge"), std::invalid_argument);
  // A dilation below 1 is refused when the model is built (the CPU kernels index with it).
  WaveNetConfig bad = wavenet_preset("nano");
  bad.layers[0].dilations[2] = 0;
  try {
    NamWaveNet rejected(nam_of(bad));
    ADD_FAILURE() << "dilation 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "WaveNet: layer array 0, layer 2 has dilation 0; dilations must be >= 1");
  }
  // What the CPU kernels do not cover is said, and left to LibTorch's ops.
  NamWaveNetSpec gated = nam_of(wavenet_preset("nano"));
  set_activation(gated, "", "gated");
  EXPECT_TRUE(NamWaveNet(gated)->cpu_kernels_cover());
  gated.arrays[1].layers[4].secondary = ActivationSpec{"Tanh", {}};
  std::string why;
  EXPECT_FALSE(kernel_net_of(gated, &why).has_value());
  EXPECT_EQ(why, "layer array 1 gates with Tanh");
  EXPECT_FALSE(NamWaveNet(gated)->cpu_kernels_cover());
  NamWaveNetSpec a2 = nam_wavenet_preset("a2");
  EXPECT_TRUE(kernel_net_of(a2).has_value());  // its kernel sizes 6 and 15, LeakyReLU, a 16-tap head
  set_activation(a2, "SiLU", "blended");
  EXPECT_TRUE(kernel_net_of(a2).has_value());
  set_activation(a2, "Softsign", "");
  EXPECT_FALSE(kernel_net_of(a2, &why).has_value());
  EXPECT_EQ(why, "layer array 0 uses Softsign");
  a2 = nam_wavenet_preset("a2");
  a2.arrays[0].bottleneck = 4;
  EXPECT_FALSE(kernel_net_of(a2, &why).has_value());
  EXPECT_EQ(why, "layer array 0 has a bottleneck");
  for (const char* preset : {"standard", "lite", "feather", "nano"}) EXPECT_TRUE(make_amp_model("wavenet", preset).wavenet->cpu_kernels_cover()) << preset;
  // The kernels check the parameters they are given against the net.
  const NamWaveNet nano(nam_of(wavenet_preset("nano")));
  std::vector<at::Tensor> fewer = nano->ordered_parameters();
  fewer.pop_back();
  EXPECT_THROW(wavenet_cpu_forward(*kernel_net_of(nano->spec()), fewer, at::zeros({1, 1, 5000})), std::invalid_argument);
}

TEST(AmpModels, NamFilesRoundTrip) {
  for (const auto& [arch, preset] : {std::pair<std::string, std::string>{"wavenet", "lite"}, {"lstm", "2x8"}}) {
    AmpModel m = make_amp_model(arch, preset);
    randomize(m, 1);
    m.metadata = {{"name", "test"}, {"training", {{"validation_esr", 0.0123}}}};
    const std::string path = temp_path(arch + ".nam");
    write_nam(path, m);
    AmpModel back = read_nam(path);
    EXPECT_EQ(back.architecture, m.architecture);
    EXPECT_EQ(back.metadata["training"]["validation_esr"], 0.0123);
    EXPECT_TRUE(back.metadata.contains("date"));
    const at::Tensor x = test_signal(6000);
    const at::Tensor a = process(m, x), b = process(back, x);
    EXPECT_LE((a - b).abs().max().item<double>(), 1e-6 * std::max(1.0, a.abs().max().item<double>())) << arch;
    std::filesystem::remove(path);
  }
  const std::string broken = temp_path("broken.nam");
  std::ofstream(broken) << R"({"version": "0.5.4", "architecture": "WaveNet", "config": {"layers": [], "head_scale": 0.02}, "weights": []})";
  try {
    read_nam(broken);
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), broken + ": config.layers: expected a non-empty list of layer arrays, found a list");
  }
}

// The weight count computed from a config (what a .nam file is checked against before any module
// is built) equals what the built model exports, for every preset and a gated two-output model.
TEST(AmpModels, WeightCountFromTheConfigEqualsTheModel) {
  for (const std::string& p : wavenet_preset_names()) {
    const NamWaveNet w(nam_of(wavenet_preset(p)));
    EXPECT_EQ(wavenet_weight_count(wavenet_preset(p)), static_cast<int64_t>(w->export_weights().size())) << p;
  }
  WaveNetConfig gated = wavenet_preset("nano");
  gated.layers[0].gated = true;
  gated.layers[1].head_bias = false;
  gated.layers[1].kernel_size = 4;
  EXPECT_EQ(wavenet_weight_count(gated), static_cast<int64_t>(NamWaveNet(nam_of(gated))->export_weights().size()));
  for (const std::string& p : lstm_preset_names()) {
    const Lstm l(lstm_preset(p));
    EXPECT_EQ(lstm_weight_count(l->config()), static_cast<int64_t>(l->export_weights().size())) << p;
  }
}

// An outside audit's .nam files with absurd sizes (an LSTM of 10,000 layers, huge channel counts,
// kernel sizes, dilations) are refused at import with the limit they broke, before any module is
// built; so are wrong types and weight counts, each with the file's name.
TEST(AmpModels, NamFilesWithAbsurdSizesAreRefused) {
  const std::string path = temp_path("absurd.nam");
  auto expect_refused = [&](const nlohmann::json& j, const std::string& expected) {
    std::ofstream(path) << j.dump();
    try {
      read_nam(path);
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  nlohmann::json lstm = {{"version", "0.5.4"}, {"architecture", "LSTM"},
                         {"config", {{"input_size", 1}, {"hidden_size", 24}, {"num_layers", 10000}}}, {"weights", nlohmann::json::array()}};
  expect_refused(lstm, "num_layers 10000 and hidden_size 24; the limits are 16 layers and 4096 hidden units");
  lstm["config"]["num_layers"] = 16;
  lstm["config"]["hidden_size"] = 4096;
  expect_refused(lstm, "16 layers of 4096 units have 2080788481 weights; the limit is 16777216");
  lstm["config"]["hidden_size"] = 8;
  expect_refused(lstm, "0 weights, its config has");

  AmpModel nano = make_amp_model("wavenet", "nano");
  write_nam(path, nano);
  nlohmann::json wavenet;
  std::ifstream(path) >> wavenet;
  auto with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json j = wavenet;
    j["config"]["layers"][0][key] = value;
    return j;
  };
  expect_refused(with("channels", 1000000), "config.layers[0]: channels 1000000; the limit is 1024");
  expect_refused(with("kernel_size", 1000000), "config.layers[0]: kernel size 1000000; the limit is 64");
  expect_refused(with("dilations", {1, 1000000000}), "config.layers[0]: dilation 1000000000; the limit is 65536");
  expect_refused(with("dilations", std::vector<int>(1000, 1)), "config.layers[0].dilations: 1000 layers; the limit is 128");
  expect_refused(with("dilations", std::vector<int>(128, 65536)), "config: receptive field 16781055 samples; the limit is 1048576");
  expect_refused(with("channels", "sixteen"), "config.layers[0].channels: expected an integer, found a string (\"sixteen\")");
  // The nam fuzzer's: a size past int64 was converted with a plain cast (undefined behaviour).
  expect_refused(with("kernel_size", 1.1111111111111111e114), "config.layers[0].kernel_size: expected an integer, found 1.11111111111111");
  expect_refused(with("kernel_size", 3.5), "config.layers[0].kernel_size: expected an integer, found 3.5");
  expect_refused(with("channels", std::numeric_limits<uint64_t>::max()), "config.layers[0].channels: expected an integer below 2^63, found 18446744073709551615");
  expect_refused(with("dilations", {1, -2.5}), "config.layers[0].dilations[1]: expected an integer, found -2.5");
  expect_refused(with("dilations", 4), "config.layers[0].dilations: expected a list of integers, found 4");
  lstm["config"]["hidden_size"] = 1e300;
  expect_refused(lstm, "config.hidden_size: expected an integer, found 1e+300");
  {  // an integral float (3.0) is a size, as NAM's own C++ reader takes it
    std::ofstream(path) << with("kernel_size", 3.0).dump();
    EXPECT_EQ(read_nam(path).wavenet->classic_config()->layers[0].kernel_size, 3);
  }
  expect_refused(with("activation", "RdLU"), "config.layers[0].activation: activation 'RdLU' is not supported; supported: Tanh, Fasttanh, Hardtanh, LeakyHardtanh, ReLU, LeakyReLU, PReLU, Sigmoid, SiLU, Hardswish, Softsign");
  nlohmann::json many = wavenet;
  many["config"]["layers"] = std::vector<nlohmann::json>(100, wavenet["config"]["layers"][0]);
  expect_refused(many, "config.layers: 100 layer arrays; the limit is 16");
  nlohmann::json j = wavenet;
  j["weights"].push_back(0.5);
  expect_refused(j, "843 weights, its config has 842");
  j = wavenet;
  j["weights"][3] = "x";
  expect_refused(j, "weights[3]: expected a number, found a string (\"x\")");
  j = wavenet;
  j["weights"][6] = 7.7e81;  // the nam fuzzer's: read as inf, written back as null
  expect_refused(j, "weights[6]: is 7.7e+81, not a finite float32 value");
  j = wavenet;
  j["version"] = 5;
  expect_refused(j, "version: expected a string such as \"0.5.4\", found 5");
  j = wavenet;
  j["sample_rate"] = 1e12;
  expect_refused(j, "sample_rate: 1e+12 Hz is outside 1000 to 768000 Hz");
  expect_refused(nlohmann::json::array({1, 2}), ": expected a JSON object (a .nam model), found a list");
  {  // and a model with a non-finite weight is not written (JSON cannot hold it)
    torch::NoGradGuard no_grad;
    nano.wavenet->parameters()[0].view({-1})[0] = std::numeric_limits<float>::infinity();
    EXPECT_THROW(write_nam(path, nano), std::runtime_error);
  }
  std::filesystem::remove(path);
}

TEST(AmpModels, AnIndependentReaderOfTheFileGetsTheSameOutput) {
  AmpModel m = make_amp_model("wavenet", "feather");
  randomize(m, 2);
  const std::string path = temp_path("feather.nam");
  write_nam(path, m);
  const int64_t n = 5000;
  const std::string out = wavetrain::testing::python_output("nam_forward.py " + path + " " + std::to_string(n));
  std::filesystem::remove(path);
  if (out.empty()) GTEST_SKIP() << WAVETRAIN_TEST_PYTHON << " cannot import torch: install Debian's python3-torch";
  std::vector<double> values;
  std::istringstream in(out);
  for (double v; in >> v;) values.push_back(v);
  ASSERT_EQ(values.size(), static_cast<size_t>(n));
  const at::Tensor expected = at::tensor(values, at::kDouble);
  const at::Tensor mine = process(m, test_signal(n)).to(at::kDouble);
  const double rms = expected.square().mean().sqrt().item<double>();
  EXPECT_GT(rms, 1e-3);
  EXPECT_LE(((mine - expected).square().mean().sqrt() / rms).item<double>(), 1e-5);  // relative RMS
}

// The NAM trainer's own package (neural-amp-modeler 0.12.3, the .venv's test client) loads our
// exports with its own loader (nam.models.init_from_nam) and runs its own torch model: WaveNet
// presets, a gated WaveNet with a kernel-4 two-output head array, and LSTMs.
TEST(AmpModels, NeuralAmpModelersOwnLoaderGetsTheSameOutput) {
  WAVETRAIN_REQUIRE_CLIENT(wavetrain::testing::client_importable("nam.models"),
                           "neural-amp-modeler is not in " WAVETRAIN_CLIENT_PYTHON);
  WaveNetConfig gated = wavenet_preset("nano");
  gated.layers[0].gated = true;
  gated.layers[1].kernel_size = 4;
  std::vector<std::pair<std::string, AmpModel>> models;
  for (const char* preset : {"nano", "standard"}) models.emplace_back(std::string("wavenet ") + preset, make_amp_model("wavenet", preset));
  models.emplace_back("wavenet gated", make_amp_model("wavenet", "nano"));
  models.back().second.wavenet = NamWaveNet(nam_of(gated));
  for (const char* preset : {"1x12", "2x8"}) models.emplace_back(std::string("lstm ") + preset, make_amp_model("lstm", preset));
  const int64_t n = 6000;
  std::string paths;
  for (size_t i = 0; i < models.size(); ++i) {
    randomize(models[i].second, 4 + i);
    const std::string path = temp_path("nam_loader_" + std::to_string(i) + ".nam");
    write_nam(path, models[i].second);
    paths += path + " ";
  }
  const wavetrain::testing::ProcessResult r = wavetrain::testing::client_run("nam_loader.py " + paths + std::to_string(n));
  for (size_t i = 0; i < models.size(); ++i) std::filesystem::remove(temp_path("nam_loader_" + std::to_string(i) + ".nam"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> values;
  std::istringstream in(r.out);
  for (double v; in >> v;) values.push_back(v);
  ASSERT_EQ(values.size(), models.size() * n);
  for (size_t i = 0; i < models.size(); ++i) {
    auto& [name, m] = models[i];
    const at::Tensor theirs = at::tensor(values, at::kDouble).narrow(0, i * n, n);
    ProcessOptions from_stored_state;  // NAM's Python runs the LSTM without the plugin's prewarm
    from_stored_state.prewarm = false;
    const at::Tensor mine = process(m, test_signal(n), from_stored_state).to(at::kDouble);
    const double rms = theirs.square().mean().sqrt().item<double>();
    EXPECT_GT(rms, 1e-3) << name;
    EXPECT_LE(((mine - theirs).square().mean().sqrt() / rms).item<double>(), 1e-5) << name;  // relative RMS
  }
}

TEST(AmpModels, ChunkedProcessingEqualsOnePass) {
  const at::Tensor x = test_signal(20000);
  for (const auto& [arch, preset] : {std::pair<std::string, std::string>{"wavenet", "nano"}, {"lstm", "1x12"}}) {
    AmpModel m = make_amp_model(arch, preset);
    randomize(m, 3);
    ProcessOptions whole;
    whole.chunk = 20000;
    const at::Tensor reference = process(m, x, whole);
    for (int64_t chunk : {1000, 4096, 7777}) {
      ProcessOptions o;
      o.chunk = chunk;
      const at::Tensor y = process(m, x, o);
      EXPECT_LE((y - reference).abs().max().item<double>(), 1e-5 * reference.abs().max().item<double>()) << arch << chunk;
    }
    // Stream mode (real-time buffers) gives the same output, for any buffer size.
    for (int64_t buffer : {1, 64, 777}) {
      ProcessOptions st;
      st.mode = "stream";
      st.chunk = buffer;
      const at::Tensor y = process(m, buffer == 1 ? x.narrow(0, 0, 3000) : x, st);
      const at::Tensor ref = buffer == 1 ? reference.narrow(0, 0, 3000) : reference;
      EXPECT_LE((y - ref).abs().max().item<double>(), 1e-5 * reference.abs().max().item<double>()) << arch << " stream " << buffer;
    }
    // Crossfade mode is an approximation for models without exact context; it stays close here.
    ProcessOptions c;
    c.mode = "crossfade";
    c.chunk = 8000;
    c.overlap = arch == "wavenet" ? 4096 : 2000;
    const at::Tensor approx = process(m, x, c);
    EXPECT_EQ(approx.numel(), x.numel());
    EXPECT_TRUE(at::isfinite(approx).all().item<bool>());
    if (arch == "wavenet") {  // 4096 samples of lead-in cover its receptive field: exact outside the crossfades
      at::Tensor outside = at::ones({x.numel()}, at::kBool);
      for (int64_t s = 8000; s < x.numel(); s += 8000) outside.narrow(0, s - 4096, 4096).fill_(false);
      EXPECT_LE((approx - reference).masked_select(outside).abs().max().item<double>(),
                1e-5 * reference.abs().max().item<double>());
    }
  }
}

// The hand-written CPU forward and backward (wavenet_cpu.h) against LibTorch's conv1d path, with a
// loss that weights every output sample differently.
// weight_scale: the random weights' standard deviation. With ReLU-like activations keep it small:
// at 0.3 twenty layers grow the signal ~10^4-fold, so many pre-activations lie within float32
// rounding of the kink, and which side each lands on (in either path) moves the gradient by 1e-3.
void expect_cpu_kernels_match_libtorch(const NamWaveNetSpec& spec, const std::string& name, double weight_scale = 0.3) {
  NamWaveNet net(spec);
  ASSERT_TRUE(net->cpu_kernels_cover()) << name;
  {
    torch::NoGradGuard no_grad;
    at::manual_seed(5);
    for (at::Tensor p : net->parameters()) p.copy_(at::randn_like(p) * weight_scale);
  }
  at::manual_seed(6);
  const at::Tensor x = at::randn({3, 1, net->receptive_field() + 700}) * 0.5;
  const at::Tensor weights = at::randn({3, spec.arrays.back().head_size, 701});
  auto run = [&](bool kernels, at::ScalarType dtype) {
    net->to(dtype);
    net->set_cpu_kernels(kernels);
    net->zero_grad();
    const at::Tensor y = net->forward(x.to(dtype));
    (y * weights.to(dtype)).sum().backward();
    std::vector<at::Tensor> grads;
    // The last layer's 1x1 output feeds nothing, so its gradient stays undefined (both paths).
    int undefined = 0;
    for (const at::Tensor& p : net->ordered_parameters()) {
      undefined += !p.grad().defined();
      grads.push_back(p.grad().defined() ? p.grad().to(at::kDouble).clone() : at::zeros_like(p, at::kDouble));
    }
    EXPECT_EQ(undefined, 2) << name << (kernels ? " kernels" : " LibTorch");
    net->to(at::kFloat);
    return std::make_pair(y.detach().to(at::kDouble), grads);
  };
  const auto [y_ref, g_ref] = run(false, at::kDouble);  // LibTorch in float64: the reference
  const double scale = y_ref.abs().max().item<double>();
  const auto [y_lt, g_lt] = run(false, at::kFloat);     // LibTorch in float32: its rounding error
  const auto [y, g] = run(true, at::kFloat);
  {  // inference (no gradient): the same kernels with buffers reused across layers
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(at::equal(net->forward(x).to(at::kDouble), y)) << name;
  }
  wavenet_cpu_use_baseline_isa(true);
  const auto [y_base, g_base] = run(true, at::kFloat);  // the baseline-ISA variant of the kernels
  wavenet_cpu_use_baseline_isa(false);
  wavenet_cpu_use_no_avx512(true);
  const auto [y_avx2, g_avx2] = run(true, at::kFloat);  // the AVX2 variant, where AVX-512 is the default
  wavenet_cpu_use_no_avx512(false);
  net->set_cpu_kernels(true);
  EXPECT_LE((y_base - y_ref).abs().max().item<double>(), 5e-6 * scale) << name << " baseline ISA";
  EXPECT_LE((y_avx2 - y_ref).abs().max().item<double>(), 5e-6 * scale) << name << " AVX2 at most";
  // Each parameter's gradient within 5e-5 of its norm, or within 4x of LibTorch's own float32 error
  // on it (a gradient 10^4 times smaller than the rest, as A2's last layers have, is summed from
  // terms that cancel, and float32 keeps fewer of its digits in either path).
  auto bound = [&](size_t k) {
    return std::max(5e-5 * g_ref[k].norm().item<double>(), 4 * (g_lt[k] - g_ref[k]).norm().item<double>());
  };
  for (size_t k = 0; k < g_base.size(); ++k) {
    EXPECT_LE((g_base[k] - g_ref[k]).norm().item<double>(), bound(k)) << name << " baseline ISA " << k;
    EXPECT_LE((g_avx2[k] - g_ref[k]).norm().item<double>(), bound(k)) << name << " AVX2 at most " << k;
  }
  ASSERT_EQ(y.sizes(), y_ref.sizes());
  EXPECT_GT(scale, 1e-3);
  const double e_lt = (y_lt - y_ref).abs().max().item<double>() / scale, e = (y - y_ref).abs().max().item<double>() / scale;
  std::printf("%s: output max error / max |y|: kernels %.2e, LibTorch float32 %.2e\n", name.c_str(), e, e_lt);
  EXPECT_LE(e, 5e-6) << name;
  ASSERT_EQ(g.size(), g_ref.size());
  int zero = 0;
  double worst = 0, worst_lt = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    const double norm = g_ref[k].norm().item<double>();
    zero += norm == 0;
    const double r = (g[k] - g_ref[k]).norm().item<double>() / std::max(norm, 1e-300);
    worst = std::max(worst, norm == 0 ? 0.0 : r);
    worst_lt = std::max(worst_lt, norm == 0 ? 0.0 : (g_lt[k] - g_ref[k]).norm().item<double>() / norm);
    EXPECT_LE((g[k] - g_ref[k]).norm().item<double>(), bound(k)) << name << " parameter " << k;
  }
  std::printf("%s: worst relative L2 gradient error: kernels %.2e, LibTorch float32 %.2e\n", name.c_str(), worst, worst_lt);
  // Float rounding, amplified alike through the tanh layers with random weights: the kernels' error
  // is of the same size as LibTorch's own in float32.
  EXPECT_LE(e, 4 * e_lt) << name;
  EXPECT_LE(worst, 4 * worst_lt) << name;
  EXPECT_EQ(zero, 2) << name;  // just that unused 1x1's weight and bias
}

// Every preset (channel counts 16/8, 12/6, 8/4, 4/2: vector kernels and plain loops), and two
// shapes NAM's presets do not have: three arrays with kernel sizes 2, 3 and 1 and odd channel
// counts; one array with kernel size 4 and a two-channel output.
TEST(AmpModels, CpuKernelsMatchLibTorchForwardAndGradients) {
  for (const std::string& preset : wavenet_preset_names()) expect_cpu_kernels_match_libtorch(nam_of(wavenet_preset(preset)), preset);
  auto array = [](int64_t in, int64_t channels, int64_t head, int64_t kernel, std::vector<int64_t> dilations, bool head_bias) {
    LayerArrayConfig a;
    a.input_size = in;
    a.channels = channels;
    a.head_size = head;
    a.kernel_size = kernel;
    a.dilations = std::move(dilations);
    a.head_bias = head_bias;
    return a;
  };
  WaveNetConfig three;
  three.layers = {array(1, 3, 5, 2, {1, 2, 5}, true), array(3, 5, 4, 3, {2, 1}, false), array(5, 4, 1, 1, {3, 1}, true)};
  expect_cpu_kernels_match_libtorch(nam_of(three), "three arrays");
  WaveNetConfig one;
  one.layers = {array(1, 16, 2, 4, {1, 7}, true)};
  expect_cpu_kernels_match_libtorch(nam_of(one), "one array, two outputs");
  // 24 and 32 channels: the wider tiles of each variant (the baseline's 6 and 8 vectors of 4).
  for (int64_t channels : {24, 32}) {
    WaveNetConfig wide;
    wide.layers = {array(1, channels, 1, 2, {1, 3}, true)};
    expect_cpu_kernels_match_libtorch(nam_of(wide), std::to_string(channels) + " channels");
  }
}

// The activations besides Tanh, each through its derivative from the output or (SiLU, gated and
// blended layers) from the kept conv outputs, a kernel size per layer and heads wider than 1x1: A2
// and a2_small (8 and 3 channels, kernels 6 and 15, LeakyReLU 0.01, a 16-tap head), the standard
// preset with ReLU, Sigmoid and SiLU, gated Tanh and blended SiLU (Gate's 8-lane path), A2 with
// gated Sigmoid (the same path at 8 channels), lite's 12/6 channels (vector
// tiles and the plain loop) with LeakyReLU of another slope, and three arrays whose first and
// last heads have 3 taps 2 apart and 4 taps (the next array then takes fewer rows), with a gated
// and a blended layer among them.
TEST(AmpModels, CpuKernelsMatchLibTorchForEveryActivationAndPerLayerKernelSizes) {
  expect_cpu_kernels_match_libtorch(nam_wavenet_preset("a2"), "A2", 0.1);
  expect_cpu_kernels_match_libtorch(nam_wavenet_preset("a2_small"), "a2_small", 0.05);
  for (const auto& [activation, gating] : std::vector<std::pair<std::string, std::string>>{
           {"ReLU", "none"}, {"Sigmoid", "none"}, {"SiLU", "none"}, {"Tanh", "gated"}, {"SiLU", "blended"}}) {
    NamWaveNetSpec s = nam_of(wavenet_preset("standard"));
    set_activation(s, activation, gating);
    expect_cpu_kernels_match_libtorch(s, "standard, " + activation + " " + gating, 0.1);
  }
  // 8 channels: Gate's vectors one a row, so blocks end in 1-3 vectors past the last group of 4.
  NamWaveNetSpec a2_gated = nam_wavenet_preset("a2");
  set_activation(a2_gated, "Sigmoid", "gated");
  expect_cpu_kernels_match_libtorch(a2_gated, "A2, gated Sigmoid", 0.1);
  NamWaveNetSpec lite = nam_of(wavenet_preset("lite"));
  for (NamLayerSpec& l : lite.arrays[0].layers) l.activation = ActivationSpec{"LeakyReLU", {0.2}};
  for (NamLayerSpec& l : lite.arrays[1].layers) l.activation = ActivationSpec{"LeakyReLU", {0.2}};
  expect_cpu_kernels_match_libtorch(lite, "lite, LeakyReLU 0.2", 0.1);
  WaveNetConfig three;
  for (const auto& [in, channels, head, kernel] : std::vector<std::array<int64_t, 4>>{{1, 3, 5, 2}, {3, 5, 4, 3}, {5, 4, 2, 1}}) {
    LayerArrayConfig a;
    a.input_size = in;
    a.channels = channels;
    a.head_size = head;
    a.kernel_size = kernel;
    a.dilations = {1, 2, 3};
    three.layers.push_back(a);
  }
  NamWaveNetSpec heads = nam_of(three);
  heads.arrays[1].layers[1].gating = Gating::Gated;  // and Gate's layers amid the others
  heads.arrays[2].layers[0].gating = Gating::Blended;
  heads.arrays[2].layers[0].activation = ActivationSpec{"SiLU", {}};
  heads.arrays[0].head_kernel = 3;
  heads.arrays[0].head_dilation = 2;
  heads.arrays[2].head_kernel = 4;
  expect_cpu_kernels_match_libtorch(heads, "three arrays, heads of 3 and 4 taps");
}

// A checkpoint of the classic module this one replaced (its names, no head_scale buffer, with and
// without DataParallel's prefix) loads into today's module, every tensor where it belongs.
TEST(AmpModels, CheckpointsOfTheClassicModuleLoad) {
  const WaveNetConfig c = wavenet_preset("nano");
  NamWaveNet source(nam_of(c));
  {
    torch::NoGradGuard no_grad;
    at::manual_seed(9);
    for (at::Tensor p : source->parameters()) p.copy_(at::randn_like(p));
  }
  // The classic module's names, in its registration order (which is also the file's order).
  std::vector<std::string> old_names;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const std::string a = "layers" + std::to_string(i) + "_";
    old_names.push_back(a + "rechannel.weight");
    for (size_t j = 0; j < c.layers[i].dilations.size(); ++j)
      for (const char* t : {"conv.weight", "conv.bias", "input_mixer.weight", "1x1.weight", "1x1.bias"})
        old_names.push_back(a + "layer" + std::to_string(j) + "_" + t);
    old_names.push_back(a + "head_rechannel.weight");
    if (c.layers[i].head_bias) old_names.push_back(a + "head_rechannel.bias");
  }
  const std::vector<at::Tensor>& tensors = source->ordered_parameters();
  ASSERT_EQ(old_names.size(), tensors.size());
  for (const std::string prefix : {"", "module."}) {
    StateDict old;
    for (size_t k = 0; k < tensors.size(); ++k) old.emplace_back(prefix + old_names[k], tensors[k].detach());
    NamWaveNet loaded(nam_of(c));
    const LoadReport report = load_state_dict(*loaded, old, /*strict=*/true, "old.ckpt");
    EXPECT_TRUE(report.complete()) << prefix << report.describe();
    for (size_t k = 0; k < tensors.size(); ++k) EXPECT_TRUE(at::equal(loaded->ordered_parameters()[k], tensors[k])) << prefix << old_names[k];
    EXPECT_DOUBLE_EQ(loaded->head_scale(), source->head_scale());
  }
  // A name the classic module never had is still refused, by name.
  StateDict wrong = {{"layers0_layer0_gate.weight", tensors[1].detach()}};
  try {
    load_state_dict(*NamWaveNet(nam_of(c)), wrong, /*strict=*/true, "old.ckpt");
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected keys (in the file, not in the model): layers0_layer0_gate.weight"), std::string::npos) << e.what();
  }
}

// Every preset streams (the real-time engine) as LibTorch computes it in exact mode, in both compiled
// variants (AVX2 + FMA where the CPU has them, and the baseline); buffers of 37 leave a remainder
// after the kernels' time tiles.
TEST(AmpModels, StreamingEqualsExactForEveryPreset) {
  const at::Tensor x = test_signal(9000);
  for (const std::string& preset : wavenet_preset_names()) {
    AmpModel m = make_amp_model("wavenet", preset);
    randomize(m, 4);
    const at::Tensor exact = process(m, x);
    for (int64_t buffer : {64, 37}) {
      ProcessOptions st;
      st.mode = "stream";
      st.chunk = buffer;
      const at::Tensor y = process(m, x, st);
      EXPECT_LE((y - exact).abs().max().item<double>(), 1e-5 * exact.abs().max().item<double>()) << preset << " " << buffer;
    }
    dsp::force_baseline(true);
    ProcessOptions st;
    st.mode = "stream";
    st.chunk = 64;
    const at::Tensor y = process(m, x, st);
    dsp::force_baseline(false);
    EXPECT_LE((y - exact).abs().max().item<double>(), 1e-5 * exact.abs().max().item<double>()) << preset << " baseline";
  }
}

// What `wavetrain infer` streams with (issue 21: memory bounded for long audio): AmpStream gives
// process()'s output bit for bit, in every mode and for every kind of model, whatever sizes the
// input arrives in: exact through the module in batches (a WaveNet the CPU kernels cover) or the
// engine (A2, the LSTM), stream buffers, crossfades shorter and longer than a chunk.
TEST(AmpModels, StreamingInPiecesEqualsProcessingTheWhole) {
  const at::Tensor x = test_signal(50000);
  const float* in = x.data_ptr<float>();
  for (const auto& [arch, preset] : {std::pair<std::string, std::string>{"wavenet", "nano"}, {"wavenet", "a2_small"}, {"lstm", "1x12"}}) {
    AmpModel m = make_amp_model(arch, preset);
    randomize(m, 5);
    for (const auto& [mode, chunk, overlap] : {std::tuple<std::string, int64_t, int64_t>{"exact", 4096, 0}, {"exact", 30000, 0},
                                               {"stream", 777, 0}, {"crossfade", 8000, 1500}, {"crossfade", 3000, 7000}}) {
      ProcessOptions o;
      o.mode = mode, o.chunk = chunk, o.overlap = overlap;
      const at::Tensor reference = process(m, x, o);
      AmpStream stream(m, o);
      std::vector<float> y;
      int64_t fed = 0;
      for (int64_t piece = 0; fed < x.numel(); ++piece) {  // pieces of 1, 5000, 13 and 12345 samples
        const int64_t sizes[] = {1, 5000, 13, 12345};
        const int64_t n = std::min(sizes[piece % 4], x.numel() - fed);
        stream.push(in + fed, n, y);
        fed += n;
        EXPECT_LE(static_cast<int64_t>(y.size()), fed);  // never ahead of its input
      }
      stream.finish(y);
      const std::string where = arch + " " + preset + " " + mode + " chunk " + std::to_string(chunk) + " overlap " + std::to_string(overlap);
      ASSERT_EQ(static_cast<int64_t>(y.size()), x.numel()) << where;
      int64_t differing = 0;
      for (int64_t i = 0; i < x.numel(); ++i) differing += y[static_cast<size_t>(i)] != reference[i].item<float>();
      EXPECT_EQ(differing, 0) << where;
      EXPECT_GT(reference.abs().max().item<double>(), 1e-3) << where;
    }
  }
}

// The streaming resampler gives resample()'s samples and count, in pieces of any size; the WAV
// writer writes what write_wav writes, and leaves no temporary behind when it is not completed.
TEST(AmpModels, StreamingResamplerAndWriterEqualTheWholeFileFunctions) {
  const at::Tensor x = test_signal(30001);
  const float* in = x.data_ptr<float>();
  for (const auto& [from, to] : {std::pair<int, int>{44100, 48000}, {48000, 44100}, {48000, 16000}, {22050, 96000}, {48000, 48000}}) {
    const at::Tensor whole = data::resample(x, from, to);
    data::StreamResampler r(from, to);
    std::vector<float> y;
    for (int64_t fed = 0, piece = 0; fed < x.numel(); ++piece) {
      const int64_t n = std::min<int64_t>(piece % 2 ? 7 : 4096, x.numel() - fed);
      r.push(in + fed, n, y);
      r.push(nullptr, 0, y);  // nothing (a block the model held back): not the end of the input
      fed += n;
    }
    r.finish(y);
    ASSERT_EQ(static_cast<int64_t>(y.size()), whole.numel()) << from << " -> " << to;
    const at::Tensor streamed = at::from_blob(y.data(), {whole.numel()}, at::kFloat);
    EXPECT_TRUE(at::equal(streamed, whole)) << from << " -> " << to;
  }
  const std::string whole_path = temp_path("whole.wav"), streamed_path = temp_path("streamed.wav");
  data::write_wav(whole_path, x, 48000, data::WavSubtype::kPcm24);
  {
    data::WavFileWriter w(streamed_path, 48000, 1, data::WavSubtype::kPcm24);
    for (int64_t s = 0; s < x.numel(); s += 10000) w.write(in + s, std::min<int64_t>(10000, x.numel() - s));
    w.commit();
  }
  data::AudioFileReader reader(streamed_path);
  EXPECT_EQ(reader.frames(), x.numel());
  EXPECT_TRUE(at::equal(data::read_audio(streamed_path).samples, data::read_audio(whole_path).samples));
  const std::string abandoned = temp_path("abandoned.wav");
  const std::string partial = (std::filesystem::path(abandoned).parent_path() / ("." + std::filesystem::path(abandoned).filename().string() + ".partial")).string();
  {
    data::WavFileWriter w(abandoned, 48000, 1, data::WavSubtype::kFloat32);
    w.write(in, 100);
    EXPECT_TRUE(std::filesystem::exists(partial));
    const float bad[2] = {0.5f, std::numeric_limits<float>::quiet_NaN()};
    try {
      w.write(bad, 2);
      ADD_FAILURE() << "a NaN was written";
    } catch (const data::AudioError& e) {
      EXPECT_EQ(std::string(e.what()), abandoned + ": sample 101 (at 0.002104 s) is NaN; a WAV file holds finite samples only");
    }
  }
  EXPECT_FALSE(std::filesystem::exists(partial));
  EXPECT_FALSE(std::filesystem::exists(abandoned));
  std::filesystem::remove(whole_path);
  std::filesystem::remove(streamed_path);
}

}  // namespace
}  // namespace wavetrain::experiments::amp
