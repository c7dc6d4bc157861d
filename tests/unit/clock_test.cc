#include "base/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tune {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Deadlines computed with NowSeconds() are compared with durations in
// seconds and with readings other code takes of the steady clock.
TEST(ClockTest, ReadsTheSteadyClockInSeconds) {
  const double before = SteadySeconds();
  const double now = NowSeconds();
  const double after = SteadySeconds();
  EXPECT_LE(before, now);
  EXPECT_LE(now, after);
}

TEST(ClockTest, AdvancesWithTimeAndNeverBack) {
  const double t0 = NowSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double t1 = NowSeconds();
  EXPECT_GE(t1 - t0, 0.05);
  EXPECT_LT(t1 - t0, 5.0);
  double last = t1;
  for (int i = 0; i < 1000; ++i) {
    const double t = NowSeconds();
    ASSERT_GE(t, last);
    last = t;
  }
}

}  // namespace
}  // namespace tune
