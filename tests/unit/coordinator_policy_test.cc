// The coordinator's policies that need no socket.
#include <gtest/gtest.h>

#include "coordinator.h"

namespace tune {
namespace {

TEST(NoWorkRetry, SmallFarmsAskAgainSoonAndIdlePollingStaysBoundedAsTheFarmGrows) {
  EXPECT_EQ(NoWorkRetryMs(0), 20u);
  EXPECT_EQ(NoWorkRetryMs(1), 20u);
  EXPECT_EQ(NoWorkRetryMs(100), 20u);
  EXPECT_EQ(NoWorkRetryMs(500), 100u);
  EXPECT_EQ(NoWorkRetryMs(1000), 200u);
  EXPECT_EQ(NoWorkRetryMs(5000), 1000u);
  EXPECT_EQ(NoWorkRetryMs(100000), 1000u);
  // Idle requests per second over the farm: 1000 / retry per worker.
  for (size_t workers : {1u, 10u, 250u, 1000u, 5000u}) {
    EXPECT_LE(1000.0 * double(workers) / NoWorkRetryMs(workers), 5000.0 + 1e-9) << workers << " workers";
  }
}

}  // namespace
}  // namespace tune
