// TensorBoard event files without TensorFlow or protobuf: scalar summaries written as TFRecords.
//
//   DIR/events.out.tfevents.<unix time>.<host>.<pid>.<n>
//   record := uint64 length | uint32 masked_crc32c(length) | Event bytes | uint32 masked_crc32c(bytes)
//   masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8      (all little-endian)
//
// The Event messages are hand-encoded protobuf (tensorflow/core/util/event.proto):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2", which TensorBoard expects.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace wavetrain {

class TensorBoardWriter {
 public:
  // Creates the directory if needed and a new event file in it. Throws std::runtime_error.
  explicit TensorBoardWriter(const std::filesystem::path& dir);

  // One scalar point; wall_time defaults to now (seconds since the epoch).
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = -1);
  void flush();
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& event);

  std::filesystem::path path_;
  std::ofstream out_;
};

// The CRC TFRecord framing stores: CRC-32C rotated and offset, so that a CRC of data that itself
// holds CRCs does not degenerate.
uint32_t masked_crc32c(const std::string& bytes);

}  // namespace wavetrain
