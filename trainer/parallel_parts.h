// Batch parts trained at once on the CPU, one per intra-op thread.
//
// Why: a small model on a few cores leaves most of them idle. The transducer's step on 2 cores ran
// only 1.24x faster than on 1 (bench/asr.sh), because most of its operators are too small for
// ATen to split well. Cutting the batch into as many parts as there are threads and running each
// part's forward, loss and backward on its own thread, single-threaded (ATen runs operators
// serially inside a parallel region), keeps every core busy with whole operators.
//
// Determinism: each part's gradients are returned, not accumulated into the parameters by
// whichever thread finishes first, and the caller sums them in part order; random operators inside
// the model draw from a per-part stream (next_random_seed), seeded by the caller from the step, not
// from the shared default generator in whatever order the threads reach it. So a step gives the
// same numbers on any number of threads, run after run, and resumes exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "trainer/amp.h"
#include "trainer/grad_scaler.h"
#include "trainer/task.h"

namespace wavetrain {

// Runs part(i) for i = 0 .. parts - 1 at once on ATen's intra-op threads (serially when there is
// one thread), each part under the calling thread's thread-local state (grad mode, autocast). The
// first exception a part throws is rethrown here after all parts end.
void run_parts_in_parallel(int64_t parts, const std::function<void(int64_t part)>& part);

// A seed for a random operator (dropout): from this thread's stream while a ScopedRandomStream is
// alive on it (the n-th call gives a pure function of the stream's seed and n), otherwise from
// ATen's default CPU generator (so that manual_seed and checkpointed generator state govern it).
uint64_t next_random_seed();

class ScopedRandomStream {
 public:
  explicit ScopedRandomStream(uint64_t seed);
  ~ScopedRandomStream();
  ScopedRandomStream(const ScopedRandomStream&) = delete;
  ScopedRandomStream& operator=(const ScopedRandomStream&) = delete;

 private:
  bool had_ = false;
  uint64_t previous_seed_ = 0, previous_count_ = 0;
};

// ---- The trainer's use: one batch's parts ----

// trainer.cpu_batch_parts for a run: a count >= 1, or "auto" = the intra-op threads when the
// device is the CPU and the task allows parts (Task::parallel_batch_parts), else 1. Throws
// config::ConfigError for a count below 1, or above 1 off the CPU or for a task without parts.
int64_t batch_parts(const config::Config& cfg, const at::Device& device, const Task& task);

// The indices of a batch cut into `parts` consecutive runs of as equal sizes as possible (the first
// ones one longer); fewer parts when the batch is smaller than `parts`.
std::vector<std::vector<int64_t>> cut_into_parts(const std::vector<int64_t>& indices, int64_t parts);

struct PartsResult {
  double loss = 0;      // the parts' mean loss (each as task.loss gives it)
  Metrics logged;       // each logged value's mean over the parts, in the first part's order
  bool finite = true;   // false when a part's loss was not finite: no gradient was added
};

// Trains the parts of one batch at once (run_parts_in_parallel): each part's forward (under `amp`),
// loss, and the gradients of scaler.scale(loss x loss_factor) with respect to `parameters`; random
// operators draw from the stream seed + part. When every loss is finite, the parts' gradients are
// summed in part order and added to the parameters' .grad (as backward() would accumulate).
PartsResult train_parts(Task& task, const std::vector<Batch>& parts, const std::vector<at::Tensor>& parameters, const AmpPolicy& amp,
                        GradScaler& scaler, double loss_factor, uint64_t seed);

}  // namespace wavetrain
