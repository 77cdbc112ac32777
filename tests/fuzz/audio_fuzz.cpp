// libFuzzer target for audio files (data/audio_io): any bytes as a file must give audio or an
// AudioError that names the file; never a crash, another exception, a leak, undefined behaviour or
// a hang. What is read is also resampled (the path `infer` and the loaders take), with the output
// length checked. Build and run: docs/fuzzing.md.
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "data/audio_io.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wavetrain::data;
  const wavetrain::fuzz::InputFile file(data, size, ".wav");
  try {
    ReadOptions o;
    o.sample_rate = 16000;
    const Audio a = read_audio(file.path(), o);
    if (a.sample_rate != 16000 || a.samples.dim() != 2 || a.samples.scalar_type() != at::kFloat) std::abort();
    const Audio original = read_audio(file.path());
    const int64_t expected = std::llround(static_cast<double>(original.samples.size(1)) * 16000.0 / original.sample_rate);
    if (a.samples.size(1) != expected || a.samples.size(0) != original.samples.size(0)) std::abort();
  } catch (const AudioError& e) {
    wavetrain::fuzz::require_named(e, file.path());
  }
  return 0;
}
