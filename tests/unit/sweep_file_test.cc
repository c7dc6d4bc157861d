// Sweep files: the refine pass's and confirm phase's keys, their defaults, and one-line
// errors that name the file and the field.
#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "opspec/sweep_file.h"

namespace tune {
namespace {

using tune::testing::TempDir;

const std::string kOpsDir = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops";

Result<SweepSubmit> Load(const TempDir& dir, const std::string& extra) {
  dir.Write("sweep.toml", "[sweep]\nname = \"s\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                          "shapes = [ { N = 4096 } ]\n" + extra);
  return LoadSweepFile(dir.path() + "/sweep.toml", kOpsDir);
}

// The sweep files the farm ships (sweeps/, installed beside the ops) load
// against the shipped ops, every shape used by one op or more.
TEST(SweepFileTest, TheShippedSweepsLoad) {
  const std::string source(TUNEFARM_SOURCE_DIR);
  auto nightly = LoadSweepFile(source + "/sweeps/nightly.toml", source + "/ops");
  ASSERT_TRUE(nightly.ok()) << nightly.status().message();
  EXPECT_EQ(nightly->name, "nightly");
  size_t used = 0;
  for (const OpSpec& spec : [&] {
         std::vector<OpSpec> specs;
         for (const std::string& op : nightly->ops) specs.push_back(*LoadOpSpec(source + "/ops/" + op));
         return specs;
       }())
    used += ShapesForOp(*nightly, spec).size();
  EXPECT_GE(used, nightly->shapes.size());
}

TEST(SweepFileTest, ConfirmPhaseDefaultsToTwoSecondsTimedAsTheDeviceWarrants) {
  TempDir dir;
  auto none = Load(dir, "");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->confirm_top, 0u);
  EXPECT_TRUE(none->refine_pass);
  auto one_pass = Load(dir, "refine_pass = false\n");
  ASSERT_TRUE(one_pass.ok()) << one_pass.status().message();
  EXPECT_FALSE(one_pass->refine_pass);

  auto top = Load(dir, "confirm_top = 4\n");
  ASSERT_TRUE(top.ok()) << top.status().message();
  EXPECT_EQ(top->confirm_top, 4u);
  EXPECT_EQ(top->confirm_seconds, kDefaultConfirmSeconds);
  EXPECT_EQ(top->confirm_timing, ConfirmTiming::kAuto);

  auto sustained = Load(dir, "confirm_top = 4\nconfirm_seconds = 8.0\nconfirm_timing = \"sustained\"\n");
  ASSERT_TRUE(sustained.ok()) << sustained.status().message();
  EXPECT_EQ(sustained->confirm_seconds, 8.0);
  EXPECT_EQ(sustained->confirm_timing, ConfirmTiming::kSustained);
}

// A sweep's timing is written into each op's package: every host that
// parses the op times it so; a value other than cold or hot is refused.
TEST(SweepFileTest, TimingSetsEachOpsTimingAndABadOneNamesTheField) {
  TempDir dir;
  auto own = Load(dir, "");
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_EQ(ParseOpSpec(own->op_packages[0], "synthetic")->timing, L2Timing::kCold);
  auto hot = Load(dir, "timing = \"hot\"\n");
  ASSERT_TRUE(hot.ok()) << hot.status().message();
  EXPECT_EQ(ParseOpSpec(hot->op_packages[0], "synthetic")->timing, L2Timing::kHot);
  auto warm = Load(dir, "timing = \"warm\"\n");
  ASSERT_FALSE(warm.ok());
  EXPECT_NE(warm.status().message().find("[sweep] timing: 'warm' is not cold or hot"), std::string::npos)
      << warm.status().message();
  EXPECT_EQ(warm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadSweepFile(dir.path() + "/none.toml", kOpsDir).status().code(), StatusCode::kNotFound);
  auto number = Load(dir, "timing = 1\n");
  ASSERT_FALSE(number.ok());
  EXPECT_NE(number.status().message().find("[sweep] timing: expected \"cold\" or \"hot\""), std::string::npos)
      << number.status().message();
}

TEST(SweepFileTest, BadConfirmKeysNameTheFileAndField) {
  TempDir dir;
  const std::string file = dir.path() + "/sweep.toml";
  for (auto [extra, want] : {
           std::pair{"confirm_timing = \"steady\"\n",
                     ": [sweep] confirm_timing: expected \"auto\", \"burst\" or \"sustained\""},
           std::pair{"confirm_timing = 1\n", ": [sweep] confirm_timing: expected \"auto\", \"burst\" or \"sustained\""},
           std::pair{"confirm_top = 65\n", ": [sweep] confirm_top: expected an integer in 0..64"},
           std::pair{"confirm_seconds = 0\n", ": [sweep] confirm_seconds: expected a number of seconds in (0, 3600]"},
           std::pair{"refine_pass = \"yes\"\n", ": [sweep] refine_pass: expected true or false"},
       }) {
    auto got = Load(dir, extra);
    ASSERT_FALSE(got.ok()) << extra;
    EXPECT_EQ(got.status().message(), file + want) << extra;
  }
}

// A sweep's priority: 50 unless named, any integer of 0..100; out of range
// or not an integer, one line naming the file and the key.
TEST(SweepFileTest, PriorityDefaultsToFiftyAndOutOfRangeIsRefusedNamingTheKey) {
  TempDir dir;
  const std::string file = dir.path() + "/sweep.toml";
  auto plain = Load(dir, "");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->priority, kDefaultSweepPriority);
  EXPECT_EQ(kDefaultSweepPriority, 50u);
  for (uint32_t p : {0u, 80u, 100u}) {
    auto got = Load(dir, "priority = " + std::to_string(p) + "\n");
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->priority, p);
  }
  for (auto [extra, want] : {
           std::pair{"priority = 101\n", ": [sweep] priority: 101 is out of range: expected an integer in 0..100"},
           std::pair{"priority = -1\n", ": [sweep] priority: -1 is out of range: expected an integer in 0..100"},
           std::pair{"priority = \"high\"\n", ": [sweep] priority: expected an integer in 0..100"},
       }) {
    auto got = Load(dir, extra);
    ASSERT_FALSE(got.ok()) << extra;
    EXPECT_EQ(got.status().message().substr(0, file.size() + std::string(want).size()), file + want) << extra;
  }
}

