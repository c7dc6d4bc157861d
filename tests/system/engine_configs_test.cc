// Per-device config files (publish/engine_configs.h): `tunefarm export`
// writes a store's winners in the layout vLLM's and SGLang's fused-MoE
// kernels read, `tunefarm import-configs` turns such files back into a
// sweep that times their configs on their shapes, and a malformed file is
// refused in one line naming the file and the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "publish/engine_configs.h"
#include "publish/publish.h"
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

const std::string kOps = std::string(TUNEFARM_SOURCE_DIR) + "/ops";

Measurement Winner(const std::string& shape, const std::string& device, int64_t bm) {
  Measurement m;
  m.gpu_model = "h100-80gb-hbm3";
  m.device_name = device;
  m.op = "fused_moe";
  m.dtype = "f16";
  m.shape = shape;
  m.config.params = {{"BLOCK_SIZE_M", bm}, {"num_warps", 4}};
  m.median_us = 10;
  m.check_passed = true;
  m.samples = 10;
  return m;
}

TEST(EngineConfigs, WinnersGroupByDeviceAndFixedDimsInVllmsLayout) {
  size_t skipped = 0;
  auto files = EngineFiles({Winner("M=1,E=8,N=14336", "NVIDIA H100 80GB HBM3", 16),
                            Winner("M=64,E=8,N=14336", "NVIDIA H100 80GB HBM3", 64),
                            Winner("M=1,E=16,N=14336", "NVIDIA H100 80GB HBM3", 32),
                            Winner("E=8,N=7", "NVIDIA H100 80GB HBM3", 32)},
                           "M", kEngineFileName, &skipped);
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(skipped, 1u) << "a shape without M is left out";
  ASSERT_EQ(files->size(), 2u);
  const EngineFile& f = (*files)[1];
  EXPECT_EQ(f.name, "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json");
  const nlohmann::json doc = nlohmann::json::parse(EngineFileJson(f));
  EXPECT_EQ(doc["1"]["BLOCK_SIZE_M"], 16);
  EXPECT_EQ(doc["64"]["BLOCK_SIZE_M"], 64);
  EXPECT_EQ(doc["64"]["num_warps"], 4);
  EXPECT_EQ(DimsOfEngineFileName("/x/" + f.name), (NamedValues{{"E", 8}, {"N", 14336}}));
  // A kernel keyed by its one dim: no stray comma before device_name.
  auto alone = EngineFiles({Winner("n_cols=781", "NVIDIA H100 80GB HBM3", 16)}, "n_cols", kEngineFileName, &skipped);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ((*alone)[0].name, "device_name=NVIDIA_H100_80GB_HBM3.json");
  // Two kernels under one name, a field no format knows, a path: refused.
  auto clash = EngineFiles({Winner("M=1,E=8,N=1", "A", 16), Winner("M=1,E=8,N=1", "A", 16)}, "M", "{device}.json",
                           &skipped);
  ASSERT_TRUE(clash.ok());  // the same key twice is one file
  Measurement other = Winner("M=1,E=9,N=1", "A", 16);
  clash = EngineFiles({Winner("M=1,E=8,N=1", "A", 16), other}, "M", "{device}.json", &skipped);
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("two kernels would write A.json"), std::string::npos);
  EXPECT_NE(EngineFiles({other}, "M", "{nope}.json", &skipped).status().message().find("{nope}"), std::string::npos);
  EXPECT_NE(EngineFiles({other}, "M", "../{device}", &skipped).status().message().find("not a plain file name"),
            std::string::npos);
}

TEST(EngineConfigs, AFileFromOutsideIsReadAsUntrusted) {
  const std::vector<std::string> params = {"BM", "num_warps"};
  auto ok = ReadEngineFile(R"({"1": {"BM": 64, "num_warps": 4}, "128": {"BM": 128, "num_warps": 8}})", "f.json",
                           params);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 2u);
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"[1]", "f.json: not a JSON object"},
           {"{", "f.json: not JSON"},
           {R"({"x": {"BM": 1}})", "f.json: \"x\": the key is not an integer"},
           {R"({"0": {"BM": 1}})", "f.json: \"0\": the key is not an integer"},
           {R"({"1e3": {"BM": 1}})", "the key is not an integer"},
           {R"({"1": {"BM": 1.5}})", "\"1\".BM must be an integer"},
           {R"({"1": {"BX": 1}})", "\"1\".BX: no param of the op (it has BM, num_warps)"},
           {R"({"1": {}})", "an empty config"},
           {"{}", "no entries"}}) {
    auto r = ReadEngineFile(text, "f.json", params);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << text << ": " << r.status().message();
  }
}

