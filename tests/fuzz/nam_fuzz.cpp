// libFuzzer target for .nam model files (experiments/amp read_nam): any bytes must give a model or
// an error that names the file; never a crash, another exception, a leak, undefined behaviour or a
// hang, and never an allocation beyond the file's limits. A model that loads runs over a short
// signal (exact and stream mode must agree) and is written back and read again.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include <torch/csrc/autograd/grad_mode.h>

#include "experiments/amp/amp_model.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace amp = wavetrain::experiments::amp;
  const wavetrain::fuzz::InputFile file(data, size, ".nam");
  amp::AmpModel m;
  try {
    m = amp::read_nam(file.path());
  } catch (const std::runtime_error& e) {
    wavetrain::fuzz::require_named(e, file.path());
    return 0;
  }
  // Run small models only: the limits allow models that take seconds per sample.
  if (m.parameters() > 20000 || m.receptive_field() > 8192) return 0;
  const at::Tensor x = at::sin(at::arange(300, at::kFloat) * 0.05) * 0.5;
  amp::ProcessOptions exact;
  exact.chunk = 128;
  const at::Tensor a = amp::process(m, x, exact);
  amp::ProcessOptions stream = exact;
  stream.mode = "stream";
  stream.chunk = 64;
  const at::Tensor b = amp::process(m, x, stream);
  if (a.numel() != 300 || b.numel() != 300) std::abort();
  const double scale = 1 + a.abs().max().item<double>();
  if (std::isfinite(scale) && (a - b).abs().max().item<double>() > 1e-3 * scale) std::abort();
  const wavetrain::fuzz::InputFile again(nullptr, 0, ".again.nam");
  amp::write_nam(again.path(), m);
  const amp::AmpModel back = amp::read_nam(again.path());
  if (back.parameters() != m.parameters()) std::abort();
  return 0;
}
