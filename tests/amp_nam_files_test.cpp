// .nam files 0.5 to 0.7 against the NAM plugin's core: its nine example models
// (tests/data/reference/nam/, see its README) played through wavetrain's real-time engine equal the
// core's own output on the same input (relative RMS <= 1e-5, no offset), in 64-sample buffers and
// in one offline pass.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <random>
#include <fstream>
#include <string>
#include <vector>

#include <filesystem>
#include <unistd.h>

#include "data/audio_io.h"
#include "experiments/amp/amp_model.h"
#include "experiments/amp/nam_dsp.h"
#include "experiments/amp/nam_file.h"
#include "experiments/amp/nam_wavenet_module.h"
#include "tests/run_process.h"

namespace {

using namespace wavetrain::experiments::amp;

const std::string kDir = std::string(WAVETRAIN_TEST_DATA) + "/reference/nam";
// The core's examples, then the ConvNet and Linear files NAM's Python trainer wrote (see the README).
const std::vector<std::string> kModels = {"wavenet", "wavenet_a1_standard", "my_model", "lstm", "A2", "wavenet_a2_max",
                                          "slimmable_container", "slimmable_wavenet", "wavenet_condition_dsp",
                                          "convnet", "convnet_nobn", "linear", "linear_long"};

std::vector<float> read_mono(const std::string& path) {
  const auto audio = wavetrain::data::read_audio(path);
  const at::Tensor s = audio.samples.to(at::kFloat).contiguous().view({-1});
  return {s.data_ptr<float>(), s.data_ptr<float>() + s.numel()};
}

double relative_rms(const std::vector<float>& ours, const std::vector<float>& reference) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    diff += (static_cast<double>(ours[i]) - reference[i]) * (static_cast<double>(ours[i]) - reference[i]);
    ref += static_cast<double>(reference[i]) * reference[i];
  }
  return std::sqrt(diff / ref);
}

std::vector<float> play(const NamFileModel& model, const std::vector<float>& in, int64_t buffer, bool fast_tanh = false) {
  NamDsp dsp(model, buffer, /*prewarm=*/true, fast_tanh);
  std::vector<float> out(in.size());
  for (size_t s = 0; s < in.size(); s += static_cast<size_t>(buffer))
    dsp.process(in.data() + s, out.data() + s, std::min<int64_t>(buffer, static_cast<int64_t>(in.size() - s)));
  return out;
}

TEST(AmpNamFiles, EveryCoreExampleMatchesTheCoresOutput) {
  const std::vector<float> input = read_mono(kDir + "/input.wav");
  for (const std::string& name : kModels) {
    const NamFileModel model = read_nam_file(kDir + "/models/" + name + ".nam");
    const std::vector<float> reference = read_mono(kDir + "/core-output/" + name + ".wav");
    ASSERT_EQ(reference.size(), input.size()) << name;
    const double stream = relative_rms(play(model, input, 64), reference);
    const double offline = relative_rms(play(model, input, 4096), reference);
    EXPECT_LE(stream, 1e-5) << name << " in 64-sample buffers";
    EXPECT_LE(offline, 1e-5) << name << " offline";
    std::printf("%-22s relative RMS against the core: %.2e (64-sample buffers), %.2e (4096)\n", name.c_str(), stream, offline);
  }
}

// The NAM plugin turns on its core's fast tanh: played that way, every model equals the core's
// output with it on (core-output-fast-tanh/), which differs from the exact one by up to 1.9e-2
// (the LSTM, whose sigmoids become fast too) or not at all (no Tanh in the model).
TEST(AmpNamFiles, WithFastTanhEveryModelMatchesThePluginsOutput) {
  const std::vector<float> input = read_mono(kDir + "/input.wav");
  for (const std::string& name : kModels) {
    const NamFileModel model = read_nam_file(kDir + "/models/" + name + ".nam");
    const std::vector<float> plugin = read_mono(kDir + "/core-output-fast-tanh/" + name + ".wav");
    const std::vector<float> exact = read_mono(kDir + "/core-output/" + name + ".wav");
    const double stream = relative_rms(play(model, input, 64, true), plugin);
    const double offline = relative_rms(play(model, input, 4096, true), plugin);
    EXPECT_LE(stream, 1e-5) << name << " in 64-sample buffers";
    EXPECT_LE(offline, 1e-5) << name << " offline";
    // Where the core's two outputs differ, ours differ from the other one: the switch does something.
    const double apart = relative_rms(exact, plugin);
    if (apart > 1e-4) {
      EXPECT_GT(relative_rms(play(model, input, 64, true), exact), 1e-4) << name;
    }
    std::printf("%-22s fast tanh: relative RMS against the core's %.2e (exact and fast apart: %.2e)\n", name.c_str(), stream, apart);
  }
}

