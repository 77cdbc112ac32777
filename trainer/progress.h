// The training progress line: epoch, step/total, it/s, ETA, loss, throughput. On a terminal it is a
// bar redrawn in place (at most 10 times a second); when stdout is a file or a pipe (CI, SLURM
// logs, multirun jobs) it is a plain line every `plain_interval_s` seconds, so logs stay readable.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace wavetrain {

struct ProgressState {
  int64_t epoch = 0;         // 0-based
  int64_t max_epochs = -1;   // -1: unbounded
  int64_t step = 0;          // optimizer steps done in the run, earlier sessions included
  int64_t total_steps = -1;  // -1: unknown (no step-based ETA)
  // The rates are this session's: a resumed run's earlier steps took none of this process's time.
  int64_t steps_this_session = 0;
  double elapsed_s = 0;      // since this process started
  double time_left_s = -1;   // until trainer.max_time stops the run; -1: no time limit
  double loss = 0;
  double units_this_session = 0;  // training data seen, in `unit`
  std::string unit = "items";     // "items", "s audio", ...
};

// "epoch 3/10 [=======>      ] 120/400 12.3 it/s ETA 0:00:22 loss 0.0123 1.6k items/s"; `bar_width` 0
// gives the plain form "epoch 3/10 step 120/400 ...". The ETA is the sooner of the steps left at
// this session's rate and `time_left_s`; "ETA 0:01:05 (max_time)" when the time limit comes first.
std::string format_progress(const ProgressState& s, int bar_width);

// "0:00:22", "1:02:03", "12:00:00".
std::string format_duration(double seconds);

class ProgressReporter {
 public:
  ProgressReporter(std::ostream& out, bool terminal, double plain_interval_s = 30.0);
  // Prints if it is time to; `force` prints regardless (end of epoch, end of run).
  void update(const ProgressState& s, bool force = false);
  void finish();  // ends the in-place line on a terminal

 private:
  std::ostream& out_;
  bool terminal_;
  double interval_s_;
  double last_print_s_ = -1e300;
  bool drew_ = false;
};

// Whether stdout is a terminal (isatty), unless WAVETRAIN_PROGRESS=plain|bar says otherwise.
bool stdout_is_terminal();

}  // namespace wavetrain
