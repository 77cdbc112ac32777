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
  s.units_this_session = 120 * 16 * 8;  // 1536 items/s
  return s;
}

TEST(Progress, BarAndPlainForms) {
  EXPECT_EQ(format_progress(state(), 10), "epoch 3/10 [===>      ] 120/400 12.0 it/s ETA 0:00:23 loss 0.01235 1.5k items/s");
  EXPECT_EQ(format_progress(state(), 0), "epoch 3/10 step 120/400 12.0 it/s ETA 0:00:23 loss 0.01235 1.5k items/s");
  ProgressState open = state();
  open.total_steps = -1;
  open.max_epochs = -1;
  open.loss = NAN;
  EXPECT_EQ(format_progress(open, 10), "epoch 3 step 120 12.0 it/s loss nan 1.5k items/s");
  EXPECT_EQ(format_duration(3723.4), "1:02:03");
  EXPECT_EQ(format_duration(-5), "0:00:00");
}

TEST(Progress, RatesAreThisSessionsAfterAResume) {
  // Resumed at step 100: 20 steps in this session's 10 s are 2 it/s, and the 280 steps left 140 s.
  ProgressState s = state();
  s.steps_this_session = 20;
  s.units_this_session = 20 * 16;
  EXPECT_EQ(format_progress(s, 0), "epoch 3/10 step 120/400 2.00 it/s ETA 0:02:20 loss 0.01235 32.0 items/s");
}

TEST(Progress, TheEtaIsCappedByTheTimeLeftUnderMaxTime) {
  ProgressState s = state();  // 23 s left by the steps
  s.time_left_s = 9.6;
  EXPECT_EQ(format_progress(s, 0), "epoch 3/10 step 120/400 12.0 it/s ETA 0:00:10 (max_time) loss 0.01235 1.5k items/s");
  s.time_left_s = 60;  // the steps end first
  EXPECT_EQ(format_progress(s, 0), "epoch 3/10 step 120/400 12.0 it/s ETA 0:00:23 loss 0.01235 1.5k items/s");
  s.total_steps = -1;  // no step count to go by: the time limit alone
  s.max_epochs = -1;
  EXPECT_EQ(format_progress(s, 0), "epoch 3 step 120 12.0 it/s ETA 0:01:00 (max_time) loss 0.01235 1.5k items/s");
}

TEST(Progress, ThroughputInTheTasksUnit) {
  ProgressState s = state();
  s.unit = "s audio";
  s.units_this_session = 523.4;  // over 10 s
  EXPECT_NE(format_progress(s, 0).find(" loss 0.01235 52.3 s audio/s"), std::string::npos) << format_progress(s, 0);
  s.units_this_session = 4.56;
  EXPECT_NE(format_progress(s, 0).find(" 0.46 s audio/s"), std::string::npos) << format_progress(s, 0);
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
