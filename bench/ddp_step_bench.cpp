// One data-parallel training step, for bench/ddp_scaling.sh: forward, backward, the gradient average
// over the ranks (after the backward, or overlapped with it: trainer/gradient_sync.h), and the
// trainer's Adam, on random inputs of a fixed shape, one intra-op thread per rank.
//
//   amp:  NAM's standard WaveNet, 8 x 8192 samples, MSE
//   asr:  the tiny transducer, 8 utterances of ~3 s (300 frames), the pruned RNN-T loss
//
// usage: [BUCKET_MB=25] wavetrain_bench_ddp MODEL MODE STEPS
//        wavetrain_bench_ddp reducer-built   (exit status 0 when this build has c10d's Reducer)
//   MODE single (no process group), after, overlap (ENGINE=auto|hooks|reducer, as trainer.ddp_engine);
//   the ranks come from torchrun's variables (RANK,
//   WORLD_SIZE, MASTER_ADDR, MASTER_PORT), as bench/ddp_scaling.sh sets them.
// prints (rank 0): "median_step_ms gradient_bytes buckets buckets_launched_during_backward" (the last
// counted by the hooks engine only; -1 for the Reducer, which does not say)
#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "experiments/amp/amp_model.h"
#include "experiments/asr/transducer.h"
#include "experiments/asr/transducer_loss.h"
#include "trainer/distributed.h"
#include "trainer/distributed_env.h"
#include "trainer/fused_adam.h"
#include "trainer/gradient_overlap.h"
#include "trainer/gradient_sync.h"
#include "trainer/threads.h"

namespace asr = wavetrain::experiments::asr;
namespace amp = wavetrain::experiments::amp;

namespace {
int64_t launched_during_backward(const wavetrain::GradientSync* sync) {
  if (!sync) return 0;
  const auto* hooks = dynamic_cast<const wavetrain::OverlappedGradientAverage*>(sync);
  return hooks ? hooks->launched_during_backward() : -1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "reducer-built") return wavetrain::c10d_reducer_built() ? 0 : 1;
  if (argc != 4) {
    std::fprintf(stderr, "usage: wavetrain_bench_ddp amp|asr single|after|overlap STEPS\n");
    return 2;
  }
  const std::string model_name = argv[1], mode = argv[2];
  const int steps = std::atoi(argv[3]);
  if ((model_name != "amp" && model_name != "asr") || (mode != "single" && mode != "after" && mode != "overlap") || steps < 1) {
    std::fprintf(stderr, "wavetrain_bench_ddp: expected amp|asr single|after|overlap STEPS>0\n");
    return 2;
  }
  wavetrain::configure_threads(1);
  at::manual_seed(0);

  // The model and its step's loss.
  std::optional<amp::AmpModel> wavenet;
  asr::Transducer transducer{nullptr};
  std::vector<at::Tensor> params;
  std::function<at::Tensor()> loss;
  at::Tensor x, y, feats, lengths, tokens, counts;
  if (model_name == "amp") {
    wavenet.emplace(amp::make_amp_model("wavenet", "standard"));
    params = wavenet->module().parameters();
    x = at::randn({8, 1, 8192 + wavenet->receptive_field() - 1}) * 0.3;
    y = at::tanh(at::randn({8, 1, 8192}));
    loss = [&] { return (wavenet->wavenet->forward(x) - y).pow(2).mean(); };
  } else {
    asr::TransducerConfig c = asr::transducer_preset("tiny");
    c.vocab_size = 40;
    transducer = asr::Transducer(c);
    params = transducer->parameters();
    const int64_t B = 8;
    lengths = at::empty({B}, at::kLong);
    counts = at::empty({B}, at::kLong);
    for (int64_t i = 0; i < B; ++i) {
      lengths[i] = 300 - 5 * i;
      counts[i] = 12 + (7 * i) % 13;
    }
    tokens = at::randint(3, c.vocab_size, {B, counts.max().item<int64_t>()}, at::kLong);
    feats = at::randn({B, 300, 80});
    loss = [&] {
      const at::Tensor enc = transducer->encoder->forward(feats, lengths).first;
      const asr::TransducerLoss l = asr::transducer_loss(*transducer, enc, asr::subsampled_frames(lengths), tokens, counts, {});
      return (0.5 * l.simple + l.pruned) / l.frames;
    };
  }
  const char* mb = std::getenv("BUCKET_MB");
  const size_t bucket_bytes = static_cast<size_t>((mb ? std::atof(mb) : 25.0) * (1 << 20));  // the trainer's default
  int64_t bytes = 0;
  for (const at::Tensor& p : params) bytes += p.numel() * p.element_size();

  std::unique_ptr<wavetrain::ProcessGroup> group;
  std::unique_ptr<wavetrain::GradientSync> overlap;
  if (mode != "single") {
    const auto env = wavetrain::distributed_env([](const std::string& k) -> std::optional<std::string> {
      const char* v = std::getenv(k.c_str());
      return v ? std::optional<std::string>(v) : std::nullopt;
    });
    if (!env) {
      std::fprintf(stderr, "wavetrain_bench_ddp: %s needs RANK, WORLD_SIZE (> 1), MASTER_ADDR, MASTER_PORT\n", mode.c_str());
      return 2;
    }
    group = std::make_unique<wavetrain::ProcessGroup>(*env, std::chrono::seconds(60), at::Device(at::kCPU));
    group->broadcast_from_rank0(params);
    if (mode == "overlap") {
      wavetrain::GradientSyncOptions o;
      const char* engine = std::getenv("ENGINE");
      o.engine = engine ? engine : "auto";
      o.bucket_bytes = bucket_bytes;
      overlap = wavetrain::make_gradient_sync(*group, params, {}, o);
    }
  }
  wavetrain::FusedAdam adam(params, torch::optim::AdamOptions(1e-4));

  std::vector<double> ms;
  for (int i = 0; i < steps + 3; ++i) {  // the first 3 warm up (and order the overlap's buckets)
    if (group) group->barrier();          // every rank starts the step together
    const auto t0 = std::chrono::steady_clock::now();
    adam.zero_grad();
    if (overlap) overlap->arm();
    if (overlap) overlap->backward(loss());
    else loss().backward();
    if (overlap) overlap->finish();
    else if (group) {
      std::vector<at::Tensor> grads;
      for (const at::Tensor& p : params)
        if (p.grad().defined()) grads.push_back(p.grad());
      group->average(grads, bucket_bytes);
    }
    adam.step();
    if (i >= 3) ms.push_back(wavetrain::bench::since(t0));
  }
  if (!group || group->rank() == 0)
    std::printf("%.2f %lld %lld %lld\n", wavetrain::bench::median(ms), static_cast<long long>(bytes),
                static_cast<long long>(overlap ? overlap->buckets() : 0),
                static_cast<long long>(launched_during_backward(overlap.get())));
  return 0;
}
