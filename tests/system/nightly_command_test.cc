// `tunefarm nightly`: each night in its own store; the second night of an
// unchanged farm flags nothing, a slower farm is flagged (exit code 3).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/process.h"

namespace fs = std::filesystem;
using tune::testing::Child;
using tune::testing::ReadFile;

TEST(NightlyCommand, FlagsARegressionAboveNoiseOnly) {
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-nightly-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream sweep(dir / "sweep.toml");
    sweep << "[sweep]\nname = \"nightly\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
             "shapes = [ { N = 1048576 }, { N = 16777216 } ]\n";
  }
  auto night = [&](const std::string& faults, const std::string& log) {
    std::vector<std::string> argv = {TUNEFARM_BINARY, "nightly", "--sweep", (dir / "sweep.toml").string(),
                                     "--history", (dir / "history").string(), "--ops-dir",
                                     std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops",
                                     "--backend", "sim"};
    if (!faults.empty()) argv.insert(argv.end(), {"--sim-faults", faults});
    Child c(argv, (dir / log).string());
    const int rc = c.Wait(120);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // one night per second
    return rc;
  };
  ASSERT_EQ(night("", "n1.log"), 0) << ReadFile((dir / "n1.log").string());
  EXPECT_NE(ReadFile((dir / "n1.log").string()).find("nothing to compare"), std::string::npos);
  ASSERT_EQ(night("", "n2.log"), 0) << ReadFile((dir / "n2.log").string());
  EXPECT_NE(ReadFile((dir / "n2.log").string()).find(" 0 regression(s)"), std::string::npos);
  // A farm 30% slower across the board.
  EXPECT_EQ(night("slow=1.3", "n3.log"), 3) << ReadFile((dir / "n3.log").string());
  EXPECT_NE(ReadFile((dir / "n3.log").string()).find(" 2 regression(s)"), std::string::npos);
  size_t nights = 0;
  for (const auto& e : fs::directory_iterator(dir / "history")) {
    EXPECT_TRUE(fs::exists(e.path() / "bundle.tfb")) << e.path();
    ++nights;
  }
  EXPECT_EQ(nights, 3u);

  // The same data as CSV: the last two nights' diff, a bundle's entries, a lookup.
  std::vector<fs::path> bundles;
  for (const auto& e : fs::directory_iterator(dir / "history")) bundles.push_back(e.path() / "bundle.tfb");
  std::sort(bundles.begin(), bundles.end());
  auto run = [&](std::vector<std::string> args, const std::string& log, int want) {
    args.insert(args.begin(), TUNEFARM_BINARY);
    Child c(args, (dir / log).string());
    EXPECT_EQ(c.Wait(60), want) << ReadFile((dir / log).string());
    return ReadFile((dir / log).string());
  };
  const std::string diff =
      run({"bundle", "diff", bundles[1].string(), bundles[2].string(), "--format", "csv"}, "diff.csv", 3);
  EXPECT_EQ(diff.rfind("op,dtype,gpu_model,shape,verdict,", 0), 0u) << diff;
  EXPECT_EQ(std::count(diff.begin(), diff.end(), '\n'), 3) << diff;
  EXPECT_NE(diff.find("synthetic,f32,sim-h100,N=1048576,regression,"), std::string::npos) << diff;
  const std::string show = run({"bundle", "show", bundles[2].string(), "--format", "csv"}, "show.csv", 0);
  EXPECT_EQ(show.rfind("gpu_model,op,dtype,shape,config,", 0), 0u) << show;
  EXPECT_EQ(std::count(show.begin(), show.end(), '\n'), 3) << show;
  const std::string lookup = run({"bundle", "lookup", bundles[2].string(), "--op", "synthetic", "--dtype", "f32",
                                  "--gpu", "sim-h100", "--shape", "N=1000000", "--format", "csv"},
                                 "lookup.csv", 0);
  // An untuned shape of a model with two tuned shapes: the bundle's shape
  // selector answers with a config tuned on one of them.
  EXPECT_NE(lookup.find("\npredicted,\"PAD="), std::string::npos) << lookup;
  EXPECT_NE(lookup.find(",sim-h100,N="), std::string::npos) << lookup;
  // A shape that does not give the op's dims is refused naming the dim, not
  // answered with the default.
  const std::string typo = run({"bundle", "lookup", bundles[2].string(), "--op", "synthetic", "--dtype", "f32",
                                "--gpu", "sim-h100", "--shape", "n=1000000"},
                               "typo.txt", 1);
  EXPECT_NE(typo.find("'n' is no dim of op synthetic (N); did you mean 'N'?"), std::string::npos) << typo;

  // --format json: stdout holds one document (the sweep's lines go to
  // stderr); back at full speed after the slow night, nothing regressed.
  {
    const std::string cmd = std::string(TUNEFARM_BINARY) + " nightly --sweep " + (dir / "sweep.toml").string() +
                            " --history " + (dir / "history").string() + " --ops-dir " + TUNEFARM_SOURCE_DIR +
                            "/tests/data/ops --backend sim --format json 2>" + (dir / "n4.err").string();
    Child c({"/bin/sh", "-c", cmd}, (dir / "n4.json").string());
    ASSERT_EQ(c.Wait(120), 0) << ReadFile((dir / "n4.err").string());
    const auto doc = nlohmann::json::parse(ReadFile((dir / "n4.json").string()), nullptr, false);
    ASSERT_TRUE(doc.is_object()) << ReadFile((dir / "n4.json").string());
    EXPECT_EQ(doc["regressions"], false) << doc.dump();
    EXPECT_EQ(doc["previous"], bundles[2].parent_path().filename().string()) << doc.dump();
    EXPECT_TRUE(doc["report"].is_object()) << doc.dump();
    EXPECT_TRUE(doc["retime_report"].is_null()) << doc.dump();
    EXPECT_TRUE(fs::exists(doc["bundle"].get<std::string>())) << doc.dump();
    EXPECT_NE(ReadFile((dir / "n4.err").string()).find("nightly: "), std::string::npos);
  }
  if (!HasFailure()) fs::remove_all(dir);
}

