// What only a GPU can show: the CUDA kernels, losses and training paths against the CPU, on a real
// device. Labelled `cuda` (ctest -L cuda; scripts/gpu-check runs them on a CUDA LibTorch). Every
// test skips when this LibTorch has no CUDA or the machine no GPU, so the binary builds and passes
// everywhere; the GPU's arithmetic is also checked without one, by the host emulation in
// mutual_information_emulation_test.cpp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "experiments/asr/decode.h"
#include "experiments/asr/transducer_loss.h"
#include "losses/mutual_information.h"
#include "losses/rnnt_loss.h"
#include "losses/stft_loss.h"
#include "tests/reference_json.h"
#include "tests/run_process.h"
#include "trainer/amp.h"
#include "trainer/device.h"
#include "trainer/distributed.h"
#include "trainer/fused_adam.h"
#include "trainer/torch_compat.h"
#if defined(WAVETRAIN_WITH_CUDA)  // set by trainer/build_config.h, through torch_compat.h
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

using testing::max_relative_error;
using Result = testing::ProcessResult;

#define REQUIRE_GPU()                                                                   \
  do {                                                                                  \
    if (!compat::cuda_built()) GTEST_SKIP() << "this LibTorch was built without CUDA";  \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine"; \
  } while (0)

const at::Device kGpu(at::kCUDA, 0);

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("wavetrain_cuda_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The wavetrain binary under test: the build's own, or WAVETRAIN_BINARY's when this test program runs
// from a bundle on another machine (scripts/gpu-check --bundle / --prebuilt), where the build's path
// does not exist.
std::string wavetrain_binary() {
  const char* bundled = std::getenv("WAVETRAIN_BINARY");
  return bundled != nullptr && *bundled != '\0' ? bundled : WAVETRAIN_BINARY;
}

Result wavetrain_in(const fs::path& dir, const std::string& args) {
  fs::create_directories(dir);
  return testing::run_shell("cd '" + dir.string() + "' && '" + wavetrain_binary() + "' " + args);
}

// trainer.cuda_memory_fraction caps the caching allocator: an allocation over the cap fails with
// CUDA's out-of-memory error, and the same allocation succeeds once the cap is lifted. First in this
// file, so that in one process (scripts/gpu-check runs the program, not ctest) the cap is also set
// before anything has started CUDA, as the trainer sets it.
TEST(Cuda, MemoryFractionCapsTheAllocator) {
  REQUIRE_GPU();
#if defined(WAVETRAIN_WITH_CUDA)
  const int64_t floats = compat::cuda_device_properties(0).total_memory_bytes / 20 / 4;  // 5% of the GPU
  apply_cuda_memory_fraction(0.02, kGpu);
  c10::cuda::CUDACachingAllocator::emptyCache();  // no block cached by an earlier test may serve it
  EXPECT_THROW(at::empty({floats}, at::TensorOptions().device(kGpu)), c10::Error);
  apply_cuda_memory_fraction(1.0, kGpu);
  EXPECT_NO_THROW(at::empty({floats}, at::TensorOptions().device(kGpu)));
  EXPECT_THROW(apply_cuda_memory_fraction(1.5, kGpu), std::exception);
#endif
}

TEST(Cuda, MutualInformationKernelEqualsTheCpuKernel) {
  REQUIRE_GPU();
  for (bool modified : {false, true}) {
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      at::manual_seed(modified ? 31 : 32);
      const int64_t B = 6, S = 45, T = 160;
      const at::Tensor px = at::randn({B, S, modified ? T : T + 1}, dtype);
      const at::Tensor py = at::randn({B, S + 1, T}, dtype);
      py.select(0, 2).select(1, 7).fill_(-std::numeric_limits<double>::infinity());
      const at::Tensor boundary = at::zeros({B, 4}, at::kLong);
      for (int64_t b = 0; b < B; ++b) {
        boundary[b][0] = b % 2;
        boundary[b][1] = b % 3;
        boundary[b][2] = S - b;
        boundary[b][3] = T - 3 * b;
      }
      using losses::MiImplementation;
      const losses::MutualInformation cpu = losses::mutual_information_with_grad(px, py, boundary, MiImplementation::kCpu);
      const losses::MutualInformation gpu =
          losses::mutual_information_with_grad(px.to(kGpu), py.to(kGpu), boundary.to(kGpu), MiImplementation::kCuda);
      const double tolerance = dtype == at::kFloat ? 1e-5 : 1e-12;
      const std::string what = std::string(modified ? "modified " : "regular ") + c10::toString(dtype);
      EXPECT_LE(max_relative_error(gpu.scores.cpu(), cpu.scores, 1e-30), tolerance) << what;
      EXPECT_LE(max_relative_error(gpu.px_grad.cpu(), cpu.px_grad), tolerance) << what;
      EXPECT_LE(max_relative_error(gpu.py_grad.cpu(), cpu.py_grad), tolerance) << what;
    }
  }
}

TEST(Cuda, RnntLossesEqualTheCpu) {
  REQUIRE_GPU();
  at::manual_seed(33);
  const int64_t B = 3, T = 40, S = 9, C = 17;
  const at::Tensor lm = at::randn({B, S + 1, C}), am = at::randn({B, T, C});
  const at::Tensor symbols = at::randint(1, C, {B, S}, at::kLong);
  const at::Tensor boundary = at::tensor({0, 0, 9, 40, 0, 0, 7, 33, 0, 0, 9, 25}, at::kLong).view({B, 4});
  for (losses::RnntType type : {losses::RnntType::kRegular, losses::RnntType::kModified}) {
    losses::RnntOptions o;
    o.boundary = boundary;
    o.rnnt_type = type;
    losses::RnntOptions og = o;
    og.boundary = boundary.to(kGpu);
    const losses::RnntLossWithGrad cpu = losses::rnnt_loss_simple_with_grad(lm, am, symbols, o);
    const losses::RnntLossWithGrad gpu = losses::rnnt_loss_simple_with_grad(lm.to(kGpu), am.to(kGpu), symbols.to(kGpu), og);
    EXPECT_LE(max_relative_error(gpu.loss.cpu(), cpu.loss), 1e-5);
    EXPECT_LE(max_relative_error(gpu.px_grad.cpu(), cpu.px_grad), 1e-5);
    const at::Tensor smoothed_cpu = losses::rnnt_loss_smoothed(lm, am, symbols, 0.1, 0.1, o);
    const at::Tensor smoothed_gpu = losses::rnnt_loss_smoothed(lm.to(kGpu), am.to(kGpu), symbols.to(kGpu), 0.1, 0.1, og);
    EXPECT_LE(max_relative_error(smoothed_gpu.cpu(), smoothed_cpu), 1e-5);

    // Pruned, with the same ranges on both devices.
    const at::Tensor ranges = losses::get_rnnt_prune_ranges(cpu.px_grad, cpu.py_grad, boundary, 4);
    const auto [am_p, lm_p] = losses::do_rnnt_pruning(am, lm, ranges);
    const at::Tensor logits = (am_p + lm_p).tanh();
    const at::Tensor pruned_cpu = losses::rnnt_loss_pruned(logits, symbols, ranges, o);
    const at::Tensor pruned_gpu = losses::rnnt_loss_pruned(logits.to(kGpu), symbols.to(kGpu), ranges.to(kGpu), og);
    EXPECT_LE(max_relative_error(pruned_gpu.cpu(), pruned_cpu), 1e-5);
  }
  // The full loss on logits, with its gradient through autograd.
  const at::Tensor logits = at::randn({B, T, S + 1, C}).requires_grad_(true);
  const at::Tensor logits_gpu = logits.detach().to(kGpu).requires_grad_(true);
  losses::RnntOptions o;
  o.boundary = boundary;
  losses::RnntOptions og = o;
  og.boundary = boundary.to(kGpu);
  const at::Tensor full_cpu = losses::rnnt_loss(logits, symbols, o);
  const at::Tensor full_gpu = losses::rnnt_loss(logits_gpu, symbols.to(kGpu), og);
  full_cpu.backward();
  full_gpu.backward();
  EXPECT_LE(max_relative_error(full_gpu.detach().cpu(), full_cpu.detach()), 1e-5);
  EXPECT_LE(max_relative_error(logits_gpu.grad().cpu(), logits.grad()), 1e-4);
}

TEST(Cuda, MultiResolutionStftLossEqualsTheCpu) {
  REQUIRE_GPU();
  at::manual_seed(34);
  const at::Tensor pred = at::randn({2, 1, 8192}).requires_grad_(true), target = at::randn({2, 1, 8192});
  const at::Tensor pred_gpu = pred.detach().to(kGpu).requires_grad_(true);
  const losses::MultiResolutionStftLoss loss;
  const at::Tensor cpu = loss(pred, target), gpu = loss(pred_gpu, target.to(kGpu));
  cpu.backward();
  gpu.backward();
  EXPECT_LE(max_relative_error(gpu.detach().cpu(), cpu.detach()), 1e-5);
  EXPECT_LE(max_relative_error(pred_gpu.grad().cpu(), pred.grad()), 1e-4);
}

TEST(Cuda, DevicesReportTheGpu) {
  REQUIRE_GPU();
  const Result r = testing::run_shell("'" + wavetrain_binary() + "' devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cuda_device_count"].get<int>(), static_cast<int>(torch::cuda::device_count()));
  EXPECT_EQ(j["chosen"], "cuda:0");
  bool cuda_listed = false;
  for (const nlohmann::json& b : j["backends"]) {
    if (b["backend"] != "cuda") continue;
    cuda_listed = true;
    EXPECT_TRUE(b["built"].get<bool>());
    EXPECT_TRUE(b["available"].get<bool>());
    EXPECT_NE(b["details"].get<std::string>().find(compat::cuda_device_properties(0).name), std::string::npos) << b;
  }
  EXPECT_TRUE(cuda_listed) << r.out;
}

