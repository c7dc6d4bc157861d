// store export / import: two farms' stores merged and merged again with
// nothing doubled, provenance and cubin witnesses kept, and hostile files
// refused before anything is written.
#include "store/store_transfer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/types.h"
#include "opspec/op_definition.h"
#include "store/records.h"
#include "support/cubin.h"
#include "support/temp_dir.h"

namespace tune {
namespace {

using tune::testing::TempDir;

Measurement Row(const std::string& gpu, const std::string& hash, int64_t bm, double us, const std::string& worker) {
  Measurement m;
  m.gpu_model = gpu;
  m.op = "gemm";
  m.dtype = "f16";
  m.shape = "M=64,N=64,K=64";
  m.kernel_hash = hash;
  m.config = Config{{{"BM", bm}, {"SCHEDULE", ParamValue::String("stream_k")}}};
  m.config_id = m.config.Id();
  m.backend = "cuda";
  m.check_passed = true;
  m.samples = 10;
  m.median_us = m.mean_us = m.min_us = m.max_us = us;
  m.worker = worker;
  m.sweep_id = "sweep-of-" + worker;
  m.unix_time = 1764000000;
  return m;
}

std::unique_ptr<ResultStore> Open(const std::string& path) {
  auto s = ResultStore::Open(path);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<Measurement> All(ResultStore& s) {
  std::vector<Measurement> out;
  EXPECT_TRUE(s.Scan(ResultFilter{}, [&](const Measurement& m) {
                 out.push_back(m);
                 return true;
               }).ok());
  return out;
}

TEST(StoreTransfer, TwoFarmsMergeAndMergeAgainWithNothingDoubled) {
  TempDir dir;
  auto lab = Open(dir.Sub("lab")), cloud = Open(dir.Sub("cloud")), merged = Open(dir.Sub("merged"));
  ASSERT_TRUE(lab && cloud && merged);
  // The lab's H200s; the cloud's H100s, one key of which under the same
  // kernel hash as the lab (kept once) and one under another (kept beside).
  ASSERT_TRUE(lab->Put(Row("h200", "kh1", 64, 10, "lab-1")).ok());
  ASSERT_TRUE(lab->Put(Row("h100-80gb-hbm3", "kh1", 128, 20, "lab-2")).ok());
  ASSERT_TRUE(cloud->Put(Row("h100-80gb-hbm3", "kh1", 128, 21, "cloud-1")).ok());
  ASSERT_TRUE(cloud->Put(Row("h100-80gb-hbm3", "kh2", 128, 19, "cloud-1")).ok());
  Measurement base = Row("h200", "kh1", 64, 12, "lab-1");
  base.baseline = "cublaslt 13.1.0";
  ASSERT_TRUE(lab->PutBaseline(base).ok());
  KernelImage k{"kh1", Row("h200", "kh1", 64, 10, "x").config_id, "f16", "sm_90", "",
                testing::SyntheticCubin("sm_90", "gemm", "a"), {}, {}};
  k.sha256 = Sha256Hex(k.image);
  ASSERT_TRUE(lab->PutKernel(k, "lab-1").ok());
  ASSERT_TRUE(lab->PutKernel(k, "lab-2").ok());

  TransferCounts n;
  ASSERT_TRUE(ExportStore(*lab, ResultFilter{}, dir.Sub("lab.tfx"), &n).ok());
  EXPECT_EQ(n.rows, 2u);
  EXPECT_EQ(n.kernels, 1u);
  EXPECT_EQ(n.baselines, 1u);
  ASSERT_TRUE(ExportStore(*cloud, ResultFilter{}, dir.Sub("cloud.tfx"), &n).ok());
  EXPECT_EQ(n.rows, 2u);

  for (int round = 0; round < 2; ++round) {
    for (const char* file : {"lab.tfx", "cloud.tfx"}) {
      TransferCounts in;
      ASSERT_TRUE(ImportStore(*merged, dir.Sub(file), &in).ok()) << file;
      const size_t fresh = round == 0 ? (std::string(file) == "lab.tfx" ? 2u : 1u) : 0u;
      EXPECT_EQ(in.rows_new, fresh) << file << " " << round;
      EXPECT_EQ(in.rows_present, 2u - fresh) << file << " " << round;
      EXPECT_EQ(in.rows_refused, 0u);
    }
  }
  const auto rows = All(*merged);
  ASSERT_EQ(rows.size(), 3u);
  for (const Measurement& m : rows) {
    // The first farm's row of a shared key stays, with its provenance.
    if (m.gpu_model == "h100-80gb-hbm3" && m.kernel_hash == "kh1") {
      EXPECT_EQ(m.worker, "lab-2");
    }
    if (m.kernel_hash == "kh2") {
      EXPECT_EQ(m.sweep_id, "sweep-of-cloud-1");
    }
    EXPECT_EQ(m.config.params[1].second.text(), "stream_k");
  }
  auto got = merged->GetKernel("kh1", k.config_id, "f16", "sm_90");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->image, k.image);
  // A file is no witness: the cubin ships here once recompiled or sent by
  // two of this farm's own workers' keys.
  EXPECT_TRUE(got->witnesses.empty());
  auto b = merged->GetBaseline("h200", "gemm", "f16", "M=64,N=64,K=64");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->median_us, 12);
  // An export of one GPU model carries only its rows.
  ASSERT_TRUE(ExportStore(*merged, ResultFilter{"h200", "", "", "", ""}, dir.Sub("h200.tfx"), &n).ok());
  EXPECT_EQ(n.rows, 1u);
}

// An import is insert-only and held to the door: a "confirmed" row never
// replaces the farm's own, a row faster than its config's physical floor or
// dated 2100 is refused and counted, and the same cubin imported under two
// file names is still nobody's witness.
TEST(StoreTransfer, AnImportNeverOverridesForgesAWitnessOrDatesARowAhead) {
  TempDir dir;
  auto farm = Open(dir.Sub("farm")), peer = Open(dir.Sub("peer"));
  ASSERT_TRUE(farm && peer);
  auto package = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm");
  ASSERT_TRUE(package.ok()) << package.status().message();
  auto spec = ParseOpSpec(*package, "gemm");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const std::string hash = OpHash(*spec, "13.0");
  auto row = [&](int64_t bm, double us, const std::string& worker) {
    Measurement m = Row("h100-80gb-hbm3", hash, bm, us, worker);
    m.config = spec->default_config;
    for (auto& [name, value] : m.config.params)
      if (name == "GROUP_M") value = ParamValue(bm);  // a config per bm
    m.config_id = m.config.Id();
    m.shape = "M=4096,N=4096,K=4096";
    m.nvrtc_version = "13.0";
    m.unix_time = std::time(nullptr) - 60;
    return m;
  };
  for (ResultStore* s : {farm.get(), peer.get()}) ASSERT_TRUE(s->PutOp("gemm", 1764000000, *package).ok());
  ASSERT_TRUE(farm->Put(row(1, 900, "farm-1")).ok());
  Measurement confirmed = row(1, 0.05 * 1e6, "evil");  // a plausible figure, but the farm's key
  confirmed.pass = Measurement::Pass::kConfirm;
  ASSERT_TRUE(peer->Put(confirmed).ok());
  ASSERT_TRUE(peer->Put(row(2, 1e-3, "evil")).ok());  // 4096^3 in a nanosecond: below any floor
  Measurement ahead = row(3, 800, "evil");
  ahead.unix_time = 4102444800;  // 2100-01-01
  ASSERT_TRUE(peer->Put(ahead).ok());
  ASSERT_TRUE(peer->Put(row(4, 700, "evil")).ok());  // the one honest-looking new row
  // A baseline keeps the newer figure: the farm's, and the file's dated 2100.
  Measurement own = row(1, 1000, "farm-1");
  own.baseline = "cublaslt 13.1.0";
  ASSERT_TRUE(farm->PutBaseline(own).ok());
  Measurement forged_baseline = row(1, 1, "evil");
  forged_baseline.baseline = "cublaslt 13.1.0";
  forged_baseline.unix_time = 4102444800;
  ASSERT_TRUE(peer->PutBaseline(forged_baseline).ok());
  KernelImage k{hash, row(4, 700, "x").config_id, "f16", "sm_90", "", testing::SyntheticCubin("sm_90", "gemm", "p"), {}, {}};
  k.sha256 = Sha256Hex(k.image);
  ASSERT_TRUE(peer->PutKernel(k, WitnessOfKey(testing::TestKey("K1"))).ok());
  ASSERT_TRUE(peer->PutKernel(k, WitnessOfKey(testing::TestKey("K2"))).ok());
  ASSERT_TRUE(ExportStore(*peer, ResultFilter{}, dir.Sub("a.tfx"), nullptr).ok());
  std::filesystem::copy_file(dir.Sub("a.tfx"), dir.Sub("b.tfx"));

  TransferCounts n;
  ASSERT_TRUE(ImportStore(*farm, dir.Sub("a.tfx"), &n).ok());
  EXPECT_EQ(n.rows, 4u);
  EXPECT_EQ(n.rows_new, 1u);
  EXPECT_EQ(n.rows_present, 1u);
  EXPECT_EQ(n.rows_refused, 3u);  // two rows and the baseline
  ASSERT_EQ(n.refusals.size(), 3u);
  const std::string refusals = n.refusals[0] + "\n" + n.refusals[1] + "\n" + n.refusals[2];
  EXPECT_NE(refusals.find("physical floor"), std::string::npos) << refusals;
  EXPECT_NE(refusals.find("after this host's clock"), std::string::npos) << refusals;
  ASSERT_TRUE(ImportStore(*farm, dir.Sub("b.tfx"), &n).ok());
  EXPECT_EQ(n.rows_new, 0u);
  EXPECT_EQ(n.rows_present, 2u);

  auto kept = farm->Get("h100-80gb-hbm3", "gemm", "f16", "M=4096,N=4096,K=4096", hash, row(1, 0, "").config_id);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->worker, "farm-1");
  EXPECT_EQ(kept->median_us, 900);
  EXPECT_FALSE(farm->Get("h100-80gb-hbm3", "gemm", "f16", "M=4096,N=4096,K=4096", hash, row(2, 0, "").config_id));
  EXPECT_FALSE(farm->Get("h100-80gb-hbm3", "gemm", "f16", "M=4096,N=4096,K=4096", hash, row(3, 0, "").config_id));
  auto baseline = farm->GetBaseline("h100-80gb-hbm3", "gemm", "f16", "M=4096,N=4096,K=4096");
  ASSERT_TRUE(baseline.ok()) << baseline.status().message();
  EXPECT_EQ(baseline->median_us, 1000);
  auto image = farm->GetKernel(hash, k.config_id, "f16", "sm_90");
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_TRUE(image->witnesses.empty());
  EXPECT_FALSE(image->Corroborated());
}