// `nightly --coordinator`: the night's sweep runs on a farm (a coordinator
// and a sim worker as processes), and its bundle is published from the
// farm's store, read through the coordinator.
TEST(NightlyCommand, RunsOnAFarmThroughItsCoordinator) {
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-nightly-farm-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream sweep(dir / "sweep.toml");
    sweep << "[sweep]\nname = \"farm-nightly\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\nconfirm_top = 2\n"
             "shapes = [ { N = 1048576 } ]\n";
  }
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  Child coordinator({TUNEFARM_BINARY, "coordinator", "--bind", endpoint, "--store", (dir / "farm.db").string()},
                    (dir / "coordinator.log").string());
  Child worker({TUNEFARM_BINARY, "worker", "--connect", endpoint, "--backend", "sim", "--sim-models", "l40s"},
               (dir / "worker.log").string());
  auto night = [&](const std::string& log) {
    Child c({TUNEFARM_BINARY, "nightly", "--sweep", (dir / "sweep.toml").string(), "--history",
             (dir / "history").string(), "--ops-dir", std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops",
             "--coordinator", endpoint, "--sweep-timeout", "100"},
            (dir / log).string());
    const int rc = c.Wait(120);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // one night per second
    return rc;
  };
  ASSERT_EQ(night("n1.log"), 0) << ReadFile((dir / "n1.log").string()) << ReadFile((dir / "coordinator.log").string());
  const std::string first = ReadFile((dir / "n1.log").string());
  EXPECT_NE(first.find("nothing to compare"), std::string::npos) << first;
  EXPECT_NE(first.find("from the farm's store"), std::string::npos) << first;
  ASSERT_EQ(night("n2.log"), 0) << ReadFile((dir / "n2.log").string());
  const std::string second = ReadFile((dir / "n2.log").string());
  EXPECT_NE(second.find(" 0 regression(s)"), std::string::npos) << second;
  // The farm's store had every pair: last night's winner was measured
  // again, not compared with itself.
  EXPECT_NE(second.find("nightly: 1 of last night's key(s) measured again"), std::string::npos) << second;
  // The retime went through its own passes, though the key had confirmed
  // rows of night one: last night's winner has a confirmed row of tonight.
  {
    std::vector<fs::path> nights;
    for (const auto& e : fs::directory_iterator(dir / "history")) nights.push_back(e.path() / "bundle.json");
    std::sort(nights.begin(), nights.end());
    const auto first_bundle = nlohmann::json::parse(ReadFile(nights.front().string()));
    const std::string winner = first_bundle["entries"][0]["config_id"];
    Child rows({"/bin/sh", "-c",
                std::string(TUNEFARM_BINARY) + " results --coordinator " + endpoint + " --config " + winner +
                    " --format json 2>/dev/null"},
               (dir / "winner.json").string());
    ASSERT_EQ(rows.Wait(60), 0) << ReadFile((dir / "winner.json").string());
    const auto row = nlohmann::json::parse(ReadFile((dir / "winner.json").string()));
    ASSERT_EQ(row.size(), 1u) << row.dump();
    EXPECT_TRUE(row[0]["confirmed"].get<bool>()) << row.dump();
  }
  // A worker 10% slower tonight: the retime sees it, and nightly says so.
  worker.Stop();
  Child slow({TUNEFARM_BINARY, "worker", "--connect", endpoint, "--backend", "sim", "--sim-models", "l40s",
              "--sim-faults", "slow=1.1"},
             (dir / "worker-slow.log").string());
  ASSERT_EQ(night("n3.log"), 3) << ReadFile((dir / "n3.log").string()) << ReadFile((dir / "coordinator.log").string());
  const std::string third = ReadFile((dir / "n3.log").string());
  // The same configs timed tonight: 10% slower. Tonight's bundle ranks
  // tonight's rows of the key (no config wins on last night's figure), so
  // the main comparison says the same: the winner kept, 10% slower.
  const size_t again = third.find("last night's winners measured again tonight");
  ASSERT_NE(again, std::string::npos) << third;
  EXPECT_NE(third.find(" 1 regression(s)", again), std::string::npos) << third;
  EXPECT_NE(third.find("+10.0%", again), std::string::npos) << third;
  EXPECT_NE(third.find("N=1048576"), std::string::npos) << third;
  EXPECT_NE(third.substr(0, again).find(" 1 regression(s)"), std::string::npos) << third;
  EXPECT_NE(third.substr(0, again).find(" 0 winner change(s)"), std::string::npos) << third;
  // `retime` of night two's bundle on the slow farm: its winner is 10%
  // slower than that bundle says, as JSON.
  std::vector<fs::path> bundles;
  for (const auto& e : fs::directory_iterator(dir / "history")) bundles.push_back(e.path() / "bundle.tfb");
  std::sort(bundles.begin(), bundles.end());
  ASSERT_EQ(bundles.size(), 3u);
  // stdout alone holds the JSON document (what it waited for goes to stderr).
  Child retime({"/bin/sh", "-c",
                std::string(TUNEFARM_BINARY) + " retime --coordinator " + endpoint + " --bundle " +
                    bundles[1].string() + " --top 2 --ops-dir " + TUNEFARM_SOURCE_DIR +
                    "/tests/data/ops --format json --timeout 100 2>" + (dir / "retime.err").string()},
               (dir / "retime.json").string());
  ASSERT_EQ(retime.Wait(120), 0) << ReadFile((dir / "retime.json").string()) << ReadFile((dir / "retime.err").string());
  const auto doc = nlohmann::json::parse(ReadFile((dir / "retime.json").string()));
  ASSERT_EQ(doc.size(), 1u) << doc.dump();
  EXPECT_EQ(doc[0]["shape"], "N=1048576");
  EXPECT_NEAR(doc[0]["change"].get<double>(), 0.1, 0.01) << doc.dump();
  EXPECT_EQ(doc[0]["now"]["config"], doc[0]["before"]["config"]) << doc.dump();
  EXPECT_TRUE(doc[0]["fastest_now"].is_object()) << doc.dump();
  slow.Stop();
  size_t nights = 0;
  for (const auto& e : fs::directory_iterator(dir / "history")) {
    EXPECT_TRUE(fs::exists(e.path() / "bundle.tfb")) << e.path();
    EXPECT_FALSE(fs::exists(e.path() / "store")) << "a farm's night keeps no store of its own";
    const std::string json = ReadFile((e.path() / "bundle.json").string());
    EXPECT_NE(json.find("sim-l40s"), std::string::npos) << "the farm's worker measured it";
    ++nights;
  }
  EXPECT_EQ(nights, 3u);
  // A farm that cannot be reached is one line, and no night is recorded.
  Child nobody({TUNEFARM_BINARY, "nightly", "--sweep", (dir / "sweep.toml").string(), "--history",
                (dir / "history").string(), "--ops-dir", std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops",
                "--coordinator", "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort())},
               (dir / "n3.log").string());
  EXPECT_EQ(nobody.Wait(60), 1);
  EXPECT_NE(ReadFile((dir / "n3.log").string()).find("did not answer"), std::string::npos)
      << ReadFile((dir / "n3.log").string());
  // A remote read (which may wait minutes for an export) says within
  // seconds that nothing listens there, and how to tell why.
  Child read({TUNEFARM_BINARY, "results", "--coordinator",
              "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort())},
             (dir / "read.log").string());
  EXPECT_EQ(read.Wait(60), 1);
  EXPECT_NE(ReadFile((dir / "read.log").string()).find("did not answer: no connection in 10 s (is it running"),
            std::string::npos)
      << ReadFile((dir / "read.log").string());
  coordinator.Stop();
  fs::remove_all(dir);
}

// --keep N keeps the newest N night folders, tonight's among them; what is
// not a night folder stays.
TEST(NightlyCommand, KeepRemovesTheOldestNightsOnly) {
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-nightly-keep-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "history");
  std::ofstream(dir / "sweep.toml") << "[sweep]\nname = \"nightly\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                                       "shapes = [ { N = 1048576 } ]\n";
  for (const char* old : {"20200101T000000Z", "20200102T000000Z", "notes"}) {
    fs::create_directories(dir / "history" / old);
    std::ofstream(dir / "history" / old / "kept.txt") << "x";
  }
  // With --format json --quiet: stdout is the one document, the removals
  // are said on stderr.
  Child c({"/bin/sh", "-c",
           std::string("exec \"") + TUNEFARM_BINARY + "\" nightly --sweep '" + (dir / "sweep.toml").string() +
               "' --history '" + (dir / "history").string() + "' --ops-dir '" + TUNEFARM_SOURCE_DIR +
               "/tests/data/ops' --backend sim --keep 2 --format json --quiet 2>'" + (dir / "keep.log").string() +
               "'"},
          (dir / "keep.json").string());
  ASSERT_EQ(c.Wait(120), 0) << ReadFile((dir / "keep.log").string());
  const std::string out = ReadFile((dir / "keep.json").string());
  EXPECT_TRUE(nlohmann::json::parse(out, nullptr, false).is_object()) << "stdout is not one JSON document:\n" << out;
  EXPECT_NE(ReadFile((dir / "keep.log").string()).find("nightly: removed "), std::string::npos);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir / "history")) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  ASSERT_EQ(left.size(), 3u) << ReadFile((dir / "keep.log").string());
  EXPECT_EQ(left[0], "20200102T000000Z");
  EXPECT_TRUE(fs::exists(dir / "history" / left[1] / "bundle.tfb")) << left[1];  // tonight's
  EXPECT_EQ(left[2], "notes");
  fs::remove_all(dir);
}
