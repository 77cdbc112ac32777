// TensorBoard event files, read back by a reader written here from the TFRecord and protobuf
// specs. It shares no code with the writer: its own bit-by-bit CRC-32C, its own varint decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "trainer/tensorboard.h"

namespace fs = std::filesystem;

namespace {

uint32_t crc32c_bitwise(const std::string& s) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(const std::string& s) {
  const uint32_t c = crc32c_bitwise(s);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

template <class T>
T little(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::string tag;
  float value = NAN;
};

uint64_t varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; at < s.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(s[at++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("truncated varint");
}

// Calls on_field(field, wire_type, payload-or-value) for each field of a message.
template <class F>
void fields(const std::string& m, F on_field) {
  size_t at = 0;
  while (at < m.size()) {
    const uint64_t key = varint(m, at);
    const int field = static_cast<int>(key >> 3), type = static_cast<int>(key & 7);
    if (type == 0) on_field(field, type, std::string(), varint(m, at));
    else if (type == 1) { on_field(field, type, m.substr(at, 8), 0); at += 8; }
    else if (type == 5) { on_field(field, type, m.substr(at, 4), 0); at += 4; }
    else if (type == 2) { const size_t n = varint(m, at); on_field(field, type, m.substr(at, n), 0); at += n; }
    else throw std::runtime_error("unexpected wire type");
  }
}

std::vector<Event> read_events(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Event> events;
  size_t at = 0;
  while (at < data.size()) {
    if (data.size() - at < 12) throw std::runtime_error("truncated record header");
    const std::string len_bytes = data.substr(at, 8);
    if (little<uint32_t>(data, at + 8) != masked(len_bytes)) throw std::runtime_error("length CRC mismatch");
    const uint64_t n = little<uint64_t>(data, at);
    if (data.size() - at - 12 < n + 4) throw std::runtime_error("truncated record");
    const std::string payload = data.substr(at + 12, n);
    if (little<uint32_t>(data, at + 12 + n) != masked(payload)) throw std::runtime_error("data CRC mismatch");
    at += 12 + n + 4;
    Event e;
    fields(payload, [&](int f, int, const std::string& bytes, uint64_t v) {
      if (f == 1) e.wall_time = little<double>(bytes, 0);
      if (f == 2) e.step = static_cast<int64_t>(v);
      if (f == 3) e.file_version = bytes;
      if (f == 5)
        fields(bytes, [&](int sf, int, const std::string& value_msg, uint64_t) {
          if (sf != 1) return;
          fields(value_msg, [&](int vf, int, const std::string& b, uint64_t) {
            if (vf == 1) e.tag = b;
            if (vf == 2) e.value = little<float>(b, 0);
          });
        });
    });
    events.push_back(e);
  }
  return events;
}

TEST(TensorBoard, TheTestReadersCrcIsCrc32c) { EXPECT_EQ(crc32c_bitwise("123456789"), 0xE3069283u); }

TEST(TensorBoard, ScalarsReadBackWithTheirTagsStepsAndTimes) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_tb_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::path file;
  {
    wavetrain::TensorBoardWriter tb(dir / "tb");
    file = tb.path();
    tb.add_scalar("train/loss", 0.5, 1, 1000.25);
    tb.add_scalar("train/loss", 0.25, 2, 1001.5);
    tb.add_scalar("val/esr", 0.0123, 300, 1002.0);
    tb.add_scalar("lr", 4e-3, 1LL << 40, 1003.0);
  }
  EXPECT_EQ(file.filename().string().rfind("events.out.tfevents.", 0), 0u);
  const std::vector<Event> events = read_events(file);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.7e9);
  EXPECT_EQ(events[1].tag, "train/loss");
  EXPECT_EQ(events[1].step, 1);
  EXPECT_EQ(events[1].value, 0.5f);
  EXPECT_EQ(events[1].wall_time, 1000.25);
  EXPECT_EQ(events[2].value, 0.25f);
  EXPECT_EQ(events[3].tag, "val/esr");
  EXPECT_EQ(events[3].step, 300);
  EXPECT_EQ(events[3].value, 0.0123f);
  EXPECT_EQ(events[4].step, 1LL << 40);
  EXPECT_EQ(events[4].value, 4e-3f);
}

TEST(TensorBoard, AFlippedByteFailsTheCrc) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_tb_crc_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::path file;
  {
    wavetrain::TensorBoardWriter tb(dir);
    file = tb.path();
    tb.add_scalar("x", 1.0, 1, 5.0);
  }
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-6, std::ios::end);  // inside the last record's payload
  f.put('\x7f');
  f.close();
  EXPECT_THROW(read_events(file), std::runtime_error);
}

}  // namespace
