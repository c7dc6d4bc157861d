#include "base/known_gpus.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "measure/backend.h"
#include "report/compare.h"

namespace tune {
namespace {

TEST(KnownGpusTest, ModelsAreUniqueAndFound) {
  std::set<std::string> seen;
  for (const DeviceInfo& d : KnownGpus()) {
    EXPECT_TRUE(seen.insert(d.model).second) << d.model;
    EXPECT_EQ(FindKnownGpu(d.model), &d) << d.model;
  }
  EXPECT_EQ(FindKnownGpu("no-such-gpu"), nullptr);
}

// The sim backend dereferences FindKnownGpu(known) for every model it makes.
TEST(SimGpusTest, EveryModelStandsOnAKnownGpu) {
  ASSERT_FALSE(SimGpus().empty());
  for (const SimGpu& g : SimGpus()) {
    EXPECT_NE(FindKnownGpu(g.known), nullptr) << g.model;
    EXPECT_GT(g.tflops, 0) << g.model;
    EXPECT_GT(g.gbps, 0) << g.model;
  }
  EXPECT_NE(FindKnownGpu(FindSimGpu("mystery").known), nullptr);
}

TEST(SimGpusTest, UnknownNamesRunAsTheGenericGpu) {
  for (const SimGpu& g : SimGpus()) EXPECT_EQ(&FindSimGpu(g.model), &g) << g.model;
  const SimGpu& generic = FindSimGpu("mystery");
  EXPECT_STREQ(generic.model, "generic");
  EXPECT_EQ(&FindSimGpu(""), &generic);
  EXPECT_EQ(&FindSimGpu("sim-h100"), &generic);  // the key comes without its prefix
}

// The device the sim backend simulates and the peak a report sets its
// figures against come from the same entry.
TEST(SimGpusTest, BackendAndReportReadTheSameTable) {
  std::vector<SimGpu> all = SimGpus();
  all.push_back(FindSimGpu("mystery"));
  for (const SimGpu& g : all) {
    const std::string model = std::string("sim-") + (g.model == std::string("generic") ? "mystery" : g.model);
    auto backend = MakeSimBackend(model, 0, SimFaults{});
    ASSERT_TRUE(backend) << model;
    const DeviceInfo& d = backend->device();
    EXPECT_EQ(d.model, model);
    EXPECT_EQ(d.name, g.name) << model;
    EXPECT_EQ(d.num_sms, FindKnownGpu(g.known)->num_sms) << model;
    EXPECT_EQ(d.smem_per_block_optin, FindKnownGpu(g.known)->smem_per_block_optin) << model;
    auto peak = PeakFiguresFor(model);
    ASSERT_TRUE(peak) << model;
    EXPECT_TRUE(peak->simulated) << model;
    EXPECT_EQ(peak->tflops, g.tflops) << model;
    EXPECT_EQ(peak->gbps, g.gbps) << model;
  }
}

}  // namespace
}  // namespace tune