// A store's winners through export and back through import-configs: the
// sweep it writes times exactly the winners' configs on their shapes.
TEST(EngineConfigs, ExportAndImportConfigsRoundTripAStoresWinners) {
  TempDir dir;
  const CommandRun tuned = Tunefarm(
      dir, {"tune", "--backend", "sim", "--ops-dir", kOps, "--op", "gemm", "--dtype", "f16", "--shape",
            "M=16,N=4096,K=4096", "--shape", "M=64,N=4096,K=4096", "--shape", "M=16,N=8192,K=4096", "--strategy",
            "random", "--budget", "4", "--seed", "5", "--one-pass", "--quiet", "--unsigned", "--store",
            dir.path() + "/s", "--bundle", dir.path() + "/b"});
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  const CommandRun exported = Tunefarm(dir, {"export", "--store", dir.path() + "/s", "--op", "gemm", "--key", "M",
                                             "--out", dir.path() + "/engine", "--format", "json"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::map<std::string, std::string> winners;  // shape -> config
  {
    auto store = ResultStore::OpenReadOnly(dir.path() + "/s");
    ASSERT_TRUE(store.ok());
    auto w = Winners(**store, ResultFilter{});
    ASSERT_TRUE(w.ok());
    for (const Measurement& m : *w) winners[m.shape] = m.config.Canonical();
  }
  ASSERT_EQ(winners.size(), 3u);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/engine")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(std::filesystem::path(files[0]).filename(), "N=4096,K=4096,device_name=Simulated_H100_SXM.json");
  const nlohmann::json doc = nlohmann::json::parse(ReadFile(files[0]));
  EXPECT_EQ(doc.size(), 2u) << doc;  // M=16 and M=64
  // The tune's bundle ships the same winners: its export writes the same files.
  const CommandRun from_bundle = Tunefarm(dir, {"export", "--bundle", dir.path() + "/b.tfb", "--op", "gemm", "--key",
                                                "M", "--out", dir.path() + "/engine-bundle"});
  ASSERT_EQ(from_bundle.exit_code, 0) << from_bundle.output;
  for (const std::string& f : files)
    EXPECT_EQ(ReadFile(dir.path() + "/engine-bundle/" + std::filesystem::path(f).filename().string()), ReadFile(f))
        << f;
  std::vector<std::string> args = {"import-configs"};
  args.insert(args.end(), files.begin(), files.end());
  for (std::string a : {"--op", "gemm", "--key", "M", "--ops-dir", kOps.c_str(), "--gpus", "sim-h100", "--out"})
    args.push_back(a);
  args.push_back(dir.path() + "/again.toml");
  const CommandRun imported = Tunefarm(dir, args);
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  const CommandRun retimed =
      Tunefarm(dir, {"tune", "--backend", "sim", "--ops-dir", kOps, "--sweep", dir.path() + "/again.toml", "--one-pass",
                     "--quiet", "--unsigned", "--store", dir.path() + "/s2", "--bundle", dir.path() + "/b2"});
  ASSERT_EQ(retimed.exit_code, 0) << retimed.output << ReadFile(dir.path() + "/again.toml");
  std::set<std::string> shapes, configs, wanted;
  for (const auto& [shape, config] : winners) wanted.insert(config);
  auto store = ResultStore::OpenReadOnly(dir.path() + "/s2");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Scan(ResultFilter{}, [&](const Measurement& m) {
                        shapes.insert(m.shape);
                        configs.insert(m.config.Canonical());
                        EXPECT_EQ(m.proposer, "listed/1");
                        return true;
                      }).ok());
  EXPECT_EQ(shapes, (std::set<std::string>{"M=16,N=4096,K=4096", "M=64,N=4096,K=4096", "M=16,N=8192,K=4096"}));
  EXPECT_EQ(configs, wanted);
  // --retime: the same files measured again on that store, every row
  // replaced by one of the new sweep.
  std::set<std::string> first_sweeps;
  ASSERT_TRUE((*store)->Scan(ResultFilter{}, [&](const Measurement& m) {
                        first_sweeps.insert(m.sweep_id);
                        return true;
                      }).ok());
  store->reset();
  args.back() = dir.path() + "/retime.toml";
  args.push_back("--retime");
  ASSERT_EQ(Tunefarm(dir, args).exit_code, 0);
  EXPECT_NE(ReadFile(dir.path() + "/retime.toml").find("\nretime = true"), std::string::npos);
  const CommandRun again =
      Tunefarm(dir, {"tune", "--backend", "sim", "--ops-dir", kOps, "--sweep", dir.path() + "/retime.toml",
                     "--one-pass", "--quiet", "--unsigned", "--store", dir.path() + "/s2", "--bundle", dir.path() + "/b3"});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  store = ResultStore::OpenReadOnly(dir.path() + "/s2");
  ASSERT_TRUE(store.ok());
  size_t rows = 0;
  ASSERT_TRUE((*store)->Scan(ResultFilter{}, [&](const Measurement& m) {
                        EXPECT_FALSE(first_sweeps.count(m.sweep_id)) << m.config_id << " was not measured again";
                        ++rows;
                        return true;
                      }).ok());
  EXPECT_GT(rows, 0u);

  // A file from outside with a field the op lacks: one line, nothing written.
  const std::string bad = dir.path() + "/N=1,K=2,device_name=X.json";
  {
    std::ofstream(bad) << R"({"16": {"BM": 64, "BOGUS": 1}})";
  }
  const CommandRun refused = Tunefarm(dir, {"import-configs", bad, "--op", "gemm", "--key", "M", "--ops-dir", kOps,
                                            "--out", dir.path() + "/never.toml"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find(bad + ": \"16\".BOGUS: no param of the op"), std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/never.toml"));
}

}  // namespace
}  // namespace tune
