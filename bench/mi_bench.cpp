// Transducer losses on the CPU, forward + backward, at the sizes of issue 7's measurements of
// k2/fast_rnnt on this machine: the recursion against a serial cell-by-cell baseline of the same
// algorithm (bench/mi_serial_baseline.h) run in this process, and the RNN-T losses in absolute time
// with their peak memory. Each case runs in its own process (see run_case).
//
// usage: wavetrain_bench_mi [THREADS] [REPEATS]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/mi_serial_baseline.h"
#include "losses/mutual_information.h"
#include "losses/rnnt_loss.h"

namespace {

using namespace wavetrain::losses;

int g_repeats = 10;

double median_ms(const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();  // warm-up: the allocator and the page tables settle
  std::vector<double> ms;
  for (int i = 0; i < g_repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Resident memory from /proc/self/status: "VmRSS" now or "VmHWM" (the peak), in kB.
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

std::string recursion_case(int64_t B, int64_t S, int64_t T) {
  at::manual_seed(0);
  const at::Tensor px = at::randn({B, S, T + 1}), py = at::randn({B, S + 1, T});
  at::Tensor boundary = at::zeros({B, 4}, at::kLong);
  boundary.select(1, 2).fill_(S);
  boundary.select(1, 3).fill_(T);
  at::Tensor scores = at::empty({B}), gx = at::zeros_like(px), gy = at::zeros_like(py);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);  // the baseline is serial, as the extension it stands for
  const double serial = median_ms([&] { wavetrain::bench::serial_mutual_information<float>(px, py, boundary, scores, gx, gy); });
  at::set_num_threads(threads);
  // Same numbers before timing anything.
  const MutualInformation mi = mutual_information_with_grad(px, py, boundary, MiImplementation::kCpu);
  const double diff = std::max((mi.scores - scores).abs().max().item<double>() / scores.abs().max().item<double>(),
                               (mi.px_grad - gx).abs().max().item<double>());
  if (!(diff < 1e-4)) {
    std::fprintf(stderr, "mi_bench: kernel and baseline disagree by %g\n", diff);
    std::exit(1);
  }
  const double fast = median_ms([&] { mutual_information_with_grad(px, py, boundary, MiImplementation::kCpu); });
  char line[200];
  std::snprintf(line, sizeof(line), "serial %8.2f ms  wavetrain %7.2f ms  ratio %.3f (%.1fx)  %.1f ns/cell", serial, fast,
                fast / serial, serial / fast, fast * 1e6 / static_cast<double>(B * (S + 1) * (T + 1)));
  return line;
}

struct Rnnt {
  at::Tensor lm, am, symbols, boundary;
};

Rnnt rnnt_inputs(int64_t B, int64_t S, int64_t T, int64_t C) {
  at::manual_seed(1);
  Rnnt r;
  r.lm = at::randn({B, S + 1, C}).requires_grad_(true);
  r.am = at::randn({B, T, C}).requires_grad_(true);
  r.symbols = at::randint(1, C, {B, S}, at::kLong);
  r.boundary = at::zeros({B, 4}, at::kLong);
  r.boundary.select(1, 2).fill_(S);
  r.boundary.select(1, 3).fill_(T);
  return r;
}

std::string timed(const std::function<void()>& f) {
  char line[80];
  std::snprintf(line, sizeof(line), "%8.2f ms", median_ms(f));
  return line;
}

// Each case runs in a fresh process (this program, exec'd with the case's name), so that its peak
// resident memory is its own: VmHWM at the end minus VmRSS before its inputs were made. (A fork
// without exec measured 50% slower: every write to memory shared with the parent faulted.)
int run_case(const std::string& name) {
  const long before = status_kb("VmRSS");
  std::string line;
  const int64_t B = 8, S = 50, T = 300, C = 500;
  if (name == "recursion_small") {
    line = recursion_case(8, 50, 300);
  } else if (name == "recursion_large") {
    line = recursion_case(32, 100, 500);
  } else if (name == "simple") {
    const Rnnt r = rnnt_inputs(B, S, T, C);
    RnntOptions o;
    o.boundary = r.boundary;
    line = timed([&] { rnnt_loss_simple(r.lm, r.am, r.symbols, o).backward(); });
  } else if (name == "pruned") {
    const Rnnt r = rnnt_inputs(B, S, T, C);
    RnntOptions o;
    o.boundary = r.boundary;
    line = timed([&] {
      const RnntLossWithGrad simple = rnnt_loss_smoothed_with_grad(r.lm, r.am, r.symbols, 0.25, 0.0, o);
      const at::Tensor ranges = get_rnnt_prune_ranges(simple.px_grad, simple.py_grad, r.boundary, 5);
      const auto [am_pruned, lm_pruned] = do_rnnt_pruning(r.am, r.lm, ranges);
      const at::Tensor pruned = rnnt_loss_pruned(am_pruned + lm_pruned, r.symbols, ranges, o);
      (0.5 * simple.loss + pruned).backward();
    });
  } else if (name == "full") {
    const Rnnt r = rnnt_inputs(B, S, T, C);
    RnntOptions o;
    o.boundary = r.boundary;
    const at::Tensor logits = (r.am.detach().unsqueeze(2) + r.lm.detach().unsqueeze(1)).requires_grad_(true);
    line = timed([&] { rnnt_loss(logits, r.symbols, o).backward(); });
  } else {
    std::fprintf(stderr, "mi_bench: unknown case %s\n", name.c_str());
    return 2;
  }
  std::printf("%s  peak +%.0f MB\n", line.c_str(), static_cast<double>(status_kb("VmHWM") - before) / 1024.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  g_repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  at::set_num_threads(threads);
  // As the wavetrain binary does (trainer/threads.h): subnormals flushed before threads start.
  at::globalContext().setFlushDenormal(true);
  if (argc > 3) return run_case(argv[3]);
  std::printf("threads %d, median of %d after 3 warm-ups, forward + backward, float32, subnormals flushed\n", threads,
              g_repeats);
  const std::pair<const char*, const char*> cases[] = {
      {"recursion_small", "recursion (8, 50, 300)"},
      {"recursion_large", "recursion (32, 100, 500)"},
      {"simple", "rnnt_loss_simple (8, 50, 300, 500)"},
      {"pruned", "smoothed + prune + pruned, s_range 5"},
      {"full", "full rnnt_loss (8, 50, 300, 500)"},
  };
  for (const auto& [id, label] : cases) {
    std::printf("%-38s ", label);
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string t = std::to_string(threads), r = std::to_string(g_repeats);
      execl("/proc/self/exe", argv[0], t.c_str(), r.c_str(), id, static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  return 0;
}