// The amp `nano` model for 50 steps on the GPU with each mixed precision: the losses stay finite,
// and the checkpoint evaluates on the CPU.
TEST(Cuda, AmpTrainingInMixedPrecisionAndItsCheckpointOnTheCpu) {
  REQUIRE_GPU();
  const fs::path dir = fresh("amp");
  ASSERT_EQ(wavetrain_in(dir, "data amp-synth -o capture --seconds 20 --seed 3").exit_code, 0);
  ASSERT_EQ(wavetrain_in(dir, "data amp --input capture/dry.wav --output capture/amp.wav -o capture.h5").exit_code, 0);
  for (const std::string precision : {"16-mixed", "bf16-mixed"}) {
    const std::string run = "run-" + precision;
    const Result train = wavetrain_in(dir, "train +experiment=amp amp.data=capture.h5 model.preset=nano trainer.device=cuda "
                                           "trainer.precision=" + precision + " trainer.max_steps=50 trainer.batch_size=8 "
                                           "trainer.seed=1 run.dir=" + run);
    ASSERT_EQ(train.exit_code, 0) << precision << "\n" << train.out << train.err;
    std::ifstream result(dir / run / "result.json");
    const nlohmann::json j = nlohmann::json::parse(result);
    EXPECT_TRUE(std::isfinite(j["best"]["val/esr"].get<double>())) << precision << " " << j;
    const Result eval = wavetrain_in(dir, "eval " + run + " trainer.device=cpu");
    ASSERT_EQ(eval.exit_code, 0) << precision << "\n" << eval.out << eval.err;
    EXPECT_NE(eval.out.find("esr"), std::string::npos) << eval.out;
  }
}