// Each example (versions 0.5.0, 0.5.4, 0.6.0, 0.7.0) written back and read again is the same model:
// config, weights, version, metadata and other keys ("notes"); and written again, the same bytes.
TEST(AmpNamFiles, EveryExampleRoundTripsThroughReadAndWrite) {
  const std::string path = ::testing::TempDir() + "/wavetrain_roundtrip_" + std::to_string(::getpid()) + ".nam";
  for (const std::string& name : kModels) {
    nlohmann::json original;
    std::ifstream(kDir + "/models/" + name + ".nam") >> original;
    const NamFileModel first = read_nam_file(kDir + "/models/" + name + ".nam");
    write_nam_file(path, first);
    const NamFileModel second = read_nam_file(path);
    nlohmann::json written;
    std::ifstream(path) >> written;
    EXPECT_EQ(written["version"], original["version"]) << name;
    EXPECT_EQ(written.value("metadata", nlohmann::json()), original.value("metadata", nlohmann::json())) << name;
    EXPECT_EQ(written.value("notes", nlohmann::json()), original.value("notes", nlohmann::json())) << name;
    EXPECT_EQ(nam_model_to_json(second), nam_model_to_json(first)) << name;
    EXPECT_EQ(second.default_model().weights, first.default_model().weights) << name;
    // The same output as the original file.
    const std::vector<float> input = read_mono(kDir + "/input.wav");
    const std::vector<float> a = play(first, std::vector<float>(input.begin(), input.begin() + 4800), 64);
    const std::vector<float> b = play(second, std::vector<float>(input.begin(), input.begin() + 4800), 64);
    EXPECT_EQ(a, b) << name;
  }
  std::filesystem::remove(path);
}

// What the core refuses is refused, naming the file, the key and what is supported.
TEST(AmpNamFiles, WhatTheCoreRefusesIsRefusedWithTheKey) {
  nlohmann::json base;
  std::ifstream(kDir + "/models/wavenet_a2_max.nam") >> base;
  const std::string path = ::testing::TempDir() + "/wavetrain_refused_" + std::to_string(::getpid()) + ".nam";
  auto refused = [&](const nlohmann::json& j, const std::string& expected) {
    std::ofstream(path) << j.dump();
    try {
      read_nam_file(path);
      ADD_FAILURE() << "accepted, expected: " << expected;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), path + ": " + expected);
    }
  };
  auto with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json j = base;
    j["config"]["layers"][0][key] = value;
    return j;
  };
  nlohmann::json j = base;
  j["version"] = "0.8.0";
  refused(j, "version: 0.8.0 is not supported; the NAM plugin's core reads 0.5.x, 0.6.x and 0.7.x");
  j["version"] = "0.4.1";
  refused(j, "version: 0.4.1 is not supported; the NAM plugin's core reads 0.5.x, 0.6.x and 0.7.x");
  refused(with("activation", "Swish"),
          "config.layers[0].activation: activation 'Swish' is not supported; supported: Tanh, Fasttanh, Hardtanh, LeakyHardtanh, ReLU, "
          "LeakyReLU, PReLU, Sigmoid, SiLU, Hardswish, Softsign");
  refused(with("gating_mode", "maybe"), "config.layers[0].gating_mode: 'maybe' is not one of none, gated, blended");
  refused(with("kernel_sizes", {3, 3}), "config.layers[0]: give kernel_size or kernel_sizes, not both");
  refused(with("conv_pre_film", nullptr), "config.layers[0].conv_pre_film: expected false or an object {active, shift, groups}, found null");
  refused(with("layer1x1", {{"active", false}, {"groups", 1}}), "config.layers[0]: layer1x1_post_film is active without layer1x1");
  refused(with("groups_input", 3), "config.layers[0].groups_input: 3 groups do not divide 4 inputs and 4 outputs");
  refused(with("slimmable", {{"method", "slice_channels_random"}}),
          "config.layers[0].slimmable.method: expected slice_channels_uniform (the one method supported), found a string (\"slice_channels_random\")");
  j = base;
  j["weights"].erase(j["weights"].begin());
  refused(j, "weights: 817 weights, its config has 818");
  j = base;
  j["config"]["condition_dsp"]["version"] = "1.0.0";
  refused(j, "config.condition_dsp.version: 1.0.0 is not supported; the NAM plugin's core reads 0.5.x, 0.6.x and 0.7.x");
  j = base;
  j["architecture"] = "Transformer";
  refused(j, "architecture: 'Transformer' is not supported; supported: WaveNet, LSTM, ConvNet, Linear, SlimmableContainer");
  // ConvNet and Linear: their keys, the weight count, and what an amp model cannot have.
  nlohmann::json convnet, linear;
  std::ifstream(kDir + "/models/convnet.nam") >> convnet;
  std::ifstream(kDir + "/models/linear.nam") >> linear;
  j = convnet;
  j["config"].erase("batchnorm");
  refused(j, "config: no 'batchnorm'");
  j = convnet;
  j["config"]["dilations"][1] = 0;
  refused(j, "config.dilations[1]: must be 1 to 1048576, found 0");
  j = convnet;
  j["config"]["activation"] = "GELU";
  refused(j, "config.activation: activation 'GELU' is not supported; supported: Tanh, Fasttanh, Hardtanh, LeakyHardtanh, ReLU, "
             "LeakyReLU, PReLU, Sigmoid, SiLU, Hardswish, Softsign");
  j = convnet;
  j["config"]["out_channels"] = 2;
  refused(j, "config.out_channels: 2; an amp model has one input and one output channel");
  j = convnet;
  j["weights"].push_back(0.5);
  refused(j, "weights: 864 weights, its config has 863");
  j = linear;
  j["config"]["receptive_field"] = 0;
  refused(j, "config.receptive_field: must be >= 1, found 0");
  j = linear;
  j["config"]["bias"] = "yes";
  refused(j, "config.bias: expected true or false, found a string (\"yes\")");
  j = linear;
  j["weights"].erase(j["weights"].begin());
  refused(j, "weights: 32 weights, its config has 33");
  // An outside review's: sizes that overflowed into the engine, slopes past the channels, FiLM
  // groups, loose version strings, unbounded nesting.
  nlohmann::json head = base;
  head["config"]["layers"][0]["head"] = {{"out_channels", 1}, {"kernel_size", 5}, {"bias", true}, {"head_dilation", 4611686018427387904}};
  refused(head, "config.layers[0].head: head_dilation 4611686018427387904; the limit is 65536");
  j = base;
  j["config"]["condition_dsp"]["config"]["layers"][0]["secondary_activation"] = {{"type", "PReLU"}, {"negative_slopes", {0.1, 0.2, 0.3}}};
  refused(j, "config.condition_dsp.config.layers[0].secondary_activation: PReLU has 3 slopes for a bottleneck of 6 (give one, or one per channel)");
  j = base;
  j["config"]["condition_dsp"]["config"]["layers"][0]["conv_post_film"] = {{"active", true}, {"shift", true}, {"groups", 2}};
  refused(j, "config.condition_dsp.config.layers[0].conv_post_film.groups: 2 groups do not divide 1 inputs and 24 outputs");
  for (const char* version : {"0.5.x", "0.6.1-rc", "0.7", "00.5.1.2"}) {
    j = base;
    j["version"] = version;
    refused(j, std::string("version: ") + version + " is not supported; the NAM plugin's core reads 0.5.x, 0.6.x and 0.7.x");
  }
  j = base;
  nlohmann::json* inner = &j["config"]["condition_dsp"];
  for (int depth = 0; depth < 5; ++depth) {
    (*inner)["config"]["condition_dsp"] = base["config"]["condition_dsp"];
    inner = &(*inner)["config"]["condition_dsp"];
  }
  try {
    std::ofstream(path) << j.dump();
    read_nam_file(path);
    ADD_FAILURE() << "a condition_dsp nested 6 deep was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nested more than 4 deep"), std::string::npos) << e.what();
  }
  j = base;
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 100; ++i) deep = nlohmann::json::array({deep});
  j["metadata"]["deep"] = deep;
  refused(j, "JSON nested more than 64 deep");
  nlohmann::json container;
  std::ifstream(kDir + "/models/slimmable_container.nam") >> container;
  container["config"]["submodels"][2]["max_value"] = 0.5;
  refused(container, "config.submodels[2].max_value: must be larger than the one before it");
  std::filesystem::remove(path);
}

