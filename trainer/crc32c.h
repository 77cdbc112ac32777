// CRC-32C (Castagnoli), the checksum of wavetrain checkpoints (and of TensorBoard's TFRecord
// framing). Reference value: crc32c("123456789") = 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace wavetrain {

// Continues `crc` (0 to start) over `size` bytes.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view s, uint32_t crc = 0) { return crc32c(s.data(), s.size(), crc); }

}  // namespace wavetrain