// One NCCL rank: the process group forms, and a broadcast and an average leave the tensors as they
// were (the mean over one rank).
TEST(Cuda, NcclProcessGroupWithOneRank) {
  REQUIRE_GPU();
  DistributedEnv env;
  env.master_port = 29000 + static_cast<int>(::getpid() % 1000);
  ProcessGroup group(env, std::chrono::seconds(60), kGpu);
  EXPECT_EQ(group.size(), 1);
  const at::Tensor a = at::arange(10, at::TensorOptions().dtype(at::kFloat).device(kGpu));
  const at::Tensor b = at::randn({3, 4}, at::TensorOptions().device(kGpu));
  const at::Tensor a0 = a.clone(), b0 = b.clone();
  group.broadcast_from_rank0({a, b});
  group.average({a, b}, /*bucket_bytes=*/16);
  group.barrier();
  EXPECT_TRUE(at::equal(a.cpu(), a0.cpu()));
  EXPECT_TRUE(at::allclose(b.cpu(), b0.cpu()));
}

// The tiny transducer cut down for a quick test: `vocab` tokens, `layers` Conformer blocks, weights
// from `seed`.
experiments::asr::Transducer small_transducer(int64_t vocab, int64_t layers, uint64_t seed) {
  experiments::asr::TransducerConfig c = experiments::asr::transducer_preset("tiny");
  c.vocab_size = vocab;
  c.encoder.num_layers = layers;
  at::manual_seed(seed);
  return experiments::asr::Transducer(c);
}