TEST(StoreTransfer, HostileFilesAreRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  auto src = Open(dir.Sub("src")), dst = Open(dir.Sub("dst"));
  ASSERT_TRUE(src && dst);
  ASSERT_TRUE(src->Put(Row("h200", "kh1", 64, 10, "w")).ok());
  ASSERT_TRUE(src->Put(Row("h200", "kh1", 128, 11, "w")).ok());
  ASSERT_TRUE(ExportStore(*src, ResultFilter{}, dir.Sub("good.tfx"), nullptr).ok());
  std::ifstream in(dir.Sub("good.tfx"), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir.Sub(name), std::ios::binary) << bytes;
    return dir.Sub(name);
  };
  // A second row whose figure is forged to NaN: its bytes re-encoded.
  Measurement forged = Row("h200", "kh1", 256, 0, "w");
  forged.median_us = std::nan("");
  const std::string forged_bytes = EncodeMeasurement(forged);
  std::string with_forged = good.substr(0, good.size() - 9);  // less the end marker
  with_forged += std::string(1, '\2');
  for (int i = 0; i < 8; ++i) with_forged.push_back(static_cast<char>(uint64_t(forged_bytes.size()) >> (8 * i)));
  with_forged += forged_bytes;
  with_forged += std::string(1, '\0');
  for (int i = 0; i < 8; ++i) with_forged.push_back(static_cast<char>(uint64_t(3) >> (8 * i)));
  const std::pair<std::string, std::string> bad[] = {
      {write("short.tfx", good.substr(0, good.size() - 20)), "truncated"},
      {write("noend.tfx", good.substr(0, good.size() - 9)), "truncated after record 2"},
      {write("magic.tfx", "not an export"), "not a tunefarm store export"},
      {write("forged.tfx", with_forged), "record 2 (row): a figure of nan us"},
  };
  for (const auto& [path, want] : bad) {
    Status st = ImportStore(*dst, path, nullptr);
    ASSERT_FALSE(st.ok()) << path;
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
    EXPECT_EQ(st.message().rfind(path, 0), 0u) << st.message();
  }
  EXPECT_TRUE(All(*dst).empty());
}

}  // namespace
}  // namespace tune
