// The progress line; see progress.h.
#include "trainer/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>

namespace wavetrain {
namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// 1574 -> "1.6k", 2500000 -> "2.5M", 950 -> "950", 52.34 -> "52.3", 0.456 -> "0.46".
std::string compact(double v) {
  if (v >= 1e6) return fixed(v / 1e6, 1) + "M";
  if (v >= 1e3) return fixed(v / 1e3, 1) + "k";
  return fixed(v, v < 10 ? 2 : v < 100 ? 1 : 0);
}

std::string loss_text(double loss) {
  if (!std::isfinite(loss)) return loss != loss ? "nan" : (loss > 0 ? "inf" : "-inf");
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", loss);
  return buf;
}

}  // namespace

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  return buf;
}

std::string format_progress(const ProgressState& s, int bar_width) {
  std::string line = "epoch " + std::to_string(s.epoch + 1);
  if (s.max_epochs > 0) line += "/" + std::to_string(s.max_epochs);
  const bool known_total = s.total_steps > 0;
  if (bar_width > 0 && known_total) {
    const double done = std::min(1.0, static_cast<double>(s.step) / static_cast<double>(s.total_steps));
    const int filled = static_cast<int>(done * bar_width);
    std::string bar(static_cast<size_t>(bar_width), ' ');
    for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i)] = '=';
    if (filled < bar_width) bar[static_cast<size_t>(filled)] = '>';
    line += " [" + bar + "] " + std::to_string(s.step) + "/" + std::to_string(s.total_steps);
  } else {
    line += " step " + std::to_string(s.step) + (known_total ? "/" + std::to_string(s.total_steps) : "");
  }
  const double its = s.elapsed_s > 0 ? static_cast<double>(s.steps_this_session) / s.elapsed_s : 0.0;
  line += " " + fixed(its, its < 10 ? 2 : 1) + " it/s";
  double eta = known_total && its > 0 ? static_cast<double>(std::max<int64_t>(0, s.total_steps - s.step)) / its : -1;
  const bool by_time = s.time_left_s >= 0 && (eta < 0 || s.time_left_s < eta);
  if (by_time) eta = s.time_left_s;
  if (eta >= 0) line += " ETA " + format_duration(eta) + (by_time ? " (max_time)" : "");
  line += " loss " + loss_text(s.loss);
  if (s.elapsed_s > 0) line += " " + compact(s.units_this_session / s.elapsed_s) + " " + s.unit + "/s";
  return line;
}

ProgressReporter::ProgressReporter(std::ostream& out, bool terminal, double plain_interval_s)
    : out_(out), terminal_(terminal), interval_s_(plain_interval_s) {}

void ProgressReporter::update(const ProgressState& s, bool force) {
  const double min_gap = terminal_ ? 0.1 : interval_s_;
  if (!force && s.elapsed_s - last_print_s_ < min_gap) return;
  last_print_s_ = s.elapsed_s;
  if (terminal_) {
    out_ << "\r\033[K" << format_progress(s, 24) << std::flush;  // redraw in place, clearing the rest
    drew_ = true;
  } else {
    out_ << format_progress(s, 0) << "\n" << std::flush;
  }
}

void ProgressReporter::finish() {
  if (terminal_ && drew_) out_ << "\n" << std::flush;
  drew_ = false;
}

bool stdout_is_terminal() {
  if (const char* v = std::getenv("WAVETRAIN_PROGRESS")) {
    if (std::strcmp(v, "plain") == 0) return false;
    if (std::strcmp(v, "bar") == 0) return true;
  }
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace wavetrain
