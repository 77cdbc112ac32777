// The part of the run reports (amp/report.h, asr/asr_report.h) that needs ATen: audio as a data URL
// for an <audio> element, so that a report plays its examples with nothing to fetch. Text helpers,
// plots and metrics.csv reading are trainer/plot's (wavetrain::plot).
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace wavetrain::experiments::report_html {

std::string base64(const std::string& bytes);
// Mono float samples as a 16-bit PCM WAV file in a data URL (for an <audio> element).
std::string wav_data_url(const at::Tensor& samples, int sample_rate);

}  // namespace wavetrain::experiments::report_html
