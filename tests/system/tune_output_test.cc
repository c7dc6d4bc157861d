// What `tunefarm tune` prints: with --format json, stdout is one JSON
// document (the rows, the sweep's figures with where its time went, the
// failures, the store and bundle paths) and the lines for people go to
// stderr; a table keeps its summary lines on stdout.
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <string>

#include "support/process.h"
#include "search/key_search.h"
#include "support/temp_dir.h"

namespace tune {
namespace {

struct Output {
  int exit_code = -1;
  std::string out, err;
};

// `tunefarm tune` on one simulated device: test op `op` of `ops_dir` (the
// small one by default), two shapes unless `args` says otherwise.
Output Tune(const testing::TempDir& dir, const std::string& format, const std::string& op = "tiny",
            const std::string& ops_dir = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops",
            const std::string& args = "--shape N=65536 --shape N=4096") {
  Output r;
  const std::string cmd = std::string(TUNEFARM_BINARY) + " tune --backend sim --sim-models h100 --ops-dir " +
                          ops_dir + " --op " + op + " --dtype f32 " + args +
                          " --quiet --unsigned --store " + dir.Sub(format + "-store") + " --bundle " +
                          dir.Sub(format + "-bundle") + " --cache-dir " + dir.Sub("cache") + " --format " + format +
                          " 2>" + dir.Sub(format + ".err");
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = testing::ReadFile(dir.Sub(format + ".err"));
  return r;
}

// A copy of test op `op` under `dir`/ops, its op.toml changed by `edit`
// (false: the edit did not apply); the ops folder, or "" on failure.
template <class Edit>
std::string OpCopy(const testing::TempDir& dir, const std::string& op, Edit&& edit) {
  const std::string ops = dir.Sub("ops");
  const std::string src = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/" + op;
  if (std::system(("mkdir -p " + ops + " && cp -r " + src + " " + ops + "/").c_str()) != 0) return "";
  std::string toml = testing::ReadFile(ops + "/" + op + "/op.toml");
  if (!edit(toml)) return "";
  std::ofstream(ops + "/" + op + "/op.toml", std::ios::trunc) << toml;
  return ops;
}

// program_sum's op.toml with a `version` command that fails on every host.
bool FailingVersion(std::string& toml) {
  const size_t at = toml.find("run   = \"sh bench.sh\"");
  if (at == std::string::npos) return false;
  toml.insert(at, "version = \"sh -c 'echo torch is missing >&2; exit 3'\"\n");
  return true;
}

TEST(TuneOutput, JsonIsOneDocumentWithTheRowsAndWhereTheSweepsTimeWent) {
  testing::TempDir dir;
  const Output r = Tune(dir, "json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "stdout is not one JSON document:\n" << r.out;
  ASSERT_TRUE(doc.is_object());

  ASSERT_TRUE(doc["results"].is_array());
  ASSERT_FALSE(doc["results"].empty());
  for (const auto& row : doc["results"]) {
    EXPECT_EQ(row["op"], "tiny");
    EXPECT_EQ(row["backend"], "sim");
    EXPECT_TRUE(row["median_us"].is_number());
  }

  const nlohmann::json& sweep = doc["sweep"];
  ASSERT_TRUE(sweep.is_object()) << r.out;
  EXPECT_GT(sweep["configs"].get<uint64_t>(), 0u);
  EXPECT_GE(sweep["results"].get<uint64_t>(), doc["results"].size());
  EXPECT_GT(sweep["wall_seconds"].get<double>(), 0.0);
  EXPECT_TRUE(sweep["simulated"].get<bool>());
  const nlohmann::json& pipe = sweep["pipeline"];
  ASSERT_TRUE(pipe.is_object()) << r.out;
  for (const char* f : {"devices_busy", "compile_busy"}) {
    ASSERT_TRUE(pipe[f].is_number()) << f;
    EXPECT_GE(pipe[f].get<double>(), 0.0) << f;
    EXPECT_LE(pipe[f].get<double>(), 1.0) << f;
  }
  EXPECT_GT(pipe["devices_busy"].get<double>(), 0.0) << "the device measured something";
  for (const char* f : {"compiled", "fetched", "cached"}) EXPECT_TRUE(pipe[f].is_number_unsigned()) << f;
  for (const char* f : {"compile_seconds", "device_wait_seconds", "wall_seconds"}) {
    ASSERT_TRUE(pipe[f].is_number()) << f;
    EXPECT_GE(pipe[f].get<double>(), 0.0) << f;
  }
  EXPECT_EQ(pipe["wall_seconds"], sweep["wall_seconds"]);
  // A sim compile is one per config in a unit: the counts cover every config.
  EXPECT_GE(pipe["compiled"].get<uint64_t>() + pipe["fetched"].get<uint64_t>() + pipe["cached"].get<uint64_t>(),
            sweep["configs"].get<uint64_t>());

  EXPECT_TRUE(doc["failures"].is_object());
  EXPECT_EQ(doc["store"], dir.Sub("json-store"));
  EXPECT_EQ(doc["bundle"], dir.Sub("json-bundle") + ".tfb");
  // The lines for people went to stderr.
  EXPECT_NE(r.err.find("\nsweep: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SIMULATED"), std::string::npos) << r.err;
}

// --log-format json: stderr is JSON lines alone (the devices, the notes,
// the bundle's key among them), stdout the one document.
TEST(TuneOutput, AJsonLogWritesNothingButJsonLines) {
  testing::TempDir dir;
  const Output r = Tune(dir, "json", "tiny", std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops",
                        "--shape N=4096 --log-format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out, nullptr, false).is_discarded()) << r.out;
  size_t lines = 0;
  bool device = false;
  for (size_t begin = 0, end; begin < r.err.size(); begin = end + 1) {
    end = r.err.find('\n', begin);
    if (end == std::string::npos) end = r.err.size();
    if (end == begin) continue;
    const auto line = nlohmann::json::parse(r.err.substr(begin, end - begin), nullptr, false);
    ASSERT_TRUE(line.is_object()) << "not a JSON line: " << r.err.substr(begin, end - begin);
    device = device || line.value("message", "") == "device";
    ++lines;
  }
  EXPECT_GT(lines, 0u);
  EXPECT_TRUE(device) << r.err;
}

// --timing hot beside the default cold on the same key and store: two sets
// of rows under two kernel hashes, each row saying which it is, printed as
// two keys; hot reads a problem that fits in L2 faster (the sim's model).
TEST(TuneOutput, AHotAndAColdSweepOfOneKeyAreTwoRowSetsThatNeverMix) {
  testing::TempDir dir;
  const std::string ops = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops";
  const Output cold = Tune(dir, "json", "tiny", ops, "--shape N=1048576");
  ASSERT_EQ(cold.exit_code, 0) << cold.err;
  const Output hot = Tune(dir, "json", "tiny", ops, "--shape N=1048576 --timing hot");
  ASSERT_EQ(hot.exit_code, 0) << hot.err;
  const auto hot_doc = nlohmann::json::parse(hot.out, nullptr, false);
  ASSERT_TRUE(hot_doc.is_object()) << hot.out;
  for (const auto& row : hot_doc["results"]) EXPECT_EQ(row["timing"], "hot") << row;

  auto results = [&](const std::string& format) {
    std::string out;
    FILE* p = ::popen((std::string(TUNEFARM_BINARY) + " results --top 0 --format " + format + " --store " +
                       dir.Sub("json-store") + " 2>/dev/null").c_str(), "r");
    char buf[4096];
    for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    if (p) ::pclose(p);
    return out;
  };
  const auto rows = nlohmann::json::parse(results("json"), nullptr, false);
  ASSERT_TRUE(rows.is_array());
  std::map<std::string, std::set<std::string>> hashes;  // by timing
  std::map<std::string, size_t> count;
  std::map<std::string, double> best;
  for (const auto& row : rows) {
    const std::string t = row["timing"];
    hashes[t].insert(row["kernel_hash"].get<std::string>());
    ++count[t];
    if (row["winner"] == true) best[t] = row["median_us"].get<double>();
  }
  ASSERT_EQ(hashes.size(), 2u) << rows.dump();
  ASSERT_EQ(hashes["hot"].size(), 1u);
  EXPECT_EQ(hashes["cold"].count(*hashes["hot"].begin()), 0u) << "one kernel hash for both";
  EXPECT_EQ(count["hot"], count["cold"]) << "a row set each, none replaced";
  ASSERT_GT(best["hot"], 0);
  EXPECT_LT(best["hot"], best["cold"]);
  const std::string table = results("table");
  EXPECT_NE(table.find("tiny/f32  N=1048576  [hot L2]"), std::string::npos) << table;
  EXPECT_NE(table.find("tiny/f32  N=1048576  [SIMULATED"), std::string::npos) << table;

  const Output warm = Tune(dir, "table", "tiny", ops, "--shape N=1048576 --timing warm");
  EXPECT_EQ(warm.exit_code, 2) << warm.err;
  EXPECT_NE(warm.err.find("--timing"), std::string::npos) << warm.err;
}

// tiny with [check] default = true in place of its reference.
bool CheckedAgainstDefault(std::string& toml) {
  const size_t from = toml.find("reference = "), to = toml.find("rtol = ");
  if (from == std::string::npos || to == std::string::npos) return false;
  toml.replace(from, to - from, "default = true\n");
  return true;
}

TEST(TuneOutput, AnOpWithoutAReferenceIsCheckedAgainstItsDefaultAndWrongConfigsFail) {
  testing::TempDir dir;
  const std::string ops = OpCopy(dir, "tiny", CheckedAgainstDefault);
  ASSERT_FALSE(ops.empty());
  const Output out = Tune(dir, "json", "tiny", ops, "--shape N=65536 --sim-faults wrong=0.3");
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const auto doc = nlohmann::json::parse(out.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << out.out;
  size_t wrong = 0, passed = 0;
  for (const auto& row : doc["results"]) {
    if (row["status"] == "wrong_result") {
      ++wrong;
      EXPECT_NE(row["reason"].get<std::string>().find("the default config's"), std::string::npos) << row;
      EXPECT_NE(row["config"], "BLOCK=256,VEC=1") << "the default is what the others are compared with";
    } else if (row["status"] == "ok") {
      ++passed;
      EXPECT_EQ(row["checked_against"], "default") << row;
    }
  }
  EXPECT_GT(wrong, 0u) << doc["results"].dump();
  EXPECT_GT(passed, 0u);
}

TEST(TuneOutput, EnergyIsMeasuredWhereAskedAndPrintedBesideTheFigures) {
  testing::TempDir dir;
  const std::string ops = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops";
  const Output off = Tune(dir, "json", "tiny", ops, "--shape N=65536");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  for (const auto& row : nlohmann::json::parse(off.out)["results"]) EXPECT_FALSE(row.contains("energy_uj")) << row;

  const Output on = Tune(dir, "table", "tiny", ops, "--shape N=65536 --energy-seconds 0.1");
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("energy_uj"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("energy under a power limit of 700 W"), std::string::npos) << on.out;
  std::string json;
  FILE* p = ::popen((std::string(TUNEFARM_BINARY) + " results --top 0 --format json --store " + dir.Sub("table-store") +
                     " 2>/dev/null").c_str(), "r");
  char buf[4096];
  for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) json.append(buf, n);
  if (p) ::pclose(p);
  const auto rows = nlohmann::json::parse(json, nullptr, false);
  ASSERT_TRUE(rows.is_array() && !rows.empty()) << json;
  std::set<double> powers;
  for (const auto& row : rows) {
    if (row["status"] != "ok") continue;
    ASSERT_TRUE(row.contains("energy_uj")) << row;
    const double power = row["power_w"], energy = row["energy_uj"], median = row["median_us"];
    EXPECT_EQ(row["power_limit_w"], 700.0);
    EXPECT_GE(power, 0.45 * 700);
    EXPECT_LE(power, 0.95 * 700);
    EXPECT_NEAR(energy, power * median, 1e-6 * energy) << "a call's energy is its power over its time";
    powers.insert(power);
  }
  EXPECT_GT(powers.size(), 1u) << "configs draw different power";

  // The winner by each objective: the row of least time, energy or EDP,
  // near-ties within 1% to the smallest config id.
  auto best = [&](const std::string& objective) {
    std::string out;
    FILE* b = ::popen((std::string(TUNEFARM_BINARY) + " best --format json --objective " + objective + " --store " +
                       dir.Sub("table-store") + " 2>&1").c_str(), "r");
    for (size_t n; b && (n = fread(buf, 1, sizeof buf, b)) > 0;) out.append(buf, n);
    if (b) ::pclose(b);
    return nlohmann::json::parse(out, nullptr, false);
  };
  for (const std::string objective : {"time", "energy", "edp"}) {
    const auto winners = best(objective);
    ASSERT_TRUE(winners.is_array() && winners.size() == 1) << objective << ": " << winners.dump();
    auto value = [&](const nlohmann::json& row) {
      const double us = row["median_us"], uj = row["energy_uj"];
      return objective == "time" ? us : objective == "energy" ? uj : uj * us;
    };
    double least = 0;
    for (const auto& row : rows)
      if (row["status"] == "ok" && row["refined"] == winners[0]["refined"])
        least = least > 0 ? std::min(least, value(row)) : value(row);
    EXPECT_LE(value(winners[0]), least * 1.01) << objective << ": " << winners[0];
  }
  EXPECT_FALSE(best("watts").is_array());

  // A sweep whose objective is energy measures energy without being asked
  // and names the winner of least energy.
  const Output by_energy = Tune(dir, "json", "tiny", ops, "--shape N=4096 --objective energy");
  ASSERT_EQ(by_energy.exit_code, 0) << by_energy.err;
  const auto doc = nlohmann::json::parse(by_energy.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << by_energy.out;
  std::vector<nlohmann::json> ran, won;
  for (const auto& row : doc["results"]) {
    if (row["status"] != "ok" || row["shape"] != "N=4096") continue;  // the store's earlier sweep has N=65536
    ASSERT_TRUE(row.contains("energy_uj")) << row;
    ran.push_back(row);
    if (row["winner"] == true) won.push_back(row);
  }
  ASSERT_EQ(won.size(), 1u) << doc["results"].dump();
  double least = 0;
  for (const auto& row : ran)
    if (row["refined"] == won[0]["refined"])
      least = least > 0 ? std::min(least, row["energy_uj"].get<double>()) : row["energy_uj"].get<double>();
  EXPECT_LE(won[0]["energy_uj"].get<double>(), least * 1.01) << won[0];
  const Output table = Tune(dir, "table", "tiny", ops, "--shape N=4096 --objective energy");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("* the winner by energy per call (objective energy)"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("tie: * ties the fastest"), std::string::npos) << "a time rule's note" << table.out;

  const Output bad = Tune(dir, "table", "tiny", ops, "--shape N=65536 --energy-seconds 11");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--energy-seconds"), std::string::npos) << bad.err;
}

TEST(TuneOutput, TableKeepsItsSummaryLinesOnStdout) {
  testing::TempDir dir;
  const Output r = Tune(dir, "table");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* line : {"\nsweep: ", "\ncompile: ", "\nbusy: ", "\nfailures: ", "\nstore:  ", "SIMULATED"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  EXPECT_NE(r.out.find(" fetched; "), std::string::npos) << r.out;
}

// A worker that runs programs as root warns about it; `tune` of ops none of
// which is a program op runs no program, so it does not.
TEST(TuneOutput, RootIsNotWarnedAboutProgramsWhenNoOpIsOne) {
  if (::geteuid() != 0) GTEST_SKIP() << "the warning is for root only";
  testing::TempDir dir;
  const Output r = Tune(dir, "table");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("program ops run as root"), std::string::npos) << r.err;
  // A program op's worker still warns (however its sweep goes).
  const Output program = Tune(dir, "json", "program_sum");
  EXPECT_NE(program.err.find("program ops run as root"), std::string::npos) << program.err;
}

// An op every config of which fails for one reason (a program op whose
// `version` command fails on this host): the cause once, no bundle, exit 1.
TEST(TuneOutput, AnOpWhoseEveryConfigFailsSaysTheCauseOnceAndPublishesNothing) {
  testing::TempDir dir;
  const std::string ops = OpCopy(dir, "program_sum", FailingVersion);
  ASSERT_FALSE(ops.empty());
  for (const char* format : {"table", "json"}) {
    const Output r = Tune(dir, format, "program_sum", ops);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("every config failed, no bundle; 16 of 16 say: compile_error: version: exit code 3: "
                         "torch is missing"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("no valid measurement"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.Sub(std::string(format) + "-bundle.tfb")));
  }
}

// An op whose rules leave no config legal at the shapes asked: tune says
// so in one line (and its JSON document carries it), not as a publish error.
TEST(TuneOutput, AnEmptySpaceIsSaidAsSuch) {
  testing::TempDir dir;
  const std::string ops = OpCopy(dir, "tiny", [](std::string& toml) {
    const size_t at = toml.find("rules = [");
    if (at == std::string::npos) return false;
    toml.insert(at + std::string("rules = [").size(), "\"BLOCK > 1000000\", ");
    return true;
  });
  ASSERT_FALSE(ops.empty());
  const Output r = Tune(dir, "json", "tiny", ops);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string why = "tune: nothing to measure, no bundle: no config of tiny is legal at the shapes asked on "
                          "sim-h100";
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no valid measurement"), std::string::npos) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  EXPECT_NE(doc.value("error", "").find(why), std::string::npos) << r.out;
}

// A table keeps a screenful of rows per key (the winner first); --top 0
// and JSON keep them all.
TEST(TuneOutput, ATableKeepsItsTopRowsPerKey) {
  auto configs_printed = [](const std::string& out) {
    size_t n = 0;
    for (size_t at = out.find("TILE="); at != std::string::npos; at = out.find("TILE=", at + 1)) ++n;
    return n;
  };
  const std::string ops = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops";
  testing::TempDir dir;
  const Output r = Tune(dir, "table", "synthetic", ops, "--shape N=1048576");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("more row(s) left out (--top 10; --top 0 prints every row"), std::string::npos) << r.err;
  EXPECT_LE(configs_printed(r.out), 11u) << r.out;  // ten rows, and a tie note's config
  EXPECT_NE(r.out.find("  * "), std::string::npos) << r.out;  // the winner among them
  testing::TempDir all;
  const Output every = Tune(all, "table", "synthetic", ops, "--shape N=1048576 --top 0");
  ASSERT_EQ(every.exit_code, 0) << every.err;
  EXPECT_GT(configs_printed(every.out), 100u);
  EXPECT_EQ(every.err.find("left out"), std::string::npos) << every.err;
  // `results` and its table keep the same screenful; JSON keeps every row.
  auto results = [&](const std::string& format) {
    Output o;
    const std::string cmd = std::string(TUNEFARM_BINARY) + " results --store " + all.Sub("table-store") +
                            " --format " + format + " 2>" + all.Sub("results.err");
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return o;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
    o.exit_code = ::pclose(p) == 0 ? 0 : 1;
    o.err = testing::ReadFile(all.Sub("results.err"));
    return o;
  };
  const Output table = results("table");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_LE(configs_printed(table.out), 11u) << table.out;
  EXPECT_NE(table.err.find("results: "), std::string::npos) << table.err;
  EXPECT_NE(table.err.find("more row(s) left out (--top 10"), std::string::npos) << table.err;
  EXPECT_GT(configs_printed(results("json").out), 100u);
}

// The same op-wide failure on a searched key: the search stops after its
// first configs with the cause, instead of spending its budget on it.
TEST(TuneOutput, AnOpWideFailureStopsASearchedKeyEarly) {
  testing::TempDir dir;
  const std::string ops = OpCopy(dir, "program_sum", [](std::string& toml) {
    // 4,096 configs: a space to search, not to list.
    const std::string listed = "X = [1, 2, 3, 4]\nY = [1, 2]";
    const size_t x = toml.find(listed);
    if (x == std::string::npos) return false;
    std::string values;
    for (int v = 1; v <= 64; ++v) values += (v > 1 ? ", " : "") + std::to_string(v);
    toml.replace(x, listed.size(), "X = [" + values + "]\nY = [" + values + "]");
    return FailingVersion(toml);
  });
  ASSERT_FALSE(ops.empty());
  const uint64_t budget = 1000;
  const Output r = Tune(dir, "json", "program_sum", ops,
                        "--shape N=16384 --strategy random --budget " + std::to_string(budget));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("the search stops: its first "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("configs all failed the same way, the op's failure rather than a config's: compile_error: "
                       "version: exit code 3: torch is missing"),
            std::string::npos)
      << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  // What ran: the first batches in flight, far from the budget.
  const uint64_t failed = doc["failures"].value("compile_error", uint64_t{0});
  EXPECT_GE(failed, kOpWideFailureRows);
  EXPECT_LT(failed, budget / 2) << r.err;
}

}  // namespace
}  // namespace tune