TEST(SweepFileTest, AnObjectiveIsTimeUnlessNamedAndAnUnknownOneIsRefused) {
  TempDir dir;
  const std::string file = dir.path() + "/sweep.toml";
  auto plain = Load(dir, "");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->objective, "time");
  for (const char* o : {"time", "energy", "edp"}) {
    auto got = Load(dir, std::string("objective = \"") + o + "\"\n");
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->objective, o);
  }
  for (auto [extra, want] : {
           std::pair{"objective = \"watts\"\n", ": [sweep] objective: 'watts': expected time, energy or edp"},
           std::pair{"objective = 3\n", ": [sweep] objective: expected \"time\", \"energy\" or \"edp\""},
       }) {
    auto got = Load(dir, extra);
    ASSERT_FALSE(got.ok()) << extra;
    EXPECT_EQ(got.status().message(), file + want) << extra;
  }
}

// A misspelt key is refused naming the file, its line and the key, with the
// key it most likely meant; a table the format lacks likewise.
TEST(SweepFileTest, UnknownKeysAreRefusedNamingTheLineAndTheNearestKey) {
  TempDir dir;
  const std::string file = dir.path() + "/sweep.toml";
  for (auto [extra, want] : {
           std::pair{"budgt = 10\n", ":6: [sweep] unknown key 'budgt' (did you mean 'budget'?)"},
           std::pair{"stratgy = \"random\"\n", ":6: [sweep] unknown key 'stratgy' (did you mean 'strategy'?)"},
           std::pair{"colour = \"blue\"\n", ":6: [sweep] unknown key 'colour'"},
           std::pair{"[sweeps]\nbudget = 3\n", ":6: unknown key 'sweeps' (did you mean 'sweep'?)"},
       }) {
    auto got = Load(dir, extra);
    ASSERT_FALSE(got.ok()) << extra;
    EXPECT_EQ(got.status().message(), file + want) << extra;
  }
  EXPECT_TRUE(Load(dir, "budget = 10\nstrategy = \"random\"\n").ok());
}