// Wrong types and sizes in a .nam file (issue 21), each a change to one key of a small valid
// example: one line naming the file and the key's whole path, never a parser's own message
// (nlohmann's "[json.exception...]", a C++ library's "basic_string", "vector", "map::at") or a
// LibTorch backtrace.
TEST(AmpNamFiles, EveryWrongTypeOrSizeIsOneLineNamingTheFileAndKey) {
  struct Change {
    std::string model, pointer;  // an example (models/NAME.nam) and a JSON pointer into it
    nlohmann::json value;        // the value put there
    std::string expected;        // the error after "PATH: "
  };
  const std::vector<Change> changes = {
      // Types.
      {"wavenet", "/config/layers/0/channels", "8", "config.layers[0].channels: expected an integer, found a string (\"8\")"},
      {"wavenet", "/config/layers/0/kernel_size", 3.5, "config.layers[0].kernel_size: expected an integer, found 3.5"},
      {"wavenet", "/config/layers", 7, "config.layers: expected a non-empty list of layer arrays, found 7"},
      {"wavenet", "/config/layers", nlohmann::json::array(), "config.layers: expected a non-empty list of layer arrays, found a list"},
      {"wavenet", "/config/layers/1", "x", "config.layers[1]: expected an object (a layer array), found a string (\"x\")"},
      {"wavenet", "/config/layers/0/dilations", 4, "config.layers[0].dilations: expected a list of integers, found 4"},
      {"wavenet", "/config/layers/0/dilations/1", nlohmann::json::object(), "config.layers[0].dilations[1]: expected an integer, found an object"},
      {"wavenet", "/config/layers/0/head_size", nullptr, "config.layers[0].head_size: expected an integer, found null"},
      {"wavenet", "/config/layers/0/gated", "yes", "config.layers[0].gated: expected true or false, found a string (\"yes\")"},
      {"wavenet", "/config/layers/0/head_bias", 1, "config.layers[0].head_bias: expected true or false, found 1"},
      {"wavenet", "/config/layers/0/activation", 1, "config.layers[0].activation: expected a name or an object with a \"type\", found 1"},
      {"wavenet", "/config/head_scale", "0.02", "config.head_scale: expected a number, found a string (\"0.02\")"},
      {"wavenet", "/config/head", 5, "config.head: expected null or an object {channels, out_channels, kernel_sizes, activation}, found 5"},
      {"wavenet", "/config", nlohmann::json::array(), "config: expected an object, found a list"},
      {"wavenet", "/weights", nlohmann::json::object(), "weights: expected a list of numbers, found an object"},
      {"wavenet", "/weights/7", true, "weights[7]: expected a number, found true"},
      {"wavenet", "/version", 5, "version: expected a string such as \"0.5.4\", found 5"},
      {"wavenet", "/architecture", nlohmann::json::array({"WaveNet"}), "architecture: expected a string, found a list"},
      {"wavenet", "/sample_rate", "48000", "sample_rate: expected a number (Hz), found a string (\"48000\")"},
      {"wavenet", "/metadata", 5, "metadata: expected an object or null, found 5"},
      {"lstm", "/config", 5, "config: expected an object {input_size, hidden_size, num_layers}, found 5"},
      {"lstm", "/config/hidden_size", "3", "config.hidden_size: expected an integer, found a string (\"3\")"},
      {"lstm", "/config/num_layers", 1.5, "config.num_layers: expected an integer, found 1.5"},
      {"wavenet_a2_max", "/config/layers/0/head1x1", true, "config.layers[0].head1x1: expected an object {active, out_channels, groups}, found true"},
      {"wavenet_a2_max", "/config/layers/0/layer1x1/active", "yes", "config.layers[0].layer1x1.active: expected true or false, found a string (\"yes\")"},
      {"wavenet_a2_max", "/config/layers/0/conv_pre_film/groups", "2", "config.layers[0].conv_pre_film.groups: expected an integer, found a string (\"2\")"},
      {"wavenet_a2_max", "/config/condition_dsp/config/layers/0/channels", "3",
       "config.condition_dsp.config.layers[0].channels: expected an integer, found a string (\"3\")"},
      {"wavenet_a2_max", "/config/condition_dsp/weights", 0, "config.condition_dsp.weights: expected a list of numbers, found 0"},
      {"slimmable_container", "/config/submodels", nlohmann::json::object(),
       "config.submodels: expected a non-empty list of {max_value, model}, found an object"},
      {"slimmable_container", "/config/submodels/1/max_value", "0.5", "config.submodels[1].max_value: expected a number, found a string (\"0.5\")"},
      {"slimmable_container", "/config/submodels/0/model/config/hidden_size", nlohmann::json::array({3}),
       "config.submodels[0].model.config.hidden_size: expected an integer, found a list"},
      // Sizes of 0 or less.
      {"wavenet", "/config/layers/0/channels", 0, "config.layers[0].channels: must be >= 1, found 0"},
      {"wavenet", "/config/layers/0/channels", -3, "config.layers[0].channels: must be >= 1, found -3"},
      {"wavenet", "/config/layers/0/kernel_size", 0, "config.layers[0].kernel_size: must be >= 1, found 0"},
      {"wavenet", "/config/layers/0/dilations/0", 0, "config.layers[0].dilations[0]: must be >= 1, found 0"},
      {"wavenet", "/config/layers/0/dilations", nlohmann::json::array(), "config.layers[0].dilations: is empty: a layer array needs at least one layer"},
      {"wavenet", "/config/layers/0/head_size", 0, "config.layers[0].head_size: must be >= 1, found 0"},
      {"wavenet", "/config/layers/0/input_size", 0, "config.layers[0].input_size: must be >= 1, found 0"},
      {"wavenet", "/config/layers/0/condition_size", -1, "config.layers[0].condition_size: must be >= 1, found -1"},
      {"lstm", "/config/hidden_size", 0, "config.hidden_size: must be >= 1, found 0"},
      {"lstm", "/config/num_layers", -2, "config.num_layers: must be >= 1, found -2"},
      {"lstm", "/config/input_size", 0, "config.input_size: must be >= 1, found 0"},
      {"wavenet_a2_max", "/config/layers/0/bottleneck", 0, "config.layers[0].bottleneck: must be >= 1, found 0"},
      {"wavenet_a2_max", "/config/layers/0/head1x1/out_channels", 0, "config.layers[0].head1x1.out_channels: must be >= 1, found 0"},
      {"wavenet_a2_max", "/config/layers/0/groups_input", 0, "config.layers[0].groups_input: must be >= 1, found 0"},
      {"wavenet_a2_max", "/config/layers/0/conv_pre_film/groups", 0, "config.layers[0].conv_pre_film.groups: must be >= 1, found 0"},
      {"wavenet_a2_max", "/config/condition_dsp/config/layers/0/kernel_size", 0,
       "config.condition_dsp.config.layers[0].kernel_size: must be >= 1, found 0"},
      {"slimmable_container", "/config/submodels/1/model/config/layers/0/channels", 0,
       "config.submodels[1].model.config.layers[0].channels: must be >= 1, found 0"},
      // Sample rates no audio has.
      {"wavenet", "/sample_rate", 0, "sample_rate: 0 Hz is outside 1000 to 768000 Hz"},
      {"wavenet", "/sample_rate", -48000, "sample_rate: -48000 Hz is outside 1000 to 768000 Hz"},
      {"wavenet", "/sample_rate", 4.6e18, "sample_rate: 4.6e+18 Hz is outside 1000 to 768000 Hz"},
      {"wavenet", "/sample_rate", 1, "sample_rate: 1 Hz is outside 1000 to 768000 Hz"},
      {"wavenet", "/sample_rate", 1.5e6, "sample_rate: 1500000 Hz is outside 1000 to 768000 Hz"},
      {"wavenet_a2_max", "/config/condition_dsp/sample_rate", 0, "config.condition_dsp.sample_rate: 0 Hz is outside 1000 to 768000 Hz"},
  };
  const std::string path = ::testing::TempDir() + "/wavetrain_changed_" + std::to_string(::getpid()) + ".nam";
  for (const Change& c : changes) {
    nlohmann::json j;
    std::ifstream(kDir + "/models/" + c.model + ".nam") >> j;
    j[nlohmann::json::json_pointer(c.pointer)] = c.value;
    std::ofstream(path) << j.dump();
    const std::string where = c.model + " " + c.pointer + " = " + c.value.dump();
    try {
      read_nam_file(path);
      ADD_FAILURE() << where << ": accepted";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what, path + ": " + c.expected) << where;
      for (const char* leak : {"[json.exception", "basic_string", "vector", "map::at", "\n"})
        EXPECT_EQ(what.find(leak), std::string::npos) << where << ": " << what;
    }
  }
  // The same from the command line: exit 1, the one line, nothing written.
  const std::string ckpt = ::testing::TempDir() + "/wavetrain_changed_" + std::to_string(::getpid()) + ".ckpt";
  nlohmann::json j;
  std::ifstream(kDir + "/models/wavenet.nam") >> j;
  j["config"]["layers"][0]["channels"] = "8";
  std::ofstream(path) << j.dump();
  const wavetrain::testing::ProcessResult r =
      wavetrain::testing::run_shell(std::string(WAVETRAIN_BINARY) + " import nam '" + path + "' -o '" + ckpt + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "wavetrain: error: " + path + ": config.layers[0].channels: expected an integer, found a string (\"8\")\n");
  EXPECT_FALSE(std::filesystem::exists(ckpt));
  std::filesystem::remove(path);
}

