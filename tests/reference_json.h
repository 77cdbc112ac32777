// Reading reference vectors stored as JSON (nested lists of numbers; "-inf", "inf" and "nan" as
// strings) into ATen tensors, for tests against the files in tests/data/reference/.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace wavetrain::testing {

inline nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

inline double json_number(const nlohmann::json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    throw std::runtime_error("not a number: " + s);
  }
  return v.get<double>();
}

inline void flatten(const nlohmann::json& v, std::vector<double>& values, std::vector<int64_t>& shape, size_t depth) {
  if (!v.is_array()) {
    values.push_back(json_number(v));
    return;
  }
  if (shape.size() == depth) shape.push_back(static_cast<int64_t>(v.size()));
  for (const nlohmann::json& e : v) flatten(e, values, shape, depth + 1);
}

// A nested list as a tensor of `dtype` (float64 unless told).
inline at::Tensor json_tensor(const nlohmann::json& v, at::ScalarType dtype = at::kDouble) {
  std::vector<double> values;
  std::vector<int64_t> shape;
  flatten(v, values, shape, 0);
  return at::tensor(values, at::kDouble).reshape(shape).to(dtype);
}

// Largest |actual - expected| / max(|expected|, floor) over the elements; equal infinities count
// as 0, and a NaN or infinity where the other side has none as infinity.
inline double max_relative_error(const at::Tensor& actual, const at::Tensor& expected, double floor = 1.0) {
  const at::Tensor a = actual.to(at::kDouble).cpu().contiguous(), e = expected.to(at::kDouble).cpu().contiguous();
  if (!a.sizes().equals(e.sizes())) return std::numeric_limits<double>::infinity();
  const double* pa = a.data_ptr<double>();
  const double* pe = e.data_ptr<double>();
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (pa[i] == pe[i]) continue;  // also equal infinities
    if (!std::isfinite(pa[i]) || !std::isfinite(pe[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(pa[i] - pe[i]) / std::max(std::abs(pe[i]), floor));
  }
  return worst;
}

}  // namespace wavetrain::testing