// A shape that gives no op its dims says which dim is missing, extra or
// misspelt.
TEST(SweepFileTest, AShapeErrorNamesTheDim) {
  TempDir dir;
  auto load = [&](const std::string& shape) {
    dir.Write("s.toml", "[sweep]\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\nshapes = [ " + shape + " ]\n");
    auto got = LoadSweepFile(dir.path() + "/s.toml", kOpsDir);
    return got.ok() ? std::string() : got.status().message();
  };
  EXPECT_NE(load("{ n = 4096 }").find("shape n=4096 has 'n' (did you mean 'N'?)"), std::string::npos) << load("{ n = 4096 }");
  EXPECT_NE(load("{ N = 4096, L = 2 }").find("has 'L', no dim of the op"), std::string::npos);
  EXPECT_NE(load("{ M = 4096 }").find("has 'M'"), std::string::npos);
}

TEST(SweepFileTest, SearchKeysDefaultToAutoAndBadOnesNameTheField) {
  TempDir dir;
  auto none = Load(dir, "");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->strategy, "auto");
  EXPECT_EQ(none->budget, 0u);
  auto set = Load(dir, "strategy = \"evolution\"\nseed = 7\nbudget = 120\nbudget_seconds = 60.5\n"
                       "retry = [\"timeout\", \"crash\"]\n");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->retry, (std::vector<std::string>{"timeout", "crash"}));
  EXPECT_EQ(set->strategy, "evolution");
  EXPECT_EQ(set->seed, 7u);
  EXPECT_EQ(set->budget, 120u);
  EXPECT_EQ(set->budget_seconds, 60.5);
  const std::string file = dir.path() + "/sweep.toml";
  for (auto [extra, want] : {
           std::pair{"strategy = \"genetic\"\n",
                     ": [sweep] strategy: unknown strategy 'genetic' (known: exhaustive, random, evolution, model, auto)"},
           std::pair{"strategy = 3\n", ": [sweep] strategy: expected a string"},
           std::pair{"seed = -1\n", ": [sweep] seed: expected a non-negative integer"},
           std::pair{"seed = \"abc\"\n", ": [sweep] seed: expected a non-negative integer"},
           std::pair{"budget = 0\n", ": [sweep] budget: expected evaluations per key in 1..1000000"},
           std::pair{"budget = 1000001\n", ": [sweep] budget: expected evaluations per key in 1..1000000"},
           std::pair{"budget_seconds = nan\n", ": [sweep] budget_seconds: expected seconds per key in (0, 604800]"},
           std::pair{"retry = \"timeout\"\n", ": [sweep] retry: expected a list of failure classes, like [\"timeout\"]"},
           std::pair{"retry = [\"skipped\"]\n",
                     ": [sweep] retry: 'skipped' is not a failure class (compile_error, resources, launch_error, crash, "
                     "timeout, wrong_result, nan)"},
       }) {
    auto got = Load(dir, extra);
    ASSERT_FALSE(got.ok()) << extra;
    EXPECT_EQ(got.status().message(), file + want) << extra;
  }
}

