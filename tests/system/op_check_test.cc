// `tunefarm op check` as a person runs it on an op folder: counts that match
// the farm's own enumeration, the rule that empties a space named, compile
// failures with their whole log and a failing exit.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdio.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>

#include "store/result_store.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "opspec/config_space.h"
#include "base/known_gpus.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

struct CommandRun {
  int exit_code = -1;
  std::string output;
};

CommandRun Tunefarm(const std::string& args) {
  CommandRun r;
  FILE* p = ::popen((std::string(TUNEFARM_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

CommandRun OpCheck(const std::string& args) { return Tunefarm("op check " + args); }

const std::string kOps = std::string(TUNEFARM_SOURCE_DIR) + "/ops";

TEST(OpCheck, CountsLegalConfigsAsTheFarmEnumeratesThemAndCompilesASample) {
  const CommandRun r = OpCheck(kOps + "/gemm --sample 1 --gpu h100-80gb-hbm3 --gpu l40s");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto spec = LoadOpSpec(kOps + "/gemm");
  ASSERT_TRUE(spec.ok());
  for (const char* model : {"h100-80gb-hbm3", "l40s"}) {
    auto configs = EnumerateConfigs(*spec, *FindKnownGpu(model));
    ASSERT_TRUE(configs.ok());
    const std::string line = std::string(model);
    const size_t at = r.output.find("  " + line + " ");
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string row = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(row.find(" " + std::to_string(configs->size()) + " legal"), std::string::npos) << row;
  }
  EXPECT_EQ(r.output.find("a100-sxm4-80gb"), std::string::npos) << "--gpu limits the models";
  EXPECT_NE(r.output.find("prunes"), std::string::npos);
  // --format json: the same counts and rules in one document.
  const CommandRun j = OpCheck(kOps + "/gemm --sample 1 --gpu h100-80gb-hbm3 --format json");
  EXPECT_EQ(j.exit_code, 0) << j.output;
  const auto doc = nlohmann::json::parse(j.output, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << j.output;
  EXPECT_EQ(doc["ok"], true);
  ASSERT_EQ(doc["models"].size(), 1u);
  EXPECT_EQ(doc["models"][0]["legal"].get<size_t>(), EnumerateConfigs(*spec, *FindKnownGpu("h100-80gb-hbm3"))->size());
  EXPECT_FALSE(doc["models"][0]["pruned_by"].empty());
  EXPECT_EQ(doc["params"][0]["name"], spec->axes[0].name);
  EXPECT_EQ(doc["baseline"], "cublaslt");
}

// With --coordinator, the GPU models of a farm's live workers are counted
// too, with the limits their workers reported.
TEST(OpCheck, CountsLegalConfigsOnTheLiveModelsOfAFarm) {
  testing::TempDir dir;
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
  testing::Child coordinator({TUNEFARM_BINARY, "coordinator", "--bind", endpoint, "--store", dir.Sub("store")},
                             dir.Sub("coordinator.log"));
  testing::Child worker({TUNEFARM_BINARY, "worker", "--connect", endpoint, "--backend", "sim", "--sim-models", "a100"},
                        dir.Sub("worker.log"));
  auto spec = LoadOpSpec(kOps + "/gemm");
  ASSERT_TRUE(spec.ok());
  CommandRun r;
  for (int i = 0; i < 50; ++i) {  // until the worker said hello
    r = OpCheck(kOps + "/gemm --sample 1 --arch sm_80 --gpu sim-a100 --coordinator " + endpoint);
    if (r.output.find("sim-a100") != std::string::npos) break;
    ::usleep(100000);
  }
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("  sim-a100 ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string row = r.output.substr(at, r.output.find('\n', at) - at);
  EXPECT_NE(row.find("(live in the farm)"), std::string::npos) << row;
  EXPECT_NE(row.find("sm_80"), std::string::npos) << row;
  const CommandRun nowhere = OpCheck(kOps + "/gemm --coordinator tcp://127.0.0.1:" + std::to_string(testing::FreePort()));
  EXPECT_EQ(nowhere.exit_code, 1) << nowhere.output;
  EXPECT_NE(nowhere.output.find("--coordinator"), std::string::npos) << nowhere.output;
}

TEST(OpCheck, NamesTheRuleThatEmptiesASpaceAndFailsOnABrokenOp) {
  tune::testing::TempDir dir;
  const fs::path op = fs::path(dir.path()) / "gemm";
  fs::copy(kOps + "/gemm", op, fs::copy_options::recursive);
  std::string toml;
  {
    std::ifstream in(op / "op.toml");
    toml.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string rules = "rules = [";
  const size_t at = toml.find(rules);
  ASSERT_NE(at, std::string::npos);
  toml.insert(at + rules.size(), "\"BM >= 1024\", ");
  std::ofstream(op / "op.toml") << toml;
  CommandRun r = OpCheck(op.string() + " --gpu h100-80gb-hbm3");
  EXPECT_NE(r.output.find("the space is empty: rule[0] 'BM >= 1024' rejects every config here"), std::string::npos)
      << r.output;
  // No model checked has a config: the check fails, saying so.
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no GPU model checked has a legal config"), std::string::npos) << r.output;

  // A default the rules reject on a model is named there.
  {
    std::string shipped;
    std::ifstream in(kOps + "/gemm/op.toml");
    shipped.assign(std::istreambuf_iterator<char>(in), {});
    const size_t d = shipped.find(rules);
    ASSERT_NE(d, std::string::npos);
    shipped.insert(d + rules.size(), "\"BM <= 64\", ");  // the default has BM = 128
    std::ofstream(op / "op.toml") << shipped;
  }
  r = OpCheck(op.string() + " --gpu h100-80gb-hbm3 --sample 1");
  EXPECT_NE(r.output.find("the default config BK=64,BM=128,BN=256,GROUP_M=8,STAGES=3,WM=2,WN=4 is outside the space "
                          "here: the rules reject it"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("no GPU model checked has a legal config"), std::string::npos) << r.output;

  // A source that does not compile: every compile fails with its whole log.
  std::ofstream(op / "gemm.cu", std::ios::app) << "\nthis_is_not_cuda x y z;\n";
  fs::copy(kOps + "/gemm/op.toml", op / "op.toml", fs::copy_options::overwrite_existing);
  r = OpCheck(op.string() + " --gpu h100-80gb-hbm3 --sample 1");
  if (r.output.find("built without NVRTC") != std::string::npos) GTEST_SKIP() << "no NVRTC in this build";
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("compile_error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("this_is_not_cuda"), std::string::npos) << "the whole log: " << r.output;

  // An op.toml that does not parse: one line naming the field.
  std::ofstream(op / "op.toml") << "[op]\nname = \"x\"\n";
  r = OpCheck(op.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("op.toml: "), std::string::npos) << r.output;
}

// A header the source includes that is a link to a file of the host (a
// key) is refused by `op check` and by `submit`, which read the op folder
// the same way: one line naming the link, and the key is never read.
TEST(OpCheck, ASymbolicLinkInTheOpFolderIsRefusedByOpCheckAndSubmit) {
  tune::testing::TempDir dir;
  const fs::path op = fs::path(dir.path()) / "ops" / "gemm";
  fs::create_directories(op.parent_path());
  fs::copy(kOps + "/gemm", op, fs::copy_options::recursive);
  std::ofstream(op / "gemm.cu", std::ios::app) << "\n#include \"helper.cuh\"\n";
  dir.Write("id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- host secret\n");
  fs::create_symlink(dir.Sub("id_ed25519"), op / "helper.cuh");
  const std::string refusal = "'" + (op / "helper.cuh").string() + "' is a symbolic link";

  CommandRun r = OpCheck(op.string() + " --gpu h100-80gb-hbm3");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(refusal), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("host secret"), std::string::npos) << r.output;

  // submit reads the package before it reaches for a coordinator.
  dir.Write("sweep.toml", "[sweep]\nname = \"s\"\nops = [\"gemm\"]\ndtypes = [\"f16\"]\ngpus = [\"*\"]\n"
                          "shapes = [{ M = 128, N = 128, K = 128 }]\n");
  r = Tunefarm("submit " + dir.Sub("sweep.toml") + " --ops-dir " + (fs::path(dir.path()) / "ops").string() +
               " --coordinator tcp://127.0.0.1:" + std::to_string(testing::FreePort()));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(refusal), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("host secret"), std::string::npos) << r.output;
}

// A kernel whose parameters are not the [[args]] fails op check with both
// lists; a source that does not compile fails a sim `tune` too, as on a GPU,
// where this build has NVRTC.
TEST(OpCheck, AnOpThatCannotRunFailsOpCheckAndItsSimTune) {
  tune::testing::TempDir dir;
  const fs::path ops = fs::path(dir.path()) / "ops";
  const fs::path op = ops / "gemm";
  fs::create_directories(ops);
  fs::copy(kOps + "/gemm", op, fs::copy_options::recursive);
  std::ofstream(op / "op.toml", std::ios::app) << "\n[[args]]\nname = \"EXTRA\"\nscalar = \"i32\"\nvalue = \"1\"\n";
  CommandRun r = OpCheck(op.string() + " --gpu h100-80gb-hbm3 --sample 1");
  if (r.output.find("built without NVRTC") != std::string::npos) GTEST_SKIP() << "no NVRTC in this build";
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kernel 'gemm' takes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[[args]] declares"), std::string::npos) << r.output;
  // The same facts as one JSON document: each compile's status and message.
  const CommandRun j = Tunefarm("op check " + op.string() + " --gpu h100-80gb-hbm3 --sample 1 --format json 2>/dev/null");
  EXPECT_EQ(j.exit_code, 1);
  const auto doc = nlohmann::json::parse(j.output, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << j.output;
  EXPECT_EQ(doc["op"], "gemm");
  EXPECT_EQ(doc["ok"], false);
  EXPECT_EQ(doc["models"][0]["gpu_model"], "h100-80gb-hbm3");
  EXPECT_GT(doc["models"][0]["legal"].get<int>(), 0);
  bool named = false;
  for (const auto& c : doc["compiles"])
    named |= c["status"] == "compile_error" && c["message"].get<std::string>().find("[[args]] declares") != std::string::npos;
  EXPECT_TRUE(named) << j.output;

  fs::copy(kOps + "/gemm/op.toml", op / "op.toml", fs::copy_options::overwrite_existing);
  std::ofstream(op / "gemm.cu", std::ios::app) << "\nthis_is_not_cuda x y z;\n";
  const std::string db = (fs::path(dir.path()) / "db").string();
  r = Tunefarm("tune --backend sim --ops-dir " + ops.string() + " --op gemm --dtype f16 --shape M=512,N=512,K=512" +
               " --store " + db + " --bundle " + dir.path() + "/b --unsigned --quiet --cache-dir " + dir.path() + "/cache");
  EXPECT_NE(r.output.find("compile_error: sim: does not compile for sm_90"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("failures: none"), std::string::npos) << r.output;
}

// The table keeps one line per config; --config picks one (by id or params,
// in any order) and --log prints its whole failure message.
TEST(ResultsCommand, ShowsOneConfigsWholeFailureLog) {
  tune::testing::TempDir dir;
  const std::string store = dir.path() + "/db";
  CommandRun r = Tunefarm("tune --op gemm --dtype f16 --shape M=256,N=256,K=256 --ops-dir " + kOps + " --store " +
                          store + " --bundle " + dir.path() + "/b --backend sim --sim-faults compile=0.3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Tunefarm("results --store " + store + " --format csv");
  ASSERT_EQ(r.exit_code, 0);
  ASSERT_NE(r.output.find("compile_error"), std::string::npos) << r.output;
  r = Tunefarm("results --store " + store + " --log");
  const size_t header = r.output.find("\n== sim-");
  ASSERT_NE(header, std::string::npos) << r.output;
  // The second line of the message, which the table leaves out.
  EXPECT_NE(r.output.find("gemm.cu(1): error: simulated compile error for f16", header), std::string::npos) << r.output;
  // One config by its params, in another order than stored.
  const std::string rest = r.output.substr(header + 4);
  const size_t from = rest.find("M=256,N=256,K=256 ") + 18;
  const std::string params = rest.substr(from, rest.find(':') - from);
  std::string reversed;
  for (size_t end = params.size(); end > 0;) {
    const size_t start = params.rfind(',', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    reversed += (reversed.empty() ? "" : ",") + params.substr(from, end - from);
    end = start == std::string::npos ? 0 : start;
  }
  r = Tunefarm("results --store " + store + " --config " + reversed + " --log");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("== sim-h100 gemm f16 M=256,N=256,K=256 " + params + ": compile_error"), std::string::npos)
      << reversed << "\n" << r.output;
  r = Tunefarm("results --store " + store + " --config nosuchconfig");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no results match the filter"), std::string::npos) << r.output;
}

// A sweep's profile_top profiles each key's fastest in its confirm unit (the
// sim backend's profiles are simulated); the profiles travel through the
// coordinator into the store, and results, best and compare show them.
TEST(ResultsCommand, ShowsTheProfilesOfASweepsFastest) {
  tune::testing::TempDir dir;
  const std::string store = dir.path() + "/db";
  CommandRun r = Tunefarm("tune --op rmsnorm --dtype f16 --shape ROWS=4096,N=1024 --ops-dir " + kOps + " --store " +
                          store + " --bundle " + dir.path() + "/b --backend sim --profile-top 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Tunefarm("results --store " + store);
  size_t profiles = 0;
  for (size_t at = r.output.find("profile: "); at != std::string::npos; at = r.output.find("profile: ", at + 1)) ++profiles;
  // The fastest two, and those within the tie window of the fastest (one
  // of them may be the winner): at most the confirm set (twice the top).
  EXPECT_GE(profiles, 2u) << r.output;
  EXPECT_LE(profiles, 4u) << r.output;
  EXPECT_NE(r.output.find("-bound: memory "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(SIMULATED)"), std::string::npos) << r.output;
  r = Tunefarm("best --store " + store + " --format json");
  EXPECT_NE(r.output.find("\"bottleneck\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"tool\":\"sim\""), std::string::npos) << r.output;
  r = Tunefarm("compare --store " + store);
  EXPECT_NE(r.output.find("-bound: "), std::string::npos) << r.output;
}

// A space over the coordinator's bound on raw config points (4,000,000) is
// refused by `tune` naming the op, its size and the flag; --max-raw-configs
// raises the bound, and a searching strategy measures a few of its configs.
TEST(TuneCommand, ASpaceOverTheRawPointsBoundIsRefusedUnlessTheFlagRaisesIt) {
  tune::testing::TempDir dir;
  const fs::path ops = fs::path(dir.path()) / "ops";
  const fs::path op = ops / "wide";
  fs::create_directories(ops);
  fs::copy(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic", op, fs::copy_options::recursive);
  // 600 points of the synthetic op's axes times two axes of 100: 6,000,000.
  std::ifstream in(op / "op.toml");
  std::string toml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::string axis;
  for (int i = 0; i < 100; ++i) axis += (i ? ", " : "") + std::to_string(i);
  for (auto [from, to] : {std::pair<std::string, std::string>{"name    = \"synthetic\"", "name    = \"wide\""},
                          {"PAD = 0 }", "PAD = 0, X = 0, Y = 0 }"},
                          {"PAD    = [0, 1, 2, 3]\n", "PAD    = [0, 1, 2, 3]\nX = [" + axis + "]\nY = [" + axis + "]\n"}}) {
    const size_t at = toml.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    toml.replace(at, from.size(), to);
  }
  std::ofstream(op / "op.toml", std::ios::trunc) << toml;
  auto spec = LoadOpSpec(op.string());
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(RawSpaceSize(*spec), 6'000'000u);

  const std::string tune = "tune --backend sim --ops-dir " + ops.string() +
                           " --op wide --dtype f32 --shape N=1024 --strategy random --budget 4 --unsigned --quiet" +
                           " --store " + dir.path() + "/db --bundle " + dir.path() + "/b --cache-dir " + dir.path() +
                           "/cache";
  CommandRun r = Tunefarm(tune);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("op 'wide' has a config space of 6000000 raw points, more than this coordinator's limit "
                          "of 4000000 (--max-raw-configs)"),
            std::string::npos)
      << r.output;
  r = Tunefarm(tune + " --max-raw-configs 10000000");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("failures: none"), std::string::npos) << r.output;
  r = Tunefarm("results --store " + dir.path() + "/db --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wide"), std::string::npos) << r.output;
}

// A local farm has this host's devices only: a sweep file (as `sweep
// from-misses` writes one) naming a GPU model the host lacks is measured on
// the models it has, with a line naming the rest; naming none of them is an
// error at once, never a wait for devices that cannot join.
TEST(TuneCommand, AModelThisHostLacksIsNamedNeverWaitedFor) {
  tune::testing::TempDir dir;
  auto sweep = [&](const std::string& name, const std::string& gpus) {
    const std::string path = dir.path() + "/" + name + ".toml";
    std::ofstream(path) << "[sweep]\nname = \"" << name << "\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                        << "gpus = [" << gpus << "]\nstrategy = \"random\"\nbudget = 3\nshapes = [ { N = 1024 } ]\n";
    return path;
  };
  const std::string tune = "tune --backend sim --sim-models h100 --ops-dir " + std::string(TUNEFARM_SOURCE_DIR) +
                           "/tests/data/ops --unsigned --quiet --store " + dir.path() + "/db --bundle " + dir.path() +
                           "/b --sweep ";
  CommandRun r = Tunefarm(tune + sweep("elsewhere", "\"sim-a100\", \"l40s\""));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the sweep's gpus (sim-a100, l40s) are not on this host (it has sim-h100)"),
            std::string::npos)
      << r.output;
  r = Tunefarm(tune + sweep("some", "\"sim-a100\", \"sim-h100\""));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("this host has no sim-a100 (named in the sweep's gpus): measuring on sim-h100 only"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("failures: none"), std::string::npos) << r.output;
}

// A budget that `auto` did not use is named: the synthetic op's 600 legal
// configs are measured whole whatever the budget.
TEST(TuneCommand, ABudgetAutoDidNotUseIsNamed) {
  tune::testing::TempDir dir;
  const CommandRun r = Tunefarm("tune --backend sim --sim-models h100 --ops-dir " + std::string(TUNEFARM_SOURCE_DIR) +
                                "/tests/data/ops --op synthetic --dtype f32 --shape N=1024 --budget 5 --unsigned --quiet"
                                " --one-pass --store " + dir.path() + "/db --bundle " + dir.path() + "/b");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("budget: 1 key(s) measured whole (up to 600 legal configs): auto measures every config of "
                          "a space it covers; the budget of 5 applies to searched keys"),
            std::string::npos)
      << r.output;
}

// Ctrl-C in `tune`: its coordinator is the process's own, so the sweep is
// cancelled, not said to go on; what was stored stays, the key's coverage
// says partial, and the exit code is 130.
TEST(TuneCommand, AnInterruptedTuneCancelsItsSweepKeepsItsRowsAndSaysSo) {
  tune::testing::TempDir dir;
  std::vector<std::string> args = {TUNEFARM_BINARY, "tune", "--backend", "sim", "--sim-models", "h100", "--ops-dir",
                                   std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--op", "synthetic",
                                   "--dtype", "f32", "--one-pass", "--unsigned", "--store", dir.path() + "/db",
                                   "--bundle", dir.path() + "/b", "--configs-per-unit", "16",
                                   "--sim-faults", "busy=0.002"};
  // Units of 16 configs, each config 2 ms busy: a key spans many units and at
  // least 1.2 s, so the interrupt, sent at its first row, finds it part-measured
  // however fast the host.
  for (int i = 1; i <= 40; ++i) args.insert(args.end(), {"--shape", "N=" + std::to_string(1024 + 64 * i)});
  tune::testing::Child tune(args, dir.path() + "/tune.log");
  auto first_row = [&]() -> std::optional<Measurement> {
    auto store = ResultStore::OpenReadOnly(dir.path() + "/db");
    if (!store.ok()) return std::nullopt;
    std::optional<Measurement> row;
    (void)(*store)->Scan({}, [&](const Measurement& m) {
      row = m;
      return false;
    });
    return row;
  };
  for (int i = 0; i < 600 && !first_row(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  tune.Signal(SIGINT);
  EXPECT_EQ(tune.Wait(120), 130) << tune::testing::ReadFile(dir.path() + "/tune.log");
  const std::string said = tune::testing::ReadFile(dir.path() + "/tune.log");
  EXPECT_NE(said.find("tune: interrupted: sweep "), std::string::npos) << said;
  EXPECT_NE(said.find("(its keys' coverage says partial)"), std::string::npos) << said;
  EXPECT_EQ(said.find("goes on at the coordinator"), std::string::npos) << said;
  // Every key with rows has its coverage; those the sweep had not finished say partial.
  auto store = ResultStore::OpenReadOnly(dir.path() + "/db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  std::map<std::string, Measurement> keys;  // by shape
  ASSERT_TRUE((*store)->Scan({}, [&](const Measurement& m) {
                        keys.emplace(m.shape, m);
                        return true;
                      }).ok());
  ASSERT_FALSE(keys.empty());
  // The count it says is the store's: a batch on its way when the cancel
  // was answered is in it too.
  size_t rows = 0;
  ASSERT_TRUE((*store)->Scan({}, [&](const Measurement&) { return ++rows, true; }).ok());
  EXPECT_NE(said.find("cancelled with " + std::to_string(rows) + " of "), std::string::npos) << rows << " rows: " << said;
  size_t partial = 0;
  for (const auto& [shape, m] : keys) {
    auto coverage = (*store)->GetCoverage(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash);
    ASSERT_TRUE(coverage.ok() && *coverage) << shape << ": no coverage";
    partial += (*coverage)->state == KeyCoverage::State::kPartial;
  }
  EXPECT_GE(partial, 1u) << keys.size() << " keys with rows, none partial";
  // A bundle of them says which keys it ships part-measured.
  const CommandRun published =
      Tunefarm("publish --store " + dir.path() + "/db --out " + dir.path() + "/b --unsigned");
  EXPECT_EQ(published.exit_code, 0) << published.output;
  EXPECT_NE(published.output.find("key(s) partly measured (a sweep cancelled or cut short)"), std::string::npos)
      << published.output;
}

// A misspelt command, option or op gets one line with the program's prefix
// and the nearest name; `op list` lists an ops folder.
// `coordinator --config FILE`: the file's options as if given, the command
// line winning over them; an option the command lacks is refused naming the
// file.
TEST(CommandLine, AConfigFileGivesTheLongRunningCommandsTheirOptions) {
  tune::testing::TempDir dir;
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  std::ofstream(dir.path() + "/c.toml") << "# a coordinator's options\nbind = \"" << endpoint
                                        << "\"\nstore = \"" << dir.path() << "/from-file\"\nlog-format = \"json\"\n";
  {
    tune::testing::Child c({TUNEFARM_BINARY, "coordinator", "--config", dir.path() + "/c.toml", "--store",
                            dir.path() + "/from-line"},
                           dir.path() + "/c.log");
    std::string log;
    for (int i = 0; i < 200 && log.find("\"serving\"") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      log = tune::testing::ReadFile(dir.path() + "/c.log");
    }
    EXPECT_NE(log.find("\"endpoint\":\"" + endpoint + "\""), std::string::npos) << log;
    EXPECT_NE(log.find("\"store\":\"" + dir.path() + "/from-line\""), std::string::npos) << "the command line wins: "
                                                                                          << log;
    EXPECT_EQ(c.Stop(), 0) << log;
  }
  std::ofstream(dir.path() + "/bad.toml") << "bnd = \"x\"\n";
  const CommandRun r = Tunefarm("coordinator --config " + dir.path() + "/bad.toml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("(did you mean --bind?) (with the options of --config " + dir.path() + "/bad.toml)"),
            std::string::npos)
      << r.output;
}

TEST(CommandLine, AMisspeltCommandOptionOrOpNamesTheNearestOne) {
  CommandRun r = Tunefarm("tunee");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("tunefarm: unknown command 'tunee' (did you mean 'tune'?)", 0), 0u) << r.output;
  r = Tunefarm("op chek x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("tunefarm op: unknown command 'chek' (did you mean 'check'?)", 0), 0u) << r.output;
  r = Tunefarm("results --stor x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("tunefarm results: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("(did you mean --store?)"), std::string::npos) << r.output;
  const std::string ops = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops";
  r = Tunefarm("tune --backend sim --ops-dir " + ops + " --op synthetik --dtype f32 --shape N=1024");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no op 'synthetik' in " + ops + " (did you mean 'synthetic'?)"), std::string::npos)
      << r.output;
  r = Tunefarm("op list --ops-dir " + ops + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json list = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(list.is_array()) << r.output;
  bool synthetic = false;
  for (const auto& op : list)
    if (op["op"] == "synthetic") {
      synthetic = true;
      EXPECT_EQ(op["kind"], "cuda");
      EXPECT_EQ(op["raw_configs"].get<uint64_t>(), 600u);
    }
  EXPECT_TRUE(synthetic) << r.output;
}

}  // namespace
}  // namespace tune
