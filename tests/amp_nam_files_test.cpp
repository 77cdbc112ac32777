// .nam files 0.5 to 0.7 against the NAM plugin's core: its nine example models
// (tests/data/reference/nam/, see its README) played through wavetrain's real-time engine equal the
// core's own output on the same input (relative RMS <= 1e-5, no offset), in 64-sample buffers and
// in one offline pass.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "data/audio_io.h"
#include "experiments/amp/nam_dsp.h"
#include "experiments/amp/nam_file.h"

namespace {

using namespace wavetrain::experiments::amp;

const std::string kDir = std::string(WAVETRAIN_TEST_DATA) + "/reference/nam";
const std::vector<std::string> kModels = {"wavenet", "wavenet_a1_standard", "my_model", "lstm", "A2", "wavenet_a2_max",
                                          "slimmable_container", "slimmable_wavenet", "wavenet_condition_dsp"};

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

std::vector<float> play(const NamFileModel& model, const std::vector<float>& in, int64_t buffer) {
  NamDsp dsp(model, buffer);
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

}  // namespace