// ASR decoding on the GPU (the modules' path of decode.cpp) finds what the CPU's plain loops find.
TEST(Cuda, AsrDecodingEqualsTheCpu) {
  REQUIRE_GPU();
  namespace asr = experiments::asr;
  asr::Transducer m = small_transducer(12, 1, 7);
  {
    at::NoGradGuard no_grad;
    m->joiner->named_parameters()["output.weight"].mul_(20);
  }
  const at::Tensor enc = at::randn({4, 30, 128}) * 3, lengths = at::tensor({30, 17, 25, 4}, at::kLong);
  const auto greedy_cpu = asr::greedy_search(*m, enc, lengths), beam_cpu = asr::modified_beam_search(*m, enc, lengths, 4);
  m->to(kGpu);
  const auto greedy_gpu = asr::greedy_search(*m, enc.to(kGpu), lengths), beam_gpu = asr::modified_beam_search(*m, enc.to(kGpu), lengths, 4);
  for (size_t b = 0; b < 4; ++b) {
    EXPECT_EQ(greedy_gpu[b].tokens, greedy_cpu[b].tokens) << b;
    EXPECT_EQ(beam_gpu[b].tokens, beam_cpu[b].tokens) << b;
    EXPECT_NEAR(beam_gpu[b].log_prob, beam_cpu[b].log_prob, 1e-3) << b;
  }
}

