// TensorBoard event files; the format is described in tensorboard.h.
#include "trainer/tensorboard.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "trainer/crc32c.h"

namespace wavetrain {
namespace {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

template <class T>
void put_little_endian(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // x86-64 and arm64 are little-endian, like the format
  out.append(bytes, sizeof(T));
}

// Protobuf wire types: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit.
void put_tag(std::string& out, int field, int wire_type) { put_varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_tag(e, 1, 1);
  put_little_endian(e, wall_time);
  put_tag(e, 2, 0);
  put_varint(e, static_cast<uint64_t>(step));  // int64: negative steps take 10 bytes, as protobuf does
  return e;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::atomic<int> g_file_counter{0};

}  // namespace

uint32_t masked_crc32c(const std::string& bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("Cannot create TensorBoard directory '" + dir.string() + "': " + ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const double now = now_seconds();
  path_ = dir / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host + "." +
                 std::to_string(getpid()) + "." + std::to_string(g_file_counter++));
  out_.open(path_, std::ios::binary);
  if (!out_) throw std::runtime_error("Cannot create TensorBoard event file '" + path_.string() + "'");
  std::string first = event_header(now, 0);
  put_bytes(first, 3, "brain.Event:2");
  write_record(first);
  flush();
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_tag(summary_value, 2, 5);
  put_little_endian(summary_value, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_header(wall_time < 0 ? now_seconds() : wall_time, step);
  put_bytes(event, 5, summary);
  write_record(event);
}

void TensorBoardWriter::write_record(const std::string& event) {
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(event.size()));
  std::string record = length;
  put_little_endian(record, masked_crc32c(length));
  record += event;
  put_little_endian(record, masked_crc32c(event));
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  if (!out_) throw std::runtime_error("Cannot write to TensorBoard event file '" + path_.string() + "'");
}

void TensorBoardWriter::flush() { out_.flush(); }

}  // namespace wavetrain
