// What the benchmarks time with: wall-clock milliseconds since a point, and the median of repeats.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace wavetrain::bench {

inline double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace wavetrain::bench
