// Audio as a data URL for the run reports (report_html.h).
#include "experiments/common/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace wavetrain::experiments::report_html {

std::string base64(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t a = static_cast<unsigned char>(bytes[i]), b = i + 1 < bytes.size() ? static_cast<unsigned char>(bytes[i + 1]) : 0,
                   c = i + 2 < bytes.size() ? static_cast<unsigned char>(bytes[i + 2]) : 0, v = a << 16 | b << 8 | c;
    out += table[v >> 18 & 63];
    out += table[v >> 12 & 63];
    out += i + 1 < bytes.size() ? table[v >> 6 & 63] : '=';
    out += i + 2 < bytes.size() ? table[v & 63] : '=';
  }
  return out;
}

std::string wav_data_url(const at::Tensor& samples, int sample_rate) {
  const at::Tensor x = samples.to(at::kFloat).contiguous().view({-1});
  const uint32_t n = static_cast<uint32_t>(x.numel()), data_bytes = 2 * n;
  std::string wav;
  auto put = [&](uint32_t v, int size) {
    for (int k = 0; k < size; ++k) wav += static_cast<char>(v >> (8 * k) & 0xff);
  };
  wav += "RIFF";
  put(36 + data_bytes, 4);
  wav += "WAVEfmt ";
  put(16, 4), put(1, 2), put(1, 2), put(static_cast<uint32_t>(sample_rate), 4), put(static_cast<uint32_t>(sample_rate) * 2, 4), put(2, 2),
      put(16, 2);
  wav += "data";
  put(data_bytes, 4);
  const float* s = x.data_ptr<float>();
  for (uint32_t i = 0; i < n; ++i) {
    const long q = std::lround(std::clamp(static_cast<double>(s[i]), -1.0, 1.0) * 32767.0);
    put(static_cast<uint32_t>(static_cast<int16_t>(q)) & 0xffff, 2);
  }
  return "data:audio/wav;base64," + base64(wav);
}

}  // namespace wavetrain::experiments::report_html
