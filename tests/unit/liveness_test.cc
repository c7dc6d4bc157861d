// Majordomo's heartbeating as a value (wire/liveness.h): when a peer is gone,
// when a heartbeat is due, and the reconnect backoff, driven by a test's
// clock.
#include <gtest/gtest.h>

#include <vector>

#include "wire/liveness.h"

namespace tune {
namespace {

TEST(Liveness, APeerIsGoneAfterItsLivenessInHeartbeats) {
  Liveness l;
  l.SetTerms(0.5, 4);  // gone after 2 s of silence
  l.Heard(100.0);
  EXPECT_FALSE(l.Gone(101.9));
  EXPECT_FALSE(l.Gone(102.0));  // exactly the limit: still alive
  EXPECT_TRUE(l.Gone(102.01));
  EXPECT_DOUBLE_EQ(l.SilentFor(103.0), 3.0);
  l.Heard(102.5);  // anything heard counts
  EXPECT_FALSE(l.Gone(103.0));
  // The same rule for a side that keeps its own times.
  EXPECT_TRUE(Liveness::Gone(0.0, 5.01, 1.0, 5));
  EXPECT_FALSE(Liveness::Gone(0.0, 5.0, 1.0, 5));
}

TEST(Liveness, AHeartbeatIsDueAfterAnIntervalWithNothingSent) {
  Liveness l;
  l.SetTerms(1.0, 5);
  l.Sent(10.0);
  EXPECT_FALSE(l.HeartbeatDue(10.99));
  EXPECT_TRUE(l.HeartbeatDue(11.0));
  l.Sent(11.0);  // any frame resets it, not only heartbeats
  EXPECT_FALSE(l.HeartbeatDue(11.5));
  EXPECT_TRUE(Liveness::HeartbeatDue(0.0, 2.0, 2.0));
}

TEST(Liveness, TheBackoffDoublesToItsCapAndStartsAgainOnceGreeted) {
  Liveness l;
  const double first = Liveness::kFirstBackoffSeconds;
  double now = 0;
  std::vector<double> waits;
  for (int i = 0; i < 8; ++i) {
    const double wait = l.Dropped(now);
    waits.push_back(wait);
    EXPECT_FALSE(l.ReconnectDue(now + wait / 2));
    EXPECT_TRUE(l.ReconnectDue(now + wait));
    now += wait;
  }
  EXPECT_EQ(waits, (std::vector<double>{first, 2 * first, 4 * first, 8 * first, 16 * first, 32 * first,
                                        Liveness::kMaxBackoffSeconds, Liveness::kMaxBackoffSeconds}));
  l.Greeted();
  EXPECT_EQ(l.Dropped(now), first);
  // A peer that asks for a new hello gets it at once, whatever the backoff.
  l.ReconnectAt(now);
  EXPECT_TRUE(l.ReconnectDue(now));
}

}  // namespace
}  // namespace tune
