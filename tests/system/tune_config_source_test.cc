// `tunefarm tune` on the sim backend, as to what it measures of an op: a
// searched key measures the op's default beside what it searches (so the
// bundle and the table show what tuning bought), and a config list
// (--config, [sweep] configs) is measured exactly, with a bad config
// refused in one line naming the flag or file and its index.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "store/result_store.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/tunefarm_command.h"

namespace tune {
namespace {

using tune::testing::Child;
using tune::testing::ReadFile;
using tune::testing::TempDir;

using tune::testing::CommandRun;
using tune::testing::Tunefarm;

// The synthetic op (600 legal configs) on two shapes of one simulated GPU.
std::vector<std::string> Tune(const TempDir& dir, const std::string& name, std::vector<std::string> more) {
  std::vector<std::string> args = {"tune",     "--backend",  "sim",          "--ops-dir",
                                   std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops",
                                   "--op",     "synthetic",  "--dtype",      "f32",
                                   "--shape",  "N=4096",     "--shape",      "N=65536",
                                   "--one-pass", "--quiet",  "--unsigned",   "--store",
                                   dir.path() + "/" + name,  "--bundle",     dir.path() + "/" + name + "-bundle"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<Measurement> Rows(const std::string& store_path) {
  std::vector<Measurement> rows;
  auto store = ResultStore::OpenReadOnly(store_path);
  EXPECT_TRUE(store.ok()) << store.status().message();
  if (!store.ok()) return rows;
  EXPECT_TRUE((*store)->Scan(ResultFilter{}, [&](const Measurement& m) {
                        rows.push_back(m);
                        return true;
                      }).ok());
  return rows;
}

const char kDefault[] = "PAD=0,SPLIT=1,TILE=128,UNROLL=1";  // tests/data/ops/synthetic's [op] default

TEST(TuneConfigSource, ASearchedKeyMeasuresTheDefaultAndItsBundleEntryCarriesItsFigure) {
  TempDir dir;
  const CommandRun run = Tunefarm(dir, Tune(dir, "s", {"--strategy", "random", "--budget", "5", "--seed", "3"}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::map<std::string, std::set<std::string>> configs;  // shape -> configs
  for (const Measurement& m : Rows(dir.path() + "/s")) {
    EXPECT_EQ(m.proposer, "random/1") << m.config.Canonical();
    configs[m.shape].insert(m.config.Canonical());
  }
  ASSERT_EQ(configs.size(), 2u);
  for (const auto& [shape, measured] : configs) {
    EXPECT_EQ(measured.size(), 5u) << shape << ": the default counts in the budget";
    EXPECT_TRUE(measured.count(kDefault)) << shape;
  }
  auto bundle = ReadBundleFile(dir.path() + "/s-bundle.tfb");
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  ASSERT_EQ(bundle->entries.size(), 2u);
  for (const BundleEntry& e : bundle->entries) {
    EXPECT_GT(e.default_median_us, 0) << e.shape.Canonical();
    EXPECT_EQ(e.coverage.state, "searched");
  }
  // The table says what the winner gains on the default, per key.
  size_t lines = 0;
  for (size_t at = run.output.find("\n  default "); at != std::string::npos;
       at = run.output.find("\n  default ", at + 1)) {
    const std::string line = run.output.substr(at + 3, run.output.find('\n', at + 1) - at - 3);
    EXPECT_NE(line.find(" us, winner "), std::string::npos) << line;
    EXPECT_EQ(line.back(), 'x') << line;
    ++lines;
  }
  EXPECT_EQ(lines, 2u) << run.output;
  // results --top 2: per key the winner and one more, the bundle's winner among them.
  const CommandRun top = Tunefarm(dir, {"results", "--store", dir.path() + "/s", "--top", "2", "--format", "json"});
  ASSERT_EQ(top.exit_code, 0) << top.output;
  const nlohmann::json rows = nlohmann::json::parse(top.output.substr(top.output.find('[')), nullptr, false);
  ASSERT_TRUE(rows.is_array()) << top.output;
  EXPECT_EQ(rows.size(), 4u) << top.output;
  std::map<std::string, std::string> winners;
  for (const auto& r : rows)
    if (r["winner"].get<bool>()) winners[r["shape"]] = r["config"];
  for (const BundleEntry& e : bundle->entries) EXPECT_EQ(winners[e.shape.Canonical()], e.config.Canonical());
  EXPECT_NE(top.output.find("6 more row(s) left out (--top 2;"), std::string::npos) << top.output;
}

TEST(TuneConfigSource, AConfigListIsMeasuredExactlyOnEveryShape) {
  TempDir dir;
  const std::vector<std::string> listed = {"TILE=64,UNROLL=2,SPLIT=1,PAD=0", "TILE=256,UNROLL=1,SPLIT=3,PAD=2",
                                           "PAD=3,SPLIT=5,TILE=512,UNROLL=16"};
  std::vector<std::string> more;
  for (const std::string& c : listed) more.insert(more.end(), {"--config", c});
  const CommandRun run = Tunefarm(dir, Tune(dir, "l", more));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::set<std::string> want = {"PAD=0,SPLIT=1,TILE=64,UNROLL=2", "PAD=2,SPLIT=3,TILE=256,UNROLL=1",
                                      "PAD=3,SPLIT=5,TILE=512,UNROLL=16"};
  std::map<std::string, std::vector<std::string>> configs;  // shape -> configs
  for (const Measurement& m : Rows(dir.path() + "/l")) configs[m.shape].push_back(m.config.Canonical());
  ASSERT_EQ(configs.size(), 2u);
  for (const auto& [shape, measured] : configs) {
    EXPECT_EQ(measured.size(), 3u) << shape;
    EXPECT_EQ(std::set<std::string>(measured.begin(), measured.end()), want) << shape;
  }
  EXPECT_NE(run.output.find("by listed/1"), std::string::npos) << run.output;

  // Bad lists: one line naming the flag or the file, and the config's index.
  struct Case {
    std::vector<std::string> args;
    std::string want;
  };
  const std::string file = dir.path() + "/listed.toml";
  dir.Write("listed.toml",
            "[sweep]\nname = \"listed\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\nshapes = [ { N = 4096 } ]\n"
            "configs = [ { TILE = 64, UNROLL = 2, SPLIT = 1, PAD = 0 }, { TILE = 64, UNROLL = 2, SPLIT = 1, PAD = 9 } ]\n");
  for (const Case& c : std::vector<Case>{
           {{"--config", listed[0], "--config", "TILE=64,UNROLL=2,SPLIT=1"}, "--config[1]: no value for param 'PAD'"},
           {{"--config", "TILE=64,UNROLL=2,SPLIT=1,PAD=0,WARPS=4"}, "--config[0]: 'WARPS' is not a param of op 'synthetic'"},
           {{"--config", "TILE=96,UNROLL=2,SPLIT=1,PAD=0"}, "--config[0]: TILE = 96 is not one of the values"},
           {{"--config", listed[1], "--config", listed[0], "--config", "PAD=0,SPLIT=1,UNROLL=2,TILE=64"},
            "--config[2]: PAD=0,SPLIT=1,TILE=64,UNROLL=2 is listed twice (as [1] too)"},
       }) {
    const CommandRun bad = Tunefarm(dir, Tune(dir, "bad", c.args));
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_NE(bad.output.find(c.want), std::string::npos) << bad.output;
  }
  const CommandRun bad_file = Tunefarm(dir, {"tune", "--backend", "sim", "--ops-dir",
                                      std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--sweep", file, "--quiet",
                                      "--unsigned", "--store", dir.path() + "/bad-file"});
  EXPECT_NE(bad_file.exit_code, 0) << bad_file.output;
  EXPECT_NE(bad_file.output.find(file + ": [sweep] configs[1]: PAD = 9 is not one of the values in [params] PAD"),
            std::string::npos)
      << bad_file.output;
}

}  // namespace
}  // namespace tune
