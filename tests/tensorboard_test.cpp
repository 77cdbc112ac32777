// TensorBoard event files, read back by TensorBoard's own reader (EventAccumulator, through
// tests/python/tensorboard_scalars.py in the project's .venv): every scalar with its tag, step and
// wall time, a run's worth of points beyond TensorBoard's default sampling, and a damaged file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/run_process.h"
#include "trainer/tensorboard.h"

namespace fs = std::filesystem;

namespace {

struct Point {
  std::string tag;
  int64_t step = 0;
  double wall_time = 0;
  double value = 0;
};

fs::path fresh_tb(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_tb_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

// What TensorBoard reads from `path`: the file version, then tag, step, wall time and value of every
// scalar, sorted by tag and step.
struct Read {
  int exit_code = -1;
  std::string error;
  std::string file_version;
  std::vector<Point> points;
};

Read read_with_tensorboard(const fs::path& path) {
  const wavetrain::testing::ProcessResult r = wavetrain::testing::client_run("tensorboard_scalars.py '" + path.string() + "'");
  Read out;
  out.exit_code = r.exit_code;
  out.error = r.err;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string first;
    std::getline(fields, first, '\t');
    if (first == "file_version") {
      std::getline(fields, out.file_version);
      continue;
    }
    Point p;
    p.tag = first;
    std::string step, wall, value;
    std::getline(fields, step, '\t');
    std::getline(fields, wall, '\t');
    std::getline(fields, value, '\t');
    p.step = std::stoll(step);
    p.wall_time = std::stod(wall);
    p.value = std::stod(value);
    out.points.push_back(p);
  }
  return out;
}

#define REQUIRE_TENSORBOARD()                                                                 \
  WAVETRAIN_REQUIRE_CLIENT(wavetrain::testing::client_importable("tensorboard.backend.event_processing"), \
                           "tensorboard is not in " WAVETRAIN_CLIENT_PYTHON)

TEST(TensorBoard, ItsOwnReaderGetsEveryScalarStepAndTime) {
  REQUIRE_TENSORBOARD();
  const fs::path dir = fresh_tb("scalars");
  fs::path file;
  {
    wavetrain::TensorBoardWriter tb(dir / "tb");
    file = tb.path();
    tb.add_scalar("train/loss", 0.5, 1, 1000.25);
    tb.add_scalar("train/loss", 0.25, 2, 1001.5);
    tb.add_scalar("val/esr", 0.0123, 300, 1002.0);
    tb.add_scalar("lr", 4e-3, 1LL << 40, 1003.0);
    tb.add_scalar("val/neg", -7.5e-9, 0, 1700000000.125);
  }
  EXPECT_EQ(file.filename().string().rfind("events.out.tfevents.", 0), 0u);
  const Read r = read_with_tensorboard(file);
  ASSERT_EQ(r.exit_code, 0) << r.error;
  EXPECT_EQ(r.file_version, "2");  // "brain.Event:2", as TensorBoard parses it
  const std::vector<std::tuple<std::string, int64_t, double, float>> expected = {
      {"lr", 1LL << 40, 1003.0, 4e-3f},          {"train/loss", 1, 1000.25, 0.5f},
      {"train/loss", 2, 1001.5, 0.25f},          {"val/esr", 300, 1002.0, 0.0123f},
      {"val/neg", 0, 1700000000.125, -7.5e-9f},
  };
  ASSERT_EQ(r.points.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [tag, step, wall, value] = expected[i];
    EXPECT_EQ(r.points[i].tag, tag) << i;
    EXPECT_EQ(r.points[i].step, step) << i;
    EXPECT_NEAR(r.points[i].wall_time, wall, 1e-6) << i;
    EXPECT_EQ(static_cast<float>(r.points[i].value), value) << i;  // stored as float32
  }
}

// A long run: more points per tag than TensorBoard keeps by default (10,000), written through
// flushes, all read back in order with their values.
TEST(TensorBoard, ALongRunReadsBackWhole) {
  REQUIRE_TENSORBOARD();
  const fs::path dir = fresh_tb("long");
  const int n = 12000;
  {
    wavetrain::TensorBoardWriter tb(dir);
    for (int step = 1; step <= n; ++step) {
      tb.add_scalar("train/loss", 1.0 / step, step, 1000.0 + step * 0.5);
      if (step % 100 == 0) tb.add_scalar("val/esr", std::exp(-step / 3000.0), step, 1000.0 + step * 0.5 + 0.25);
      if (step % 997 == 0) tb.flush();
    }
  }
  const Read r = read_with_tensorboard(dir);
  ASSERT_EQ(r.exit_code, 0) << r.error;
  ASSERT_EQ(r.points.size(), static_cast<size_t>(n + n / 100));
  int loss = 0, esr = 0;
  for (const Point& p : r.points) {
    if (p.tag == "train/loss") {
      ++loss;
      EXPECT_EQ(p.step, loss);
      EXPECT_EQ(static_cast<float>(p.value), static_cast<float>(1.0 / loss));
      EXPECT_NEAR(p.wall_time, 1000.0 + loss * 0.5, 1e-6);
    } else {
      ASSERT_EQ(p.tag, "val/esr");
      ++esr;
      EXPECT_EQ(p.step, esr * 100);
    }
  }
  EXPECT_EQ(loss, n);
  EXPECT_EQ(esr, n / 100);
}

// TensorBoard checks each record's CRC: a flipped byte in our file is reported, not read as data.
TEST(TensorBoard, ItsOwnReaderRejectsAFlippedByte) {
  REQUIRE_TENSORBOARD();
  const fs::path dir = fresh_tb("crc");
  fs::path file;
  {
    wavetrain::TensorBoardWriter tb(dir);
    file = tb.path();
    tb.add_scalar("x", 1.0, 1, 5.0);
    tb.add_scalar("x", 2.0, 2, 6.0);
  }
  ASSERT_EQ(read_with_tensorboard(file).points.size(), 2u);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-6, std::ios::end);  // inside the last record's payload
  f.put('\x7f');
  f.close();
  const Read r = read_with_tensorboard(file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.error.find("crc"), std::string::npos) << r.error;
}

TEST(TensorBoard, MaskedCrcIsCrc32cOfTheSpec) {
  // CRC-32C of "123456789" is 0xE3069283 (its check value); masked as TFRecord masks it.
  const uint32_t crc = 0xE3069283u;
  EXPECT_EQ(wavetrain::masked_crc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

}  // namespace
