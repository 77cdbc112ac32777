// The evaluation report of an amp run: report.html (self-contained: inline SVG plots, no network)
// and report.md, written into the run directory by `wavetrain eval RUN_DIR`.
//
// Contents: validation ESR with the NAM trainer's verdict (below 0.01 "Great!", 0.035 "Not bad!",
// 0.1 "This might sound ok", 0.3 "This probably won't sound great", else "Something seems to have
// gone wrong"), the multi-resolution STFT loss, the prediction against the target over the loudest
// 30 ms of the validation audio, spectrograms of both, the training curves from metrics.csv, the
// resolved config and the device and precision the run used.
#pragma once

#include <string>
#include <utility>

#include "trainer/config/config.h"

namespace wavetrain::experiments::amp {

// The verdict the NAM trainer prints for a validation ESR.
std::string esr_verdict(double esr);

// Writes RUN_DIR/report.html and RUN_DIR/report.md for the model in `checkpoint` (a checkpoint of
// the run whose composed config is `cfg`); returns their paths.
std::pair<std::string, std::string> write_amp_report(const std::string& run_dir, const std::string& checkpoint,
                                                     const config::Config& cfg);

}  // namespace wavetrain::experiments::amp
