// Internal to experiments/amp/: a .nam activation (ActivationSpec) applied row by row to a
// channel-major signal by the element-wise kernels (dsp_kernels.h); PReLU has a slope per row.
#pragma once

#include <stdexcept>
#include <utility>
#include <vector>

#include "experiments/amp/dsp_kernels.h"
#include "experiments/amp/nam_wavenet.h"

namespace wavetrain::experiments::amp {

// An activation for each row (PReLU has a slope per channel).
struct RowActivation {
  dsp::Elementwise f;
  std::vector<float> slopes;  // PReLU
  void set(const ActivationSpec& a) {
    using dsp::Kind;
    static const std::pair<const char*, Kind> kinds[] = {
        {"Tanh", Kind::Tanh},       {"Fasttanh", Kind::FastTanh}, {"Hardtanh", Kind::Hardtanh}, {"LeakyHardtanh", Kind::LeakyHardtanh},
        {"ReLU", Kind::ReLU},       {"LeakyReLU", Kind::LeakyReLU}, {"PReLU", Kind::PReLU},   {"Sigmoid", Kind::Sigmoid},
        {"SiLU", Kind::SiLU},       {"Hardswish", Kind::Hardswish}, {"Softsign", Kind::Softsign}};
    bool found = false;
    for (const auto& [name, kind] : kinds)
      if (a.type == name) f.kind = kind, found = true;
    if (!found) throw std::invalid_argument("activation '" + a.type + "' has no kernel");
    if (f.kind == Kind::PReLU) {
      slopes.assign(a.params.begin(), a.params.end());
    } else if (f.kind == Kind::Hardtanh) {
      f.p[0] = -1.0f, f.p[1] = 1.0f;
    } else {
      for (size_t i = 0; i < a.params.size() && i < 4; ++i) f.p[i] = static_cast<float>(a.params[i]);
    }
  }
  void apply(float* x, int64_t stride, int64_t rows, int64_t n) const {
    if (stride == n && slopes.empty()) return dsp::apply(f, x, rows * n);  // contiguous rows: one call
    for (int64_t r = 0; r < rows; ++r) {
      dsp::Elementwise g = f;
      if (!slopes.empty()) g.p[0] = slopes[slopes.size() == 1 ? 0 : static_cast<size_t>(r)];
      dsp::apply(g, x + r * stride, n);
    }
  }
};

}  // namespace wavetrain::experiments::amp
