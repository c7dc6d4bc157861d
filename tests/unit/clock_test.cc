#include "base/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
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

// The monotonic clock in nanoseconds is the same clock as NowSeconds.
TEST(ClockTest, NowNanosReadsTheSteadyClock) {
  const double before = SteadySeconds();
  const int64_t ns = NowNanos();
  const double after = SteadySeconds();
  EXPECT_LE(before - 1e-6, ns * 1e-9);
  EXPECT_LE(ns * 1e-9, after + 1e-6);
  EXPECT_LE(ns, NowNanos());
}

// The wall clock: the Unix time std::time and system_clock give, whole and
// with its fraction. The wall clock may step between readings (NTP), so the
// readings only have to agree to within a few seconds: a clock of another
// epoch (a steady clock) is off by years.
TEST(ClockTest, NowUnixSecondsReadsTheWallClock) {
  const int64_t now = NowUnixSeconds();
  const int64_t wall = static_cast<int64_t>(std::time(nullptr));
  EXPECT_LE(std::llabs(now - wall), 5) << now << " vs " << wall;
  const double precise = NowUnixSecondsPrecise();
  const double wall_precise =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(std::fabs(precise - wall_precise), 5.0) << precise << " vs " << wall_precise;
}

}  // namespace
}  // namespace tune