// A retime re-measures a config list: one is required, its configs are
// confirmed (their figures must outrank the key's other rows), and a bad
// value names the key.
TEST(SweepFileTest, ARetimeNeedsAConfigListAndConfirmsIt) {
  TempDir dir;
  const std::string two = "configs = [ { TILE = 64, UNROLL = 2, SPLIT = 1, PAD = 0 },"
                          " { TILE = 128, UNROLL = 2, SPLIT = 1, PAD = 0 } ]\n";
  auto retime = Load(dir, "retime = true\n" + two);
  ASSERT_TRUE(retime.ok()) << retime.status().message();
  EXPECT_TRUE(retime->retime);
  EXPECT_EQ(retime->confirm_top, 2u);
  EXPECT_EQ(retime->confirm_seconds, kDefaultConfirmSeconds);
  EXPECT_FALSE(Load(dir, two)->retime);
  auto bare = Load(dir, "retime = true\n");
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find(
                "[sweep] configs: a retime measures chosen configs again: list them (configs = [...])"),
            std::string::npos)
      << bare.status().message();
  auto word = Load(dir, "retime = \"yes\"\n" + two);
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.status().message().find("[sweep] retime: expected true or false"), std::string::npos)
      << word.status().message();
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// A config list ([sweep] configs): the configs as listed, in the op's axis
// order; a bad one refused in one line naming the file and its index.
TEST(SweepFileTest, AConfigListIsTakenAsGivenAndABadConfigIsRefusedNamingItsIndex) {
  TempDir dir;
  auto listed = Load(dir,
                     "configs = [ { PAD = 0, TILE = 64, UNROLL = 2, SPLIT = 1 },\n"
                     "            { TILE = 256, UNROLL = 1, SPLIT = 3, PAD = 2 } ]\n");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  ASSERT_EQ(listed->configs.size(), 2u);
  EXPECT_EQ(listed->configs[0].params.front().first, "TILE");  // the op's order, not the file's
  EXPECT_EQ(listed->configs[0].Canonical(), "PAD=0,SPLIT=1,TILE=64,UNROLL=2");
  EXPECT_EQ(listed->configs[1].Canonical(), "PAD=2,SPLIT=3,TILE=256,UNROLL=1");
  EXPECT_TRUE(Load(dir, "")->configs.empty());

  const std::string good = "{ TILE = 64, UNROLL = 2, SPLIT = 1, PAD = 0 }";
  const std::string path = dir.path() + "/sweep.toml";
  struct Case {
    std::string configs, want;
  };
  for (const Case& c : std::vector<Case>{
           {"[ " + good + ", { TILE = 64, UNROLL = 2, SPLIT = 1 } ]", "configs[1]: no value for param 'PAD'"},
           {"[ " + good + ", { TILE = 64, UNROLL = 2, SPLIT = 1, PAD = 0, TILES = 2 } ]",
            "configs[1]: 'TILES' is not a param of op 'synthetic' (did you mean 'TILE'?)"},
           {"[ { TILE = 96, UNROLL = 2, SPLIT = 1, PAD = 0 } ]",
            "configs[0]: TILE = 96 is not one of the values in [params] TILE"},
           {"[ " + good + ", { PAD = 0, SPLIT = 1, UNROLL = 2, TILE = 64 } ]",
            "configs[1]: PAD=0,SPLIT=1,TILE=64,UNROLL=2 is listed twice (as [0] too)"},
           {"[ " + good + ", { TILE = 1.5, UNROLL = 2, SPLIT = 1, PAD = 0 } ]",
            "configs[1] TILE: expected an integer, a string or a boolean"},
           {"[ ]", "configs: expected a non-empty array of tables"},
       }) {
    auto r = Load(dir, "configs = " + c.configs + "\n");
    ASSERT_FALSE(r.ok()) << c.configs;
    EXPECT_EQ(r.status().message().rfind(path + ": [sweep] ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  }
  // A searching strategy has nothing to search in a list.
  auto random = Load(dir, "strategy = \"random\"\nconfigs = [ " + good + " ]\n");
  ASSERT_FALSE(random.ok());
  EXPECT_NE(random.status().message().find("[sweep] configs: a config list is measured whole; strategy 'random'"),
            std::string::npos)
      << random.status().message();
}

}  // namespace
}  // namespace tune
