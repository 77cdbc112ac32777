// ASHA's bookkeeping; see asha.h.
#include "trainer/sweep/asha.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace wavetrain::sweep {

Asha::Asha(size_t trials, AshaOptions options) : options_(std::move(options)), trials_(trials) {
  if (options_.min_resource < 1) throw std::invalid_argument("sweep.asha.min_resource must be >= 1");
  if (options_.max_resource < options_.min_resource)
    throw std::invalid_argument("sweep.asha.max_resource (" + std::to_string(options_.max_resource) +
                                ") must be >= sweep.asha.min_resource (" + std::to_string(options_.min_resource) + ")");
  if (!(options_.eta > 1)) throw std::invalid_argument("sweep.asha.eta must be > 1");
  if (options_.mode != "min" && options_.mode != "max")
    throw std::invalid_argument("sweep.mode must be min or max, got '" + options_.mode + "'");
  // Budgets below the maximum, then the maximum; a rung within 1% of it is the maximum itself.
  for (double r = static_cast<double>(options_.min_resource); r < 0.99 * static_cast<double>(options_.max_resource);
       r *= options_.eta)
    budgets_.push_back(static_cast<int64_t>(std::llround(r)));
  budgets_.push_back(options_.max_resource);
}

std::optional<Asha::Launch> Asha::promotion() const {
  for (size_t k = budgets_.size() - 1; k-- > 0;) {
    std::vector<size_t> finished;  // trials with an objective at rung k
    for (size_t t = 0; t < trials_.size(); ++t)
      if (trials_[t].objectives.size() > k) finished.push_back(t);
    const size_t top = static_cast<size_t>(std::floor(static_cast<double>(finished.size()) / options_.eta));
    std::stable_sort(finished.begin(), finished.end(),
                     [&](size_t a, size_t b) { return better(trials_[a].objectives[k], trials_[b].objectives[k]); });
    for (size_t i = 0; i < top; ++i) {
      const Trial& t = trials_[finished[i]];
      if (!t.running && !t.failed && t.finished_rung == static_cast<int>(k)) return Launch{finished[i], k + 1, budgets_[k + 1], true};
    }
  }
  return std::nullopt;
}

std::optional<Asha::Launch> Asha::next() {
  std::optional<Launch> launch = promotion();
  if (!launch && next_new_ < trials_.size()) launch = Launch{next_new_++, 0, budgets_[0], false};
  if (launch) {
    trials_[launch->trial].started = true;
    trials_[launch->trial].running = true;
  }
  return launch;
}

void Asha::report(size_t trial, size_t rung, std::optional<double> objective) {
  Trial& t = trials_.at(trial);
  t.running = false;
  t.started = true;
  if (trial >= next_new_) next_new_ = trial + 1;  // replayed from a resumed sweep's record
  if (!objective || std::isnan(*objective) || rung != t.objectives.size()) {
    t.failed = true;
    return;
  }
  t.objectives.push_back(*objective);
  t.finished_rung = static_cast<int>(rung);
}

void Asha::resume_running(size_t trial) {
  Trial& t = trials_.at(trial);
  t.started = true;
  t.running = true;
  t.failed = false;
  if (trial >= next_new_) next_new_ = trial + 1;
}

bool Asha::finished() const {
  for (const Trial& t : trials_)
    if (t.running) return false;
  return next_new_ >= trials_.size() && !promotion();
}

std::string Asha::status(size_t trial) const {
  const Trial& t = trials_.at(trial);
  if (t.running) return "running";
  if (t.failed) return "failed";
  if (!t.started) return "pending";
  if (t.finished_rung == static_cast<int>(budgets_.size()) - 1) return "done";
  return "stopped";
}

}  // namespace wavetrain::sweep
