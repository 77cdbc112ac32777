// GPU timings for scripts/gpu-check: one training step of NAM's standard WaveNet on CUDA (batch
// 16 x 8192, NAM's loss, Adam; fp32, and fp16 autocast with the gradient scaler), and the
// mutual-information recursion (forward and occupation gradients) through wavetrain's CUDA kernel.
// bench/amp_step_baseline.py cuda and bench/mi_gpu_baseline.py time the same in Python PyTorch.
//
// The step uses the trainer's Adam (FusedAdam: ATen's multi-tensor kernel on CUDA); the fp32 step is
// also timed with torch::optim::Adam (about seven launches per parameter), to show what fusing buys.
//
// usage: wavetrain_bench_gpu [REPEATS]
// prints "amp_step_fp32_ms amp_step_fp16_ms mi_ms amp_step_fp32_torch_adam_ms" (medians; the GPU
// synchronised around each);
// exits 2 when this LibTorch has no CUDA or the machine no GPU.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "experiments/amp/amp_model.h"
#include "losses/audio_losses.h"
#include "losses/mutual_information.h"
#include "trainer/amp.h"
#include "trainer/fused_adam.h"
#include "trainer/grad_scaler.h"

using namespace wavetrain;

namespace {

double median_ms(int repeats, const std::function<void()>& step) {
  std::vector<double> ms;
  for (int i = 0; i < repeats + 3; ++i) {
    torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    torch::cuda::synchronize();
    if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "wavetrain_bench_gpu: no CUDA device (or this LibTorch has no CUDA)\n");
    return 2;
  }
  const at::Device gpu(at::kCUDA, 0);
  at::manual_seed(0);
  experiments::amp::AmpModel m = experiments::amp::make_amp_model("wavenet", "standard");
  m.module().to(gpu);
  FusedAdam adam(m.module().parameters(), torch::optim::AdamOptions(0.004));
  const losses::CombinedLoss loss({{"mse", 1.0}, {"mrstft", 2e-4}, {"pre_emphasis", 0.85}});
  const int64_t rf = m.receptive_field();
  const at::Tensor x = (at::randn({16, 1, 8192 + rf - 1}) * 0.3).to(gpu);
  const at::Tensor y = at::tanh(at::randn({16, 1, 8192})).to(gpu);
  const double fp32_ms = median_ms(repeats, [&] {
    adam.zero_grad();
    loss(m.wavenet->forward(x), y).backward();
    adam.step();
  });
  torch::optim::Adam torch_adam(m.module().parameters(), torch::optim::AdamOptions(0.004));
  const double fp32_torch_adam_ms = median_ms(repeats, [&] {
    torch_adam.zero_grad();
    loss(m.wavenet->forward(x), y).backward();
    torch_adam.step();
  });
  // fp16: the model under autocast, the loss in fp32, the scaler around backward and step, as the
  // trainer does with trainer.precision=16-mixed.
  const AmpPolicy policy = resolve_amp_policy(Precision::Fp16Mixed, false, c10::DeviceType::CUDA, probe_amp_capabilities(gpu));
  GradScaler scaler;
  const double fp16_ms = median_ms(repeats, [&] {
    adam.zero_grad();
    at::Tensor prediction;
    {
      const AutocastGuard guard(policy);
      prediction = m.wavenet->forward(x);
    }
    scaler.scale(loss(prediction.to(at::kFloat), y)).backward();
    scaler.step(adam);
    scaler.update();
  });

  // The recursion at a transducer's size: 16 utterances, 100 symbols, 400 frames.
  const at::Tensor px = at::randn({16, 100, 401}).to(gpu), py = at::randn({16, 101, 400}).to(gpu);
  const double mi_ms = median_ms(repeats, [&] {
    losses::mutual_information_with_grad(px, py, std::nullopt, losses::MiImplementation::kCuda);
  });
  std::printf("%.2f %.2f %.2f %.2f\n", fp32_ms, fp16_ms, mi_ms, fp32_torch_adam_ms);
  return 0;
}
