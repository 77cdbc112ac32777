// ASHA, asynchronous successive halving (Li et al., "A System for Massively Parallel Hyperparameter
// Tuning", MLSys 2020): trials start with a small budget and the best of each rung go on with eta
// times more, without waiting for a rung to fill.
//
// Rungs: budgets r_k = min_resource * eta^k below max_resource, then max_resource itself
// (min 30, max 270, eta 3: 30, 90, 270). Whenever a worker is free, the scheduler promotes a trial
// that is among the best floor(n_k / eta) of the n_k trials that finished rung k and has not gone
// on yet (highest rung first); failing that it starts the next new trial at rung 0. A promoted
// trial resumes from its checkpoint (the resource is a step or epoch limit, and runs resume
// exactly), so each rung costs only its budget's difference. Trials never promoted are "stopped":
// their run directories stay. A trial whose run fails, or reports no objective, is never promoted.
//
// Pure bookkeeping: no processes, files or clocks, so every decision is testable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wavetrain::sweep {

struct AshaOptions {
  int64_t min_resource = 1;
  int64_t max_resource = 0;
  double eta = 3;
  std::string mode = "min";  // the objective's better direction: min or max
};

class Asha {
 public:
  // Throws std::invalid_argument for min_resource < 1, max_resource < min_resource, eta <= 1 or a
  // mode other than min and max.
  Asha(size_t trials, AshaOptions options);

  const std::vector<int64_t>& budgets() const { return budgets_; }

  struct Launch {
    size_t trial = 0;
    size_t rung = 0;
    int64_t budget = 0;
    bool resume = false;  // a promotion: continue the trial's run
  };
  // The next run to start on a free worker, marked as running; nullopt when nothing can start now
  // (every trial started, none promotable).
  std::optional<Launch> next();
  // A run of `trial` at `rung` ended: its objective, or nullopt when it failed or reported none.
  void report(size_t trial, size_t rung, std::optional<double> objective);
  // A resumed sweep: `trial` was running when the earlier driver stopped (its finished rungs already
  // reported); it counts as running until reported.
  void resume_running(size_t trial);
  // Nothing running and nothing left to start.
  bool finished() const;

  // pending, running, done (finished the top rung), stopped (not promoted), failed.
  std::string status(size_t trial) const;
  // The highest rung the trial has finished; -1 for none.
  int rung(size_t trial) const { return trials_[trial].finished_rung; }
  // The objectives at the rungs it finished, lowest first.
  const std::vector<double>& objectives(size_t trial) const { return trials_.at(trial).objectives; }

 private:
  struct Trial {
    bool started = false, running = false, failed = false;
    int finished_rung = -1;
    std::vector<double> objectives;  // at each finished rung
  };
  std::optional<Launch> promotion() const;
  bool better(double a, double b) const { return options_.mode == "max" ? a > b : a < b; }

  AshaOptions options_;
  std::vector<int64_t> budgets_;
  std::vector<Trial> trials_;
  size_t next_new_ = 0;
};

}  // namespace wavetrain::sweep
