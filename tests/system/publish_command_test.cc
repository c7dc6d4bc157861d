// `tunefarm publish --sweep`: a bundle of the keys one sweep measured, each
// with its winner over every row of the key; a prefix no row's sweep has,
// or one two sweeps share, is one line.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "store/result_store.h"
#include "support/temp_dir.h"
#include "support/tunefarm_command.h"

namespace tune {
namespace {

using tune::testing::CommandRun;
using tune::testing::TempDir;
using tune::testing::Tunefarm;

const std::string kOps = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops";

TEST(PublishCommand, SweepKeepsTheKeysThatSweepMeasured) {
  TempDir dir;
  const std::string store = dir.path() + "/db";
  for (const char* shape : {"N=1048576", "N=4096"}) {
    const CommandRun tuned = Tunefarm(dir, {"tune", "--backend", "sim", "--ops-dir", kOps, "--op", "synthetic",
                                            "--dtype", "f32", "--shape", shape, "--store", store, "--quiet",
                                            "--unsigned", "--bundle", dir.path() + "/tuned"});
    ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  }
  std::string second;  // the sweep of N=4096
  std::set<std::string> sweeps;
  {
    auto db = ResultStore::OpenReadOnly(store);
    ASSERT_TRUE(db.ok()) << db.status().message();
    ASSERT_TRUE((*db)->Scan(ResultFilter{}, [&](const Measurement& m) {
                       sweeps.insert(m.sweep_id);
                       if (m.shape == "N=4096") second = m.sweep_id;
                       return true;
                     }).ok());
  }
  ASSERT_EQ(sweeps.size(), 2u);
  ASSERT_GT(second.size(), 4u);
  auto publish = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"publish", "--store", store, "--out", dir.path() + "/b", "--unsigned"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Tunefarm(dir, args);
  };
  const CommandRun all = publish({});
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_EQ(ReadBundleFile(dir.path() + "/b.tfb")->entries.size(), 2u);
  const CommandRun one = publish({"--sweep", second.substr(0, second.size() - 2)});
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto bundle = ReadBundleFile(dir.path() + "/b.tfb");
  ASSERT_TRUE(bundle.ok());
  ASSERT_EQ(bundle->entries.size(), 1u);
  EXPECT_EQ(bundle->entries[0].shape.Canonical(), "N=4096");
  EXPECT_NE(one.output.find("publish: 1 key(s) of sweep " + second), std::string::npos) << one.output;
  const CommandRun none = publish({"--sweep", "zz"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.output.find("--sweep zz: no row of the store is of such a sweep"), std::string::npos) << none.output;
  // Both sweeps' ids share their first characters (a time stamp): too short a prefix names them.
  std::string shared;
  for (size_t i = 0; i < second.size() && sweeps.begin()->compare(0, i + 1, *sweeps.rbegin(), 0, i + 1) == 0; ++i)
    shared = second.substr(0, i + 1);
  if (!shared.empty()) {
    const CommandRun both = publish({"--sweep", shared});
    EXPECT_EQ(both.exit_code, 1);
    EXPECT_NE(both.output.find("a prefix of 2 sweeps' ids"), std::string::npos) << both.output;
  }
}

}  // namespace
}  // namespace tune