// One ASR training step on the GPU: the Conformer encoder, the simple and full RNN-T losses and the
// backward equal the CPU's in fp32; under bf16 autocast (the trainer's bf16-mixed, losses in fp32)
// the pruned recipe's loss stays near the fp32 loss and every gradient is finite.
TEST(Cuda, AsrTrainingStepEqualsTheCpu) {
  REQUIRE_GPU();
  namespace asr = experiments::asr;
  asr::Transducer m = small_transducer(20, 2, 11);
  const asr::TransducerConfig& c = m->config();
  m->eval();  // no dropout: the same function on both devices
  const at::Tensor features = at::randn({3, 160, c.encoder.feature_dim});
  const at::Tensor lengths = at::tensor({160, 131, 97}, at::kLong);
  const at::Tensor tokens = at::randint(1, c.vocab_size, {3, 9}, at::kLong);
  const at::Tensor counts = at::tensor({9, 7, 4}, at::kLong);
  const auto step = [&](const at::Device& d, bool full, const AmpPolicy& policy) {
    for (at::Tensor& p : m->parameters()) p.mutable_grad() = at::Tensor();
    at::Tensor enc;
    {
      AutocastGuard autocast(policy);
      enc = m->encoder->forward(features.to(d), lengths.to(d)).first;
    }
    asr::TransducerLossOptions o;
    o.full = full;
    const asr::TransducerLoss l = asr::transducer_loss(*m, enc, asr::subsampled_frames(lengths).to(d), tokens.to(d), counts.to(d), o);
    EXPECT_EQ(l.nonfinite, 0);
    const at::Tensor total = 0.5 * l.simple + l.pruned;
    total.backward();
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : m->parameters()) grads.push_back(p.grad().defined() ? p.grad().cpu() : at::zeros_like(p).cpu());
    return std::make_pair(total.item<double>(), grads);
  };
  // cuDNN's convolutions (the subsampling, and the depthwise convolution off the CPU) may run in TF32
  // by default, which alone moved gradients by 2.4e-3 on an H200; the comparison is of fp32 math.
  const bool tf32 = at::globalContext().allowTF32CuDNN();
  at::globalContext().setAllowTF32CuDNN(false);
  const AmpPolicy fp32;
  const auto [loss_cpu, grads_cpu] = step(at::kCPU, true, fp32);
  m->to(kGpu);
  const auto [loss_gpu, grads_gpu] = step(kGpu, true, fp32);
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-4 * std::abs(loss_cpu));
  double worst = 0;
  for (size_t i = 0; i < grads_cpu.size(); ++i) worst = std::max(worst, max_relative_error(grads_gpu[i], grads_cpu[i]));
  EXPECT_LE(worst, 5e-4) << "the largest relative gradient difference over " << grads_cpu.size() << " parameters";
  at::globalContext().setAllowTF32CuDNN(tf32);
  std::printf("ASR step: largest relative gradient difference GPU/CPU (fp32, TF32 off) %.2e\n", worst);

  const AmpPolicy bf16 = resolve_amp_policy(Precision::Bf16Mixed, false, c10::DeviceType::CUDA, probe_amp_capabilities(kGpu));
  ASSERT_TRUE(bf16.autocast);
  const auto [pruned_fp32, unused] = step(kGpu, false, fp32);
  const auto [pruned_bf16, grads_bf16] = step(kGpu, false, bf16);
  EXPECT_NEAR(pruned_bf16, pruned_fp32, 0.05 * std::abs(pruned_fp32));
  for (const at::Tensor& g : grads_bf16) EXPECT_TRUE(at::isfinite(g).all().item<bool>());
}

// The trainer's Adam on CUDA (ATen's multi-tensor kernel) against torch::optim::Adam on CUDA: the
// same parameters after six steps, with weight decay, and with a parameter that skips a step.
TEST(Cuda, FusedAdamEqualsTorchAdam) {
  REQUIRE_GPU();
  const auto parameters = [] {
    at::manual_seed(2);
    return std::vector<at::Tensor>{at::randn({70000}, kGpu).requires_grad_(), at::randn({3, 5}, kGpu).requires_grad_(),
                                   at::randn({1}, kGpu).requires_grad_()};
  };
  std::vector<at::Tensor> a = parameters(), b = parameters();
  const auto options = torch::optim::AdamOptions(0.003).weight_decay(0.01);
  torch::optim::Adam reference(a, options);
  FusedAdam fused(b, options);
  for (int step = 0; step < 6; ++step) {
    for (std::vector<at::Tensor>* params : {&a, &b}) {
      at::manual_seed(100 + step);
      for (at::Tensor& p : *params) p.mutable_grad() = at::randn(p.sizes(), p.options()) * (1 + step);
      if (step == 2) (*params)[1].mutable_grad() = at::Tensor();
    }
    reference.step();
    fused.step();
  }
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::allclose(a[i], b[i], 1e-6, 1e-7)) << "parameter " << i << ": " << (a[i] - b[i]).abs().max().item<double>();
  EXPECT_GT((b[0] - parameters()[0]).abs().max().item<double>(), 1e-3);
}

}  // namespace
}  // namespace wavetrain
