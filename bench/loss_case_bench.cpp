// One case of bench/losses.sh on wavetrain's side: the transducer losses, the multi-resolution STFT
// loss and the 80-bin fbank, each as a training step uses it (forward, then backward through
// autograd, then the gradients cleared), with bench/loss_anchor.py doing the same with the real
// anchor (fast_rnnt, auraloss, torchaudio) in its own process. The driver (bench/loss_rounds.py)
// runs the two alternately for several rounds.
//
// usage: wavetrain_bench_loss_case CASE THREADS REPEATS
// prints "median_ms min_ms peak_mb": the median and the fastest of the timed runs after 2 warm-ups
// (at least REPEATS, and at least 0.3 s of them), and the peak resident memory the case added (the peak is reset after the inputs'
// baseline is read, so the process start-up does not count).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "data/fbank.h"
#include "losses/mutual_information.h"
#include "losses/rnnt_loss.h"
#include "losses/stft_loss.h"
#include "trainer/threads.h"

namespace {

using namespace wavetrain::losses;

// "VmRSS" (now) or "VmHWM" (the peak since the last reset) from /proc/self/status, in kB.
long status_kb(const char* field) {
  long kb = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    const size_t n = std::strlen(field);
    while (std::fgets(line, sizeof(line), f))
      if (std::strncmp(line, field, n) == 0 && line[n] == ':') kb = std::atol(line + n + 1);
    std::fclose(f);
  }
  return kb;
}

// Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
void reset_peak() {
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

void clear_grad(at::Tensor& t) { t.mutable_grad() = at::Tensor(); }

at::Tensor full_boundary(int64_t B, int64_t S, int64_t T) {
  at::Tensor boundary = at::zeros({B, 4}, at::kLong);
  boundary.select(1, 2).fill_(S);
  boundary.select(1, 3).fill_(T);
  return boundary;
}

// The inputs are made here, inside the measured memory, as they are on the anchor's side.
std::function<void()> make_case(const std::string& name) {
  // The transducer sizes of issue 7's measurements: 8 items, 50 symbols, 300 frames, 500 classes.
  const int64_t B = 8, S = 50, T = 300, C = 500;
  if (name == "mi_small" || name == "mi_large") {
    const bool large = name == "mi_large";
    const int64_t b = large ? 32 : 8, s = large ? 100 : 50, t = large ? 500 : 300;
    at::Tensor px = at::randn({b, s, t + 1}).requires_grad_(true);
    at::Tensor py = at::randn({b, s + 1, t}).requires_grad_(true);
    const at::Tensor boundary = full_boundary(b, s, t);
    return [=]() mutable {
      mutual_information_recursion(px, py, boundary, MiImplementation::kCpu).sum().backward();
      clear_grad(px);
      clear_grad(py);
    };
  }
  if (name == "simple" || name == "pruned" || name == "full") {
    at::Tensor lm = at::randn({B, S + 1, C}).requires_grad_(true);
    at::Tensor am = at::randn({B, T, C}).requires_grad_(true);
    const at::Tensor symbols = at::randint(1, C, {B, S}, at::kLong);
    RnntOptions o;
    o.boundary = full_boundary(B, S, T);
    o.reduction = Reduction::kSum;
    if (name == "simple")
      return [=]() mutable {
        rnnt_loss_simple(lm, am, symbols, o).backward();
        clear_grad(lm);
        clear_grad(am);
      };
    if (name == "pruned")  // icefall's training loss: smoothed simple loss, prune, pruned loss
      return [=]() mutable {
        const RnntLossWithGrad simple = rnnt_loss_smoothed_with_grad(lm, am, symbols, 0.25, 0.0, o);
        const at::Tensor ranges = get_rnnt_prune_ranges(simple.px_grad, simple.py_grad, *o.boundary, 5);
        const auto [am_pruned, lm_pruned] = do_rnnt_pruning(am, lm, ranges);
        const at::Tensor pruned = rnnt_loss_pruned(am_pruned + lm_pruned, symbols, ranges, o);
        (0.5 * simple.loss + pruned).backward();
        clear_grad(lm);
        clear_grad(am);
      };
    at::Tensor logits = (am.detach().unsqueeze(2) + lm.detach().unsqueeze(1)).requires_grad_(true);
    return [=]() mutable {
      rnnt_loss(logits, symbols, o).backward();
      clear_grad(logits);
    };
  }
  if (name == "mrstft_16x8192" || name == "mrstft_4x65536") {
    const bool long_signal = name == "mrstft_4x65536";
    const int64_t batch = long_signal ? 4 : 16, samples = long_signal ? 65536 : 8192;
    const at::Tensor target = at::randn({batch, 1, samples});
    at::Tensor pred = (target + 0.1 * at::randn({batch, 1, samples})).requires_grad_(true);
    const MultiResolutionStftLoss loss;  // auraloss's defaults
    return [=]() mutable {
      loss(pred, target).backward();
      clear_grad(pred);
    };
  }
  if (name == "fbank_10s") {
    const at::Tensor waveform = at::randn({160000}) * 3000;  // 10 s at 16 kHz, int16-range values
    wavetrain::data::FbankOptions o;                         // torchaudio's defaults
    o.num_mel_bins = 80;
    return [=] { wavetrain::data::fbank(waveform, o); };
  }
  std::fprintf(stderr, "loss_case_bench: unknown case '%s' (expected mi_small, mi_large, simple, pruned, full, "
                       "mrstft_16x8192, mrstft_4x65536 or fbank_10s)\n", name.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s CASE THREADS REPEATS\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[2]), repeats = std::atoi(argv[3]);
  if (threads < 1 || repeats < 1) {
    std::fprintf(stderr, "loss_case_bench: THREADS and REPEATS must be positive, got '%s' and '%s'\n", argv[2], argv[3]);
    return 2;
  }
  // As the wavetrain binary does (trainer/threads.h): the thread count, subnormals flushed before
  // the threads start, freed memory kept for reuse.
  wavetrain::configure_threads(threads);
  at::manual_seed(0);
  const long before_kb = status_kb("VmRSS");
  reset_peak();
  std::function<void()> step = make_case(argv[1]);
  // At least REPEATS timed runs, and more until they add up to 0.3 s (at most 2000): a
  // millisecond case needs hundreds of runs for a stable median. The anchor follows the same rule.
  std::vector<double> ms;
  double total_ms = 0;
  for (int i = 0; i < 2 || ((static_cast<int>(ms.size()) < repeats || total_ms < 300.0) && ms.size() < 2000); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 2) {
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      total_ms += ms.back();
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%.3f %.3f %.1f\n", ms[ms.size() / 2], ms.front(), static_cast<double>(status_kb("VmHWM") - before_kb) / 1024.0);
  return 0;
}