// A .nam JSON with every weight as the float32 the plugin reads (JSON doubles round-trip to the same
// floats, not to the same decimal text).
nlohmann::json as_float32(nlohmann::json j) {
  if (j.is_object()) {
    for (auto& [key, value] : j.items()) {
      if (key == "weights" && value.is_array())
        for (auto& w : value) w = static_cast<double>(static_cast<float>(w.get<double>()));
      else value = as_float32(value);
    }
  } else if (j.is_array()) {
    for (auto& v : j) v = as_float32(v);
  }
  return j;
}

// import nam -> export nam from the command line: every example comes back as the same file (its
// version, metadata, notes and config spellings kept); a refused file exits 1 and writes nothing.
TEST(AmpNamFiles, ImportAndExportKeepEveryExample) {
  const std::string dir = ::testing::TempDir() + "/wavetrain_nam_cli_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto run = [&](const std::string& args) { return wavetrain::testing::run_shell("cd '" + dir + "' && '" WAVETRAIN_BINARY "' " + args); };
  for (const std::string& name : kModels) {
    const std::string model = kDir + "/models/" + name + ".nam";
    const auto imported = run("import nam " + model + " -o " + name + ".ckpt");
    ASSERT_EQ(imported.exit_code, 0) << name << imported.err;
    const auto exported = run("export nam " + name + ".ckpt -o " + name + ".nam");
    ASSERT_EQ(exported.exit_code, 0) << name << exported.err;
    // The same file: every key, the config as spelled, the metadata, the version; the weights as
    // float32.
    nlohmann::json original, again;
    std::ifstream(model) >> original;
    std::ifstream(dir + "/" + name + ".nam") >> again;
    EXPECT_EQ(as_float32(again), as_float32(original)) << name;
  }
  // `infer --tanh fast` plays a file as the plugin does; ConvNet and Linear through the imported checkpoint too.
  for (const char* name : {"lstm", "convnet", "linear_long"}) {
    for (const std::string& source : {kDir + "/models/" + name + ".nam", std::string(name) + ".ckpt"}) {
      const auto fast = run("infer " + source + " " + kDir + "/input.wav -o fast_" + std::string(name) + ".wav --tanh fast --mode stream --chunk 64");
      ASSERT_EQ(fast.exit_code, 0) << fast.err;
      EXPECT_NE(fast.out.find("(chunk 64, stream, fast tanh)"), std::string::npos) << fast.out;
      EXPECT_LE(relative_rms(read_mono(dir + "/fast_" + std::string(name) + ".wav"), read_mono(kDir + "/core-output-fast-tanh/" + std::string(name) + ".wav")), 1e-5)
          << source;
    }
  }
  EXPECT_EQ(run("infer lstm.ckpt " + kDir + "/input.wav -o x.wav --tanh approximate").exit_code, 2);
  std::ofstream(dir + "/bad.nam") << R"({"version": "0.9.0", "architecture": "LSTM", "config": {}, "weights": []})";
  const auto bad = run("import nam bad.nam -o bad.ckpt");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.nam: version: 0.9.0 is not supported; the NAM plugin's core reads 0.5.x, 0.6.x and 0.7.x"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.ckpt"));
  const auto bad_infer = run("infer bad.nam " + kDir + "/input.wav -o out.wav");
  EXPECT_EQ(bad_infer.exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.wav"));
  std::filesystem::remove_all(dir);
}

// Models no example has, generated with every activation, gating mode and structural option the
// core implements, against an independent float64 reading of the format
// (tests/python/nam_core_reference.py): the engine in buffers of 1, 64 and 777 samples.
nlohmann::json with_weights(nlohmann::json model, uint32_t seed) {
  const int64_t count = nam_wavenet_weight_count(nam_wavenet_from_json(model["config"], model["version"]));
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> w(static_cast<size_t>(count));
  for (float& x : w) x = u(g);
  w.back() = 0.7f;  // head_scale
  model["weights"] = w;
  return model;
}

nlohmann::json generated_models_layer(int64_t channels, int64_t bottleneck, const nlohmann::json& extra) {
  nlohmann::json a = {{"input_size", 1}, {"condition_size", 1}, {"channels", channels}, {"bottleneck", bottleneck}};
  for (const auto& [k, v] : extra.items()) a[k] = v;
  return a;
}

std::vector<std::pair<std::string, nlohmann::json>> generated_models() {
  // 1. Every activation in every gating mode: one layer each (33 layers), secondaries varied.
  const std::vector<nlohmann::json> activations = {
      "Tanh", "Fasttanh", "Hardtanh", "ReLU", "Sigmoid", "SiLU", "Hardswish", "Softsign",
      {{"type", "LeakyReLU"}, {"negative_slope", 0.05}},
      {{"type", "PReLU"}, {"negative_slopes", {0.1, 0.2, 0.3}}},
      {{"type", "LeakyHardtanh"}, {"min_val", -0.5}, {"max_val", 0.7}, {"min_slope", 0.05}, {"max_slope", 0.1}}};
  const std::vector<nlohmann::json> secondaries = {"Sigmoid", "Hardswish", "SiLU", {{"type", "LeakyHardtanh"}, {"min_val", 0.0}, {"max_val", 1.0}}};
  nlohmann::json acts = nlohmann::json::array(), gating = nlohmann::json::array(), second = nlohmann::json::array(), kernels = nlohmann::json::array(),
                 dilations = nlohmann::json::array();
  int i = 0;
  for (const char* mode : {"none", "gated", "blended"})
    for (const nlohmann::json& a : activations) {
      acts.push_back(a);
      gating.push_back(mode);
      second.push_back(std::string(mode) == "none" ? nlohmann::json(nullptr) : secondaries[static_cast<size_t>(i) % secondaries.size()]);
      kernels.push_back(2 + i % 3);
      dilations.push_back(1 + i % 5);
      ++i;
    }
  nlohmann::json every_activation = {
      {"version", "0.7.0"},
      {"architecture", "WaveNet"},
      {"sample_rate", 48000},
      {"config",
       {{"layers",
         {generated_models_layer(3, 3, {{"kernel_sizes", kernels}, {"dilations", dilations}, {"activation", acts}, {"gating_mode", gating},
                                        {"secondary_activation", second}, {"head", {{"out_channels", 1}, {"kernel_size", 1}, {"bias", true}}}})}},
        {"head", nullptr},
        {"head_scale", 0.7}}}};
  // 2. Every structural option: bottleneck, groups, head1x1, layer1x1 groups, all eight FiLMs (with
  //    and without shift, grouped), head kernels with dilation, two arrays, a 2-channel
  //    condition_dsp and a head after the arrays.
  nlohmann::json films;
  int f = 0;
  for (const char* key : {"conv_pre_film", "conv_post_film", "input_mixin_pre_film", "input_mixin_post_film", "activation_pre_film",
                          "activation_post_film", "layer1x1_post_film", "head1x1_post_film"})
    films[key] = {{"active", true}, {"shift", f % 2 == 0}, {"groups", f % 3 == 0 ? 2 : 1}}, ++f;
  nlohmann::json first = generated_models_layer(
      4, 2,
      {{"condition_size", 2}, {"kernel_sizes", {3, 2, 4}}, {"dilations", {1, 3, 2}}, {"activation", "Tanh"},
       {"gating_mode", {"none", "gated", "blended"}}, {"groups_input", 2}, {"groups_input_mixin", 2},
       {"head1x1", {{"active", true}, {"out_channels", 4}, {"groups", 2}}}, {"layer1x1", {{"active", true}, {"groups", 2}}},
       {"head", {{"out_channels", 4}, {"kernel_size", 3}, {"bias", true}, {"head_dilation", 2}}}});
  for (const auto& [k, v] : films.items()) first[k] = v;
  nlohmann::json second_array = generated_models_layer(
      4, 4, {{"input_size", 4}, {"condition_size", 2}, {"kernel_size", 2}, {"dilations", {1, 2, 4}}, {"activation", "ReLU"}, {"gated", true},
             {"head", {{"out_channels", 2}, {"kernel_size", 2}, {"bias", false}}}});
  nlohmann::json condition = {
      {"version", "0.6.0"},
      {"architecture", "WaveNet"},
      {"sample_rate", 48000},
      {"config",
       {{"layers",
         {{{"input_size", 1}, {"condition_size", 1}, {"channels", 3}, {"kernel_size", 2}, {"dilations", {1, 2}}, {"activation", "Softsign"},
           {"gated", false}, {"head_size", 2}, {"head_bias", true}}}},
        {"head", nullptr},
        {"head_scale", 1.0}}}};
  nlohmann::json every_option = {
      {"version", "0.7.0"},
      {"architecture", "WaveNet"},
      {"sample_rate", 48000},
      {"config",
       {{"layers", {first, second_array}},
        {"condition_dsp", with_weights(condition, 11)},
        {"head", {{"channels", 3}, {"out_channels", 1}, {"kernel_sizes", {2, 3}}, {"activation", "LeakyReLU"}}},
        {"head_scale", 0.7}}}};
  return {{"every_activation", with_weights(every_activation, 20)}, {"every_option", with_weights(every_option, 21)}};
}

TEST(AmpNamFiles, GeneratedModelsWithEveryOptionMatchAnIndependentReference) {
  WAVETRAIN_REQUIRE_CLIENT(wavetrain::testing::client_importable("soundfile"), "soundfile is not in " WAVETRAIN_CLIENT_PYTHON);
  const std::string dir = ::testing::TempDir() + "/wavetrain_generated_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  const std::vector<float> input = read_mono(kDir + "/input.wav");
  for (const auto& [name, model] : generated_models()) {
    const std::string path = dir + "/" + name + ".nam";
    std::ofstream(path) << model.dump();
    const auto r = wavetrain::testing::client_run("nam_core_reference.py " + path + " " + kDir + "/input.wav " + dir + "/" + name + ".wav");
    ASSERT_EQ(r.exit_code, 0) << name << r.err;
    const std::vector<float> reference = read_mono(dir + "/" + name + ".wav");
    const NamFileModel m = read_nam_file(path);
    double rms = 0;
    for (float v : reference) rms += static_cast<double>(v) * v;
    EXPECT_GT(std::sqrt(rms / static_cast<double>(reference.size())), 1e-3) << name;  // the models do something
    for (int64_t buffer : {1, 64, 777}) EXPECT_LE(relative_rms(play(m, input, buffer), reference), 1e-5) << name << " buffer " << buffer;
  }
  std::filesystem::remove_all(dir);
}

// The trainable module's output in float64 for a model's first n input samples (the history before
// them zero, as the engine starts), and the relative RMS distance of the engine's output, played in
// buffers of `buffer` samples, from it.
struct ModuleAndEngine {
  at::Tensor expected;
  NamWaveNet module{nullptr};
};
ModuleAndEngine module_output(const NamFileModel& m, const std::vector<float>& input) {
  NamWaveNet module(m.wavenet);
  module->import_weights(m.weights);
  module->to(torch::kFloat64);
  const int64_t rf = module->receptive_field();
  const at::Tensor x = at::cat({at::zeros({rf - 1}, at::kDouble), at::tensor(input).to(at::kDouble)});
  torch::NoGradGuard no_grad;
  return {module->forward(x.view({1, 1, -1})).view({-1}), module};
}
double engine_distance(const NamFileModel& m, const std::vector<float>& input, const at::Tensor& expected, int64_t buffer) {
  const at::Tensor got = at::tensor(play(m, input, buffer)).to(at::kDouble);
  return ((got - expected).square().mean().sqrt() / expected.square().mean().sqrt()).item<double>();
}

// The trainable module (nam_wavenet_module.h) computes what the engine plays, in float64: the
// generated models (every activation, gating mode and option), A2 and the core's A2 test model.
TEST(AmpNamFiles, TheTrainableModuleEqualsTheEngine) {
  std::vector<std::pair<std::string, NamFileModel>> models;
  for (const auto& [name, j] : generated_models()) models.emplace_back(name, nam_model_from_json(j));
  models.emplace_back("A2", read_nam_file(kDir + "/models/A2.nam").default_model());
  models.emplace_back("wavenet_a2_max", read_nam_file(kDir + "/models/wavenet_a2_max.nam"));
  models.emplace_back("wavenet_condition_dsp", read_nam_file(kDir + "/models/wavenet_condition_dsp.nam"));
  const std::vector<float> all = read_mono(kDir + "/input.wav"), input(all.begin(), all.begin() + 9000);
  for (const auto& [name, m] : models) {
    const ModuleAndEngine r = module_output(m, input);
    ASSERT_EQ(r.expected.numel(), static_cast<int64_t>(input.size())) << name;
    EXPECT_LE(engine_distance(m, input, r.expected, 64), 1e-5) << name;
    EXPECT_EQ(r.module->export_weights(), m.weights) << name;
  }
}

// Layers of at most 4 channels, ungated and without FiLM, run whole in one pass of the engine's
// product (activation, head sum, layer1x1 and residual in its epilogue): nano (tanh) and a2_small
// (LeakyReLU, and with ReLU, Hardtanh and Tanh instead), random weights, in buffers of 64 samples,
// of 1 and of 777 (the product's scalar tail), equal the trainable module in float64.
TEST(AmpNamFiles, SmallLayersInOnePassEqualTheModule) {
  std::vector<std::pair<std::string, NamWaveNetSpec>> specs = {{"nano", nam_of(wavenet_preset("nano"))}};
  for (const char* activation : {"", "ReLU", "Hardtanh", "Tanh"}) {
    NamWaveNetSpec spec = nam_wavenet_preset("a2_small");
    set_activation(spec, activation, "");
    specs.emplace_back(std::string("a2_small ") + activation, spec);
  }
  const std::vector<float> all = read_mono(kDir + "/input.wav"), input(all.begin(), all.begin() + 4000);
  std::mt19937 rng(29);
  std::normal_distribution<float> normal(0.0f, 0.4f);
  for (const auto& [name, spec] : specs) {
    NamFileModel m;
    m.architecture = "WaveNet";
    m.wavenet = spec;
    m.weights.resize(static_cast<size_t>(nam_wavenet_weight_count(spec)));
    for (float& w : m.weights) w = normal(rng);
    const at::Tensor expected = module_output(m, input).expected;
    ASSERT_GT(expected.square().mean().sqrt().item<double>(), 1e-3) << name;  // the model does something
    for (int64_t buffer : {64, 1, 777}) EXPECT_LE(engine_distance(m, input, expected, buffer), 1e-5) << name << " buffer " << buffer;
  }
}

// ConvNet and Linear train as LibTorch modules: each file imported as one computes (in float64,
// eval mode, the history zero-padded) what the core played, and exports the file's weights back
// (Linear's taps reversed twice: LibTorch's conv is a cross-correlation, the file an impulse
// response). A module made here, with batch norm statistics of its own, plays through the engine
// as it computes.
TEST(AmpNamFiles, ConvNetAndLinearModulesEqualTheCore) {
  const std::vector<float> input = read_mono(kDir + "/input.wav");
  const int64_t n = 9000;
  const auto module_output = [&](AmpModel& m, const std::vector<float>& x) {
    m.module().eval();
    m.module().to(torch::kFloat64);
    const int64_t rf = m.receptive_field();
    const at::Tensor padded = at::cat({at::zeros({rf - 1}, at::kDouble), at::tensor(x).to(at::kDouble)});
    torch::NoGradGuard no_grad;
    return m.forward(padded.view({1, 1, -1})).view({-1});
  };
  const auto rel = [](const at::Tensor& a, const at::Tensor& b) {
    return ((a - b).square().mean().sqrt() / b.square().mean().sqrt()).item<double>();
  };
  const std::vector<float> x(input.begin(), input.begin() + n);
  for (const char* name : {"convnet", "convnet_nobn", "linear", "linear_long"}) {
    const NamFileModel file = read_nam_file(kDir + "/models/" + std::string(name) + ".nam");
    AmpModel m = amp_model_of(file);
    ASSERT_TRUE(m.trainable()) << name;
    const std::vector<float> core = read_mono(kDir + "/core-output/" + std::string(name) + ".wav");
    const at::Tensor expected = at::tensor(std::vector<float>(core.begin(), core.begin() + n)).to(at::kDouble);
    EXPECT_LE(rel(module_output(m, x), expected), 1e-5) << name;
    m.module().to(torch::kFloat32);
    EXPECT_EQ(m.to_nam().weights, file.weights) << name;
  }
  // model.activation for a ConvNet: a name the core knows, with its default parameters.
  EXPECT_EQ(make_amp_model("convnet", "small", 48000, "LeakyReLU").convnet->config().activation, (ActivationSpec{"LeakyReLU", {0.01}}));
  try {
    make_amp_model("convnet", "small", 48000, "Swish");
    ADD_FAILURE() << "Swish accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("model.activation: activation 'Swish' is not supported; supported: Tanh", 0), 0u) << e.what();
  }
  for (const char* architecture : {"convnet", "linear"}) {
    // Seeded before the model is made: the default generator's starting seed differs from process
    // to process (torch 2.11's initial_seed() does), so the weights, and with them the float32
    // engine's error, changed from run to run on the pip build (9.5e-8 to 1.7e-6, once 5.9e-5 in
    // a suite run).
    torch::manual_seed(3);
    AmpModel m = make_amp_model(architecture, architecture == std::string("convnet") ? "small" : "short");
    {
      torch::NoGradGuard no_grad;
      for (auto& b : m.module().named_buffers())  // statistics other than 0 and 1
        if (b.value().is_floating_point()) b.value().copy_(b.value() + 0.3 * torch::rand_like(b.value()));
    }
    const NamFileModel exported = m.to_nam();
    const at::Tensor played = at::tensor(play(exported, x, 64)).to(at::kDouble);
    EXPECT_LE(rel(played, module_output(m, x)), 1e-5) << architecture;
  }
}

}  // namespace
