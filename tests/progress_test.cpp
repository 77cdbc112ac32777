// The progress line: exact text for a known state, in both forms, and when lines are printed.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "trainer/progress.h"

#include <algorithm>

namespace wavetrain {
namespace {

long count_of(const std::ostringstream& out, char c) {
  const std::string text = out.str();
  return std::count(text.begin(), text.end(), c);
}

ProgressState state() {
  ProgressState s;
  s.epoch = 2;
  s.max_epochs = 10;
  s.step = 120;
  s.total_steps = 400;
  s.steps_this_session = 120;
  s.elapsed_s = 10.0;  // 12 it/s -> 280 steps left take 23.3 s
  s.loss = 0.012345;
  s.samples_this_session = 120 * 16 * 8;  // 1536 samples/s
  return s;
}

TEST(Progress, BarAndPlainForms) {
  EXPECT_EQ(format_progress(state(), 10), "epoch 3/10 [===>      ] 120/400 12.0 it/s ETA 0:00:23 loss 0.01235 1.5k samples/s");
  EXPECT_EQ(format_progress(state(), 0), "epoch 3/10 step 120/400 12.0 it/s ETA 0:00:23 loss 0.01235 1.5k samples/s");
  ProgressState open = state();
  open.total_steps = -1;
  open.max_epochs = -1;
  open.loss = NAN;
  EXPECT_EQ(format_progress(open, 10), "epoch 3 step 120 12.0 it/s loss nan 1.5k samples/s");
  EXPECT_EQ(format_duration(3723.4), "1:02:03");
  EXPECT_EQ(format_duration(-5), "0:00:00");
}

TEST(Progress, PlainLinesComeEveryIntervalAndTheTerminalRedrawsInPlace) {
  std::ostringstream plain;
  ProgressReporter p(plain, /*terminal=*/false, 30.0);
  ProgressState s = state();
  for (double t : {0.0, 10.0, 29.0, 31.0, 45.0, 62.0}) {
    s.elapsed_s = t > 0 ? t : 1.0;
    p.update(s);
  }
  EXPECT_EQ(count_of(plain, '\n'), 3);  // at 1, 31, 62 s
  EXPECT_EQ(plain.str().find('\r'), std::string::npos);
  p.update(s, /*force=*/true);
  EXPECT_EQ(count_of(plain, '\n'), 4);

  std::ostringstream tty;
  ProgressReporter bar(tty, /*terminal=*/true);
  s.elapsed_s = 1.0;
  bar.update(s);
  s.elapsed_s = 1.05;  // within 0.1 s: not redrawn
  bar.update(s);
  s.elapsed_s = 1.2;
  bar.update(s);
  bar.finish();
  EXPECT_EQ(count_of(tty, '\r'), 2);
  EXPECT_EQ(tty.str().back(), '\n');
}

}  // namespace
}  // namespace wavetrain
