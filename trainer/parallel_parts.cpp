// Batch parts trained at once (parallel_parts.h).
#include "trainer/parallel_parts.h"

#include "trainer/threads.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/autograd.h>
#include <c10/core/GradMode.h>


#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace wavetrain {
namespace {

struct Stream {
  bool active = false;
  uint64_t seed = 0, count = 0;
};
thread_local Stream stream;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

void run_parts_in_parallel(int64_t parts, const std::function<void(int64_t part)>& part) {
  const at::ThreadLocalState state;  // the caller's grad mode, autocast, ...
  // oneDNN (ATen's mkldnn convolutions) keeps primitives made for the full thread team and reuses
  // them inside this region, where each has one thread: its convolution's weight-gradient reduction
  // then waits forever at a barrier for threads that never come (seen with PyTorch 2.11). ATen's own
  // convolutions run here instead, serially like every other operator.
  struct MkldnnOff {
    bool was = at::globalContext().userEnabledMkldnn();
    MkldnnOff() { at::globalContext().setUserEnabledMkldnn(false); }
    ~MkldnnOff() { at::globalContext().setUserEnabledMkldnn(was); }
  } mkldnn_off;
  // OpenBLAS's pthread build (Debian's LibTorch multiplies matrices with it) keeps its own thread
  // pool and does not see OpenMP's nesting: inside this region, each part's product would wake the
  // whole pool, and the parts' products would queue for it (the step ran 1.3x slower than unsplit).
  // One thread makes it multiply in the calling thread. configure_threads() already leaves it at 1
  // unless the user set OPENBLAS_NUM_THREADS (trainer/threads.h).
  struct OpenBlasSerial {
    int was = openblas_threads();
    OpenBlasSerial() {
      if (was > 1) set_openblas_threads(1);
    }
    ~OpenBlasSerial() {
      if (was > 1) set_openblas_threads(was);
    }
  } openblas_serial;
  std::exception_ptr error;
  std::mutex error_mutex;
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    at::ThreadLocalStateGuard guard(state);
#ifdef _OPENMP
    // Libraries that size their work by omp_get_max_threads() (MKL, oneDNN) see 1 here, not the
    // team's size. This sets the ICV of this region's implicit task only; the caller's is untouched.
    omp_set_num_threads(1);
#endif
    for (int64_t i = begin; i < end; ++i) {
      try {
        part(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  });
  if (error) std::rethrow_exception(error);
}

uint64_t next_random_seed() {
  if (stream.active) return splitmix64(stream.seed + splitmix64(stream.count++));
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get<at::CPUGeneratorImpl>()->random64();
}

ScopedRandomStream::ScopedRandomStream(uint64_t seed)
    : had_(stream.active), previous_seed_(stream.seed), previous_count_(stream.count) {
  stream = {true, seed, 0};
}

ScopedRandomStream::~ScopedRandomStream() { stream = {had_, previous_seed_, previous_count_}; }

// ---- One batch's parts ----

int64_t batch_parts(const config::Config& cfg, const at::Device& device, const Task& task) {
  const std::string key = "trainer.cpu_batch_parts", text = cfg.get_string(key, "1");
  const bool cpu = device.is_cpu(), allowed = task.parallel_batch_parts();
  if (text == "auto") return cpu && allowed ? at::get_num_threads() : 1;
  const int64_t parts = cfg.get_int_at_most(key, 1, 1024);
  if (parts < 1) throw config::ConfigError(key + " must be auto or >= 1, got " + text);
  if (parts > 1 && !cpu) throw config::ConfigError(key + "=" + text + " is for CPU training; this run's device is " + device.str());
  if (parts > 1 && !allowed)
    throw config::ConfigError(key + "=" + text + ": task " + cfg.get_string("task", "") + " does not train batch parts in parallel");
  return parts;
}

std::vector<std::vector<int64_t>> cut_into_parts(const std::vector<int64_t>& indices, int64_t parts) {
  const int64_t n = static_cast<int64_t>(indices.size()), k = std::max<int64_t>(1, std::min(parts, n));
  std::vector<std::vector<int64_t>> out;
  int64_t first = 0;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t size = n / k + (i < n % k ? 1 : 0);
    out.emplace_back(indices.begin() + first, indices.begin() + first + size);
    first += size;
  }
  return out;
}

PartsResult train_parts(Task& task, const std::vector<Batch>& parts, const std::vector<at::Tensor>& parameters, const AmpPolicy& amp,
                        GradScaler& scaler, double loss_factor, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(parts.size());
  std::vector<double> losses(static_cast<size_t>(n));
  std::vector<Metrics> logged(static_cast<size_t>(n));
  std::vector<std::vector<at::Tensor>> grads(static_cast<size_t>(n));
  run_parts_in_parallel(n, [&](int64_t i) {
    const size_t k = static_cast<size_t>(i);
    ScopedRandomStream stream(seed + static_cast<uint64_t>(i));
    at::Tensor prediction;
    {
      AutocastGuard autocast(amp);
      prediction = task.forward(parts[k]);
    }
    const at::Tensor loss = task.loss(prediction, parts[k], logged[k]);
    losses[k] = loss.item<double>();
    if (!std::isfinite(losses[k])) return;  // the batch is skipped: no gradient needed
    grads[k] = torch::autograd::grad({scaler.scale(loss * loss_factor)}, parameters, /*grad_outputs=*/{}, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true);
  });
  PartsResult r;
  for (int64_t i = 0; i < n; ++i) {
    r.loss += losses[static_cast<size_t>(i)] / static_cast<double>(n);
    r.finite = r.finite && std::isfinite(losses[static_cast<size_t>(i)]);
  }
  for (const auto& [name, value] : logged[0]) {
    double sum = 0;
    for (const Metrics& m : logged)
      for (const auto& [other, v] : m)
        if (other == name) sum += v;
    r.logged.emplace_back(name, sum / static_cast<double>(n));
  }
  if (!r.finite) return r;
  c10::AutoGradMode no_grad(false);
  for (size_t j = 0; j < parameters.size(); ++j) {
    at::Tensor sum;
    for (const auto& g : grads)
      if (g[j].defined()) sum = sum.defined() ? sum + g[j] : g[j];
    if (!sum.defined()) continue;
    at::Tensor p = parameters[j];
    if (p.grad().defined()) p.mutable_grad().add_(sum);
    else p.mutable_grad() = sum;
  }
  return r;
}

}  // namespace wavetrain
