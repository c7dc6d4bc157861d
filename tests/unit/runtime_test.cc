// The deployment runtime: loading, every level of the fallback chain, the
// force-defaults switch, and prepared lookups against plain ones.
#include "tune/runtime.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "support/temp_dir.h"
#include "bundle/bundle.h"
#include "opspec/expr.h"
#include "bundle/shape_selector.h"
#include "bundle/signing.h"

namespace tune::runtime {
namespace {

namespace fs = std::filesystem;

using tune::testing::TempDir;

tune::SecretKey Key(uint8_t b) {
  std::array<uint8_t, kSecretSeedBytes> seed{};
  seed.fill(b);
  return tune::SecretKey::FromSeed(seed);
}

tune::Shape Mnk(int64_t m, int64_t n, int64_t k) { return tune::Shape{{{"M", m}, {"N", n}, {"K", k}}}; }

tune::BundleEntry E(const std::string& gpu, const std::string& dtype, const tune::Shape& shape, int64_t bm) {
  tune::BundleEntry e;
  e.op = "gemm";
  e.dtype = dtype;
  e.gpu_model = gpu;
  e.shape = shape;
  e.config.params = {{"BM", bm}, {"BN", 128}, {"BK", 7}};  // BK=7 tells entries from the default
  e.config_id = "cfg" + std::to_string(bm);
  e.median_us = 10;
  e.backend = gpu.rfind("sim-", 0) == 0 ? "sim" : "cuda";
  return e;
}

tune::Bundle TestBundle() {
  tune::Bundle b;
  b.name = "runtime-test";
  b.farm_version = "0.1.0";
  b.created_unix = 1763740000;
  b.defaults["gemm"] = tune::Config{{{"BM", 128}, {"BN", 128}, {"BK", 32}}};
  b.defaults["softmax"] = tune::Config{{{"ROWS", 4}}};
  b.entries = {
      E("h100-80gb-hbm3", "f16", Mnk(1024, 1024, 1024), 64),    // 0
      E("h100-80gb-hbm3", "f16", Mnk(4096, 4096, 4096), 256),   // 1
      E("h100-80gb-hbm3", "f16", Mnk(4096, 4096, 1024), 128),   // 2
      E("h200", "f16", Mnk(4096, 4096, 4096), 192),             // 3
      E("h100-sxm5", "f16", Mnk(2048, 2048, 2048), 96),         // 4: h100 family
      E("sim-h100", "f16", Mnk(8192, 8192, 8192), 32),          // 5: simulated, its own family
      E("h100-80gb-hbm3", "bf16", Mnk(1024, 1024, 1024), 48),   // 6
      E("h100-80gb-hbm3", "f16", Mnk(1024, 1024, 1024), 16),    // 7: duplicate of 0, never answers
  };
  return b;
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("TUNEFARM_FORCE_DEFAULTS");
    key_file_ = dir_.Sub("farm.pub");
    std::ofstream(key_file_) << FormatPublicKey(key_.public_key());
    path_ = dir_.Sub("gemm");
    ASSERT_TRUE(WriteSignedBundleFiles(TestBundle(), key_, path_).ok());
    path_ += ".tfb";
    auto b = Bundle::Load(path_, {key_file_});
    ASSERT_TRUE(b.ok()) << b.status().message();
    bundle_ = std::make_unique<Bundle>(std::move(b).value());
  }
  void TearDown() override { ::unsetenv("TUNEFARM_FORCE_DEFAULTS"); }

  const Entry* At(size_t i) const { return &bundle_->entries().at(i); }
  Answer Q(const std::string& gpu, int64_t m, int64_t n, int64_t k, const std::string& dtype = "f16") const {
    return bundle_->lookup("gemm", dtype, gpu, {{"M", m}, {"N", n}, {"K", k}});
  }

  TempDir dir_;
  tune::SecretKey key_ = Key(9);
  std::string key_file_, path_;
  std::unique_ptr<Bundle> bundle_;
};

TEST_F(RuntimeTest, Metadata) {
  EXPECT_EQ(bundle_->name(), "runtime-test");
  EXPECT_EQ(bundle_->farm_version(), "0.1.0");
  EXPECT_EQ(bundle_->created_unix(), 1763740000);
  EXPECT_EQ(bundle_->signer_key_id(), key_.public_key().Id());
  EXPECT_EQ(bundle_->entries().size(), 8u);
  EXPECT_FALSE(bundle_->forcing_defaults());
  ASSERT_NE(bundle_->dims_of("gemm"), nullptr);
  EXPECT_EQ(*bundle_->dims_of("gemm"), (std::vector<std::string>{"M", "N", "K"}));
  EXPECT_EQ(bundle_->dims_of("softmax"), nullptr);
  EXPECT_EQ(At(1)->config.ToString(), "BM=256,BN=128,BK=7");
  EXPECT_EQ(At(1)->config.get("BM"), 256);
  EXPECT_EQ(At(1)->config.get("NOPE", -1), -1);
}

TEST_F(RuntimeTest, Exact) {
  Answer a = Q("h100-80gb-hbm3", 4096, 4096, 1024);
  EXPECT_EQ(a.level, Level::kExact);
  EXPECT_EQ(a.entry, At(2));
  EXPECT_EQ(a.config, &At(2)->config);
  // Dims are paired by name, in any order.
  a = bundle_->lookup("gemm", "f16", "h100-80gb-hbm3", {{"K", 1024}, {"M", 4096}, {"N", 4096}});
  EXPECT_EQ(a.level, Level::kExact);
  EXPECT_EQ(a.entry, At(2));
  EXPECT_EQ(Q("h200", 4096, 4096, 4096).entry, At(3));
  EXPECT_EQ(Q("h100-80gb-hbm3", 1024, 1024, 1024, "bf16").entry, At(6));
  // A duplicate shape: the first in the bundle answers.
  EXPECT_EQ(Q("h100-80gb-hbm3", 1024, 1024, 1024).entry, At(0));
}

TEST_F(RuntimeTest, NearestShapeByLog2Distance) {
  // 2500^3 is nearer to 1024^3 than to 4096^3 on a linear scale, but
  // log2(2500) = 11.29 is nearer to 12 than to 10: the documented metric
  // picks 4096^3.
  Answer a = Q("h100-80gb-hbm3", 2500, 2500, 2500);
  EXPECT_EQ(a.level, Level::kNearestShape);
  EXPECT_EQ(a.entry, At(1));
  // K=1500 is nearer (in log2) to K=1024 than to 4096.
  EXPECT_EQ(Q("h100-80gb-hbm3", 4096, 4096, 1500).entry, At(2));
  EXPECT_EQ(Q("h100-80gb-hbm3", 16, 16, 16).entry, At(0));
  // 2048^3 is as far from 1024^3 as from 4096^3: first in bundle order.
  a = Q("h100-80gb-hbm3", 2048, 2048, 2048);
  EXPECT_EQ(a.level, Level::kNearestShape);
  EXPECT_EQ(a.entry, At(0));
  // Dims below 1 count as 1.
  EXPECT_EQ(Q("h100-80gb-hbm3", 0, -5, 1).entry, At(0));
  // Only the model's own shapes, even where a sibling has the exact one.
  a = Q("h100-sxm5", 4096, 4096, 4096);
  EXPECT_EQ(a.level, Level::kNearestShape);
  EXPECT_EQ(a.entry, At(4));
}

TEST_F(RuntimeTest, SameFamily) {
  // h100-pcie has no entries; the h100 family has 0, 1, 2 and 4.
  Answer a = Q("h100-pcie", 2048, 2048, 2048);
  EXPECT_EQ(a.level, Level::kFamily);
  EXPECT_EQ(a.entry, At(4));
  a = Q("h100-nvl", 4000, 4000, 1100);
  EXPECT_EQ(a.level, Level::kFamily);
  EXPECT_EQ(a.entry, At(2));
  // A simulated entry never stands in for hardware, nor the reverse.
  a = Q("h100-pcie", 8192, 8192, 8192);
  EXPECT_EQ(a.entry, At(1));
  a = Q("sim-h100-sxm5", 1024, 1024, 1024);
  EXPECT_EQ(a.level, Level::kFamily);
  EXPECT_EQ(a.entry, At(5));
  // gh200 is not h200.
  EXPECT_EQ(Q("gh200-480gb", 4096, 4096, 4096).level, Level::kDefault);
}

TEST_F(RuntimeTest, DefaultWhenNothingTunedFits) {
  const Answer a100 = Q("a100-sxm4-80gb", 4096, 4096, 4096);
  EXPECT_EQ(a100.level, Level::kDefault);
  EXPECT_EQ(a100.entry, nullptr);
  ASSERT_NE(a100.config, nullptr);
  EXPECT_EQ(a100.config->ToString(), "BM=128,BN=128,BK=32");
  EXPECT_EQ(Q("h100-80gb-hbm3", 4096, 4096, 4096, "f32").level, Level::kDefault);
  // Other dims than the op's.
  EXPECT_EQ(bundle_->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 4096}, {"N", 4096}}).level,
            Level::kDefault);
  EXPECT_EQ(bundle_->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 1}, {"N", 1}, {"Q", 1}}).level,
            Level::kDefault);
  EXPECT_EQ(bundle_->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 1}, {"M", 1}, {"K", 1}}).level,
            Level::kDefault);
  const Answer softmax = bundle_->lookup("softmax", "f16", "h100-80gb-hbm3", {{"N", 4096}});
  EXPECT_EQ(softmax.level, Level::kDefault);
  EXPECT_EQ(softmax.config->get("ROWS"), 4);
}

TEST_F(RuntimeTest, Miss) {
  const Answer a = bundle_->lookup("conv", "f16", "h100-80gb-hbm3", {{"N", 1}});
  EXPECT_EQ(a.level, Level::kMiss);
  EXPECT_EQ(a.config, nullptr);
  EXPECT_EQ(a.entry, nullptr);
  PreparedLookup p = bundle_->prepare("conv", "f16", "h100-80gb-hbm3");
  EXPECT_EQ(p.lookup({1}).level, Level::kMiss);
  EXPECT_EQ(PreparedLookup().lookup({1, 2}).level, Level::kMiss);
}

TEST_F(RuntimeTest, ForceDefaultsFromTheEnvironment) {
  ::setenv("TUNEFARM_FORCE_DEFAULTS", "1", 1);
  auto forced = Bundle::Load(path_, {key_file_});
  ASSERT_TRUE(forced.ok()) << forced.status().message();
  EXPECT_TRUE(forced->forcing_defaults());
  for (const char* gpu : {"h100-80gb-hbm3", "h100-pcie", "a100"}) {
    const Answer a = forced->lookup("gemm", "f16", gpu, {{"M", 4096}, {"N", 4096}, {"K", 1024}});
    EXPECT_EQ(a.level, Level::kDefault) << gpu;
    EXPECT_EQ(a.config->get("BK"), 32);
    EXPECT_EQ(forced->prepare("gemm", "f16", gpu).lookup({4096, 4096, 1024}).level, Level::kDefault);
  }
  EXPECT_EQ(forced->lookup("conv", "f16", "h100", {{"N", 1}}).level, Level::kMiss);
  // An explicit option wins over the environment.
  auto normal = Bundle::Load(path_, {key_file_}, LoadOptions{LoadOptions::ForceDefaults::kNo});
  ASSERT_TRUE(normal.ok());
  EXPECT_EQ(normal->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 4096}, {"N", 4096}, {"K", 1024}}).level,
            Level::kExact);

  for (const char* off : {"0", ""}) {
    ::setenv("TUNEFARM_FORCE_DEFAULTS", off, 1);
    auto b = Bundle::Load(path_, {key_file_});
    ASSERT_TRUE(b.ok());
    EXPECT_FALSE(b->forcing_defaults()) << "\"" << off << "\"";
  }
}

TEST_F(RuntimeTest, PreparedLookup) {
  PreparedLookup p = bundle_->prepare("gemm", "f16", "h100-80gb-hbm3");
  EXPECT_EQ(p.dim_names(), (std::vector<std::string>{"M", "N", "K"}));
  EXPECT_EQ(p.ndims(), 3u);
  EXPECT_EQ(p.lookup({4096, 4096, 1024}).entry, At(2));
  EXPECT_EQ(p.lookup({4096, 4096, 1024}).level, Level::kExact);  // from the cache
  EXPECT_EQ(p.lookup({2500, 2500, 2500}).entry, At(1));
  EXPECT_EQ(p.lookup({2500, 2500, 2500}).level, Level::kNearestShape);
  EXPECT_EQ(p.lookup({4096, 4096, 1024}).level, Level::kExact);
  // A wrong number of dims cannot match: the default.
  EXPECT_EQ(p.lookup({4096, 4096}).level, Level::kDefault);
  EXPECT_EQ(p.lookup({4096, 4096, 1024, 1}).level, Level::kDefault);

  // The caller's own dim order.
  const std::string_view kmn[] = {"K", "M", "N"};
  PreparedLookup q = bundle_->prepare("gemm", "f16", "h100-80gb-hbm3", kmn);
  EXPECT_EQ(q.dim_names(), (std::vector<std::string>{"K", "M", "N"}));
  EXPECT_EQ(q.lookup({1024, 4096, 4096}).entry, At(2));
  EXPECT_EQ(q.lookup({1024, 4096, 4096}).level, Level::kExact);
  const std::string_view wrong[] = {"K", "M", "X"};
  EXPECT_EQ(bundle_->prepare("gemm", "f16", "h100-80gb-hbm3", wrong).lookup({1024, 4096, 4096}).level,
            Level::kDefault);

  PreparedLookup fam = bundle_->prepare("gemm", "f16", "h100-pcie");
  EXPECT_EQ(fam.lookup({2048, 2048, 2048}).level, Level::kFamily);
  PreparedLookup def = bundle_->prepare("gemm", "f16", "a100");
  EXPECT_EQ(def.lookup({2048, 2048, 2048}).level, Level::kDefault);
}

TEST_F(RuntimeTest, GpuFamilies) {
  for (const auto& [model, family] : std::vector<std::pair<std::string, std::string>>{
           {"h100-80gb-hbm3", "h100"},
           {"h100-sxm5", "h100"},
           {"h100-nvl", "h100"},
           {"h200", "h200"},
           {"gh200-480gb", "gh200"},
           {"a100-sxm4-40gb", "a100"},
           {"tesla-v100-sxm2-16gb", "v100"},
           {"geforce-rtx-4090", "4090"},
           {"sim-h100", "sim-h100"},
           {"sim-a100-sxm4", "sim-a100"},
           {"mystery", "mystery"},
           {"", ""},
       }) {
    EXPECT_EQ(GpuFamily(model), family) << model;
  }
}

TEST_F(RuntimeTest, LoadErrorsNameTheFile) {
  // Untrusted signer.
  const tune::SecretKey stranger = Key(10);
  const std::string other_key = dir_.Sub("other.pub");
  std::ofstream(other_key) << FormatPublicKey(stranger.public_key());
  auto r = Bundle::Load(path_, {other_key});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path_), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("not trusted"), std::string::npos) << r.status().message();

  // Unsigned.
  const std::string plain = dir_.Sub("plain");
  ASSERT_TRUE(WriteBundleFiles(TestBundle(), plain).ok());
  r = Bundle::Load(plain + ".tfb", {key_file_});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not signed"), std::string::npos) << r.status().message();

  // A bad trusted key names the key file.
  r = Bundle::Load(path_, {dir_.Sub("missing.pub")});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir_.Sub("missing.pub")), std::string::npos) << r.status().message();
  r = Bundle::Load(path_, {"tunefarm-ed25519-public v1\nzz\n"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("trusted key #1"), std::string::npos) << r.status().message();

  // Keys given as text work like key files.
  std::string hex = FormatPublicKey(key_.public_key());
  hex = hex.substr(hex.rfind('\n', hex.size() - 2) + 1);
  EXPECT_TRUE(Bundle::Load(path_, {hex}).ok());
  EXPECT_TRUE(Bundle::Load(path_, {FormatPublicKey(stranger.public_key()), FormatPublicKey(key_.public_key())}).ok());
  EXPECT_TRUE(Bundle::Load(path_, {"# the farm's key\n" + FormatPublicKey(key_.public_key())}).ok());
}

TEST_F(RuntimeTest, LoadFromMemory) {
  const std::string bytes = EncodeSignedBundle(TestBundle(), key_);
  auto b = Bundle::LoadFromMemory(bytes.data(), bytes.size(), {key_file_}, "embedded");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->lookup("gemm", "f16", "h200", {{"M", 4096}, {"N", 4096}, {"K", 4096}}).level, Level::kExact);
  std::string bad = bytes;
  bad[100] ^= 4;
  b = Bundle::LoadFromMemory(bad.data(), bad.size(), {key_file_}, "embedded");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("bundle embedded: ", 0), 0u) << b.status().message();
}

TEST_F(RuntimeTest, BucketedDimsFindTheConfigTunedAtTheirBucket) {
  tune::Bundle src = TestBundle();
  src.entries = {E("h100-80gb-hbm3", "f16", Mnk(64, 4096, 4096), 64), E("h100-80gb-hbm3", "f16", Mnk(128, 4096, 4096), 128),
                 E("h100-80gb-hbm3", "f16", Mnk(256, 4096, 4096), 256)};
  tune::DimBucket pow2;
  pow2.kind = tune::DimBucket::Kind::kPow2;
  tune::DimBucket list;
  list.kind = tune::DimBucket::Kind::kList;
  list.values = {1024, 4096};
  src.buckets["gemm"] = {{"M", pow2}, {"K", list}};
  const std::string bytes = EncodeSignedBundle(src, key_);
  auto b = Bundle::LoadFromMemory(bytes.data(), bytes.size(), {key_file_}, "bucketed");
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto q = [&](int64_t m, int64_t k) { return b->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", m}, {"N", 4096}, {"K", k}}); };
  // M = 100 is in 128's bucket, K = 2000 in 4096's: the config tuned there, as an exact hit.
  Answer a = q(100, 2000);
  EXPECT_EQ(a.level, Level::kExact);
  EXPECT_EQ(a.entry, &b->entries().at(1));
  EXPECT_EQ(q(129, 4096).entry, &b->entries().at(2));
  EXPECT_EQ(q(1, 4096).entry, &b->entries().at(0));  // bucket 1: nearest tuned bucket
  EXPECT_EQ(q(1, 4096).level, Level::kNearestShape);
  EXPECT_EQ(q(64, 9000).entry, &b->entries().at(0));  // past the list: its largest value
  EXPECT_EQ(q(64, 9000).level, Level::kExact);
  // Prepared lookups bucket alike, whatever order the dims come in.
  const std::string_view order[] = {"K", "N", "M"};
  PreparedLookup prepared = b->prepare("gemm", "f16", "h100-80gb-hbm3", order);
  EXPECT_EQ(prepared.lookup({2000, 4096, 100}).entry, &b->entries().at(1));
  EXPECT_EQ(prepared.lookup({4096, 4096, 200}).entry, &b->entries().at(2));
  // A bucket list that does not ascend is refused at the door.
  src.buckets["gemm"]["K"].values = {4096, 1024};
  const std::string bad = EncodeSignedBundle(src, key_);
  auto refused = Bundle::LoadFromMemory(bad.data(), bad.size(), {key_file_}, "bad");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("bucket values must ascend"), std::string::npos) << refused.status().message();
}

TEST_F(RuntimeTest, OfShapesSharingABucketTheOneTunedAtItsValueAnswers) {
  tune::Bundle src = TestBundle();
  src.entries = {E("h100-80gb-hbm3", "f16", Mnk(100, 4096, 4096), 100), E("h100-80gb-hbm3", "f16", Mnk(128, 4096, 4096), 128)};
  tune::DimBucket pow2;
  pow2.kind = tune::DimBucket::Kind::kPow2;
  src.buckets["gemm"] = {{"M", pow2}};
  const std::string bytes = EncodeSignedBundle(src, key_);
  auto b = Bundle::LoadFromMemory(bytes.data(), bytes.size(), {key_file_}, "shared-bucket");
  ASSERT_TRUE(b.ok()) << b.status().message();
  // M = 100 sorts first in the bundle, but M = 128 is the bucket's own value.
  EXPECT_EQ(b->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 128}, {"N", 4096}, {"K", 4096}}).entry, &b->entries().at(1));
  EXPECT_EQ(b->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 90}, {"N", 4096}, {"K", 4096}}).entry, &b->entries().at(1));
}

TEST_F(RuntimeTest, ANearestShapeAnswerHoldsToTheOpsShapeRules) {
  tune::Bundle src = TestBundle();
  auto entry = [](int64_t n, int64_t tpr) {
    tune::BundleEntry e;
    e.op = "norm";
    e.dtype = "f16";
    e.gpu_model = "h100-80gb-hbm3";
    e.shape = tune::Shape{{{"N", n}}};
    e.config.params = {{"TPR", tpr}, {"VEC", 4}};
    e.config_id = "tpr" + std::to_string(tpr);
    e.median_us = 5;
    e.backend = "cuda";
    return e;
  };
  src.entries = {entry(128, 32), entry(1024, 256)};
  src.defaults["norm"] = tune::Config{{{"TPR", 16}, {"VEC", 4}}};
  tune::BundleShapeRules rules;
  rules.vars = {"TPR", "VEC", "N", "dsize"};
  rules.params = 2;
  auto program = tune::CompileLaunchProgram("TPR*VEC <= N", rules.vars, "test");
  ASSERT_TRUE(program.ok()) << program.status().message();
  rules.rules.push_back(*program);
  const std::string plain = EncodeSignedBundle(src, key_);
  src.shape_rules["norm"] = rules;
  const std::string ruled = EncodeSignedBundle(src, key_);
  auto without = Bundle::LoadFromMemory(plain.data(), plain.size(), {key_file_}, "plain");
  auto with = Bundle::LoadFromMemory(ruled.data(), ruled.size(), {key_file_}, "ruled");
  ASSERT_TRUE(without.ok() && with.ok());
  // N = 900 is nearest to 1024, whose config needs TPR*VEC = 1024 > 900.
  EXPECT_EQ(without->lookup("norm", "f16", "h100-80gb-hbm3", {{"N", 900}}).entry, &without->entries().at(1));
  Answer a = with->lookup("norm", "f16", "h100-80gb-hbm3", {{"N", 900}});
  EXPECT_EQ(a.entry, &with->entries().at(0));
  EXPECT_EQ(a.level, Level::kNearestShape);
  // Where no tuned config is legal, the default answers.
  EXPECT_EQ(with->lookup("norm", "f16", "h100-80gb-hbm3", {{"N", 100}}).level, Level::kDefault);
  // An exact hit is still an exact hit, and prepared lookups agree.
  EXPECT_EQ(with->lookup("norm", "f16", "h100-80gb-hbm3", {{"N", 1024}}).level, Level::kExact);
  PreparedLookup prepared = with->prepare("norm", "f16", "h100-80gb-hbm3");
  EXPECT_EQ(prepared.lookup({900}).entry, &with->entries().at(0));
  // A rule over a variable the rules lack is refused at decode.
  src.shape_rules["norm"].vars = {"TPR", "VEC"};
  const std::string bad = EncodeSignedBundle(src, key_);
  EXPECT_FALSE(Bundle::LoadFromMemory(bad.data(), bad.size(), {key_file_}, "bad").ok());
}

// Shapes never tuned are answered by the bundle's selector: fitted on four
// tuned (M, N) shapes where one config wins while M*N is small and another
// once it is large, it answers an untuned shape by M*N, which the nearest
// tuned shape gets wrong; the answer lists the configs it chose from.
TEST_F(RuntimeTest, PredictedAnswersShapesNeverTunedFromTheSelector) {
  auto mn = [](int64_t m, int64_t n) { return tune::Shape{{{"M", m}, {"N", n}}}; };
  auto entry = [&](int64_t m, int64_t n, int64_t bm) {
    tune::BundleEntry e = E("h100-80gb-hbm3", "f16", mn(m, n), bm);
    e.op = "mm";
    return e;
  };
  tune::Bundle src = TestBundle();
  src.defaults["mm"] = tune::Config{{{"BM", 1}}};
  const size_t first = src.entries.size();
  // Small tiles win below M*N = 2^22, large ones from there; neither M nor
  // N alone tells them apart.
  src.entries.push_back(entry(1024, 1024, 64));
  src.entries.push_back(entry(2048, 2048, 256));
  src.entries.push_back(entry(1024, 2048, 64));
  src.entries.push_back(entry(2048, 4096, 256));
  src.entries.push_back(entry(2048, 1024, 64));
  src.entries.push_back(entry(4096, 4096, 256));
  tune::SelectorInput in;
  for (size_t i = first; i < src.entries.size(); ++i) in.shapes.push_back(src.entries[i].shape);
  in.candidates = {src.entries[first].config, src.entries[first + 1].config};
  in.us = {{10, 60, 20, 120, 20, 240}, {14, 40, 28, 80, 28, 160}};
  const tune::ShapeSelector fitted = tune::FitShapeSelector(in);
  ASSERT_EQ(fitted.candidates.size(), 2u);
  tune::BundleSelector sel{"mm", "f16", "h100-80gb-hbm3", fitted.dims, {}, fitted.nodes};
  for (size_t c : fitted.candidates) sel.entries.push_back(static_cast<uint32_t>(first + c));
  const std::string unselected = EncodeSignedBundle(src, key_);
  auto nearest = Bundle::LoadFromMemory(unselected.data(), unselected.size(), {key_file_}, "unselected");
  ASSERT_TRUE(nearest.ok());
  const Answer near = nearest->lookup("mm", "f16", "h100-80gb-hbm3", {{"M", 1024}, {"N", 4096}});
  EXPECT_EQ(near.level, Level::kNearestShape);
  EXPECT_EQ(near.config->get("BM"), 64);
  src.selectors.push_back(sel);
  const std::string bytes = EncodeSignedBundle(src, key_);
  auto b = Bundle::LoadFromMemory(bytes.data(), bytes.size(), {key_file_}, "selected");
  ASSERT_TRUE(b.ok()) << b.status().message();
  // M*N = 2^22: nearest in log2 dims to 1024x2048 (small tiles; 2048x4096
  // is as near, and later), but of the large side.
  Answer a = b->lookup("mm", "f16", "h100-80gb-hbm3", {{"M", 1024}, {"N", 4096}});
  EXPECT_EQ(a.level, Level::kPredicted);
  EXPECT_EQ(a.config->get("BM"), 256);
  ASSERT_EQ(a.candidates.size(), 2u);
  for (size_t k = 0; k < 2; ++k) EXPECT_EQ(a.candidates[k], &b->entries().at(first + fitted.candidates[k]));
  EXPECT_EQ(b->lookup("mm", "f16", "h100-80gb-hbm3", {{"M", 700}, {"N", 900}}).config->get("BM"), 64);
  // Tuned shapes stay exact; prepared lookups, in any dim order, agree.
  EXPECT_EQ(b->lookup("mm", "f16", "h100-80gb-hbm3", {{"M", 1024}, {"N", 2048}}).level, Level::kExact);
  const std::string_view order[] = {"N", "M"};
  PreparedLookup prepared = b->prepare("mm", "f16", "h100-80gb-hbm3", order);
  EXPECT_EQ(prepared.lookup({4096, 1024}).entry, a.entry);
  EXPECT_EQ(prepared.lookup({4096, 1024}).level, Level::kPredicted);
  // Another model has no selector: its nearest shape answers.
  EXPECT_EQ(bundle_->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 1000}, {"N", 1000}, {"K", 1000}}).level,
            Level::kNearestShape);
  // Hostile selectors are refused at load, naming the selector: a child
  // before its parent (a walk that never ends), an entry of another key, an
  // entry out of range, a leaf naming no candidate.
  auto refused = [&](const std::function<void(tune::BundleSelector&)>& spoil) {
    tune::Bundle bad = src;
    spoil(bad.selectors[0]);
    const std::string bytes = EncodeSignedBundle(bad, key_);
    auto r = Bundle::LoadFromMemory(bytes.data(), bytes.size(), {key_file_}, "bad");
    if (r.ok()) return std::string("loaded");
    EXPECT_NE(r.status().message().find("selector mm f16 h100-80gb-hbm3"), std::string::npos) << r.status().message();
    return r.status().message();
  };
  ASSERT_FALSE(sel.nodes[0].leaf);
  EXPECT_NE(refused([](tune::BundleSelector& s) { s.nodes[0].left = 0; }), "loaded");
  EXPECT_NE(refused([](tune::BundleSelector& s) { s.entries[0] = 0; }), "loaded");
  EXPECT_NE(refused([](tune::BundleSelector& s) { s.entries[0] = 999; }), "loaded");
  EXPECT_NE(refused([](tune::BundleSelector& s) { s.nodes.back().candidate = 7; }), "loaded");
  EXPECT_NE(refused([](tune::BundleSelector& s) { s.nodes[0].threshold = NAN; }), "loaded");
}

// Lookups answered below exact are counted per key, from plain and
// prepared lookups alike (a repeated shape too), without a lock: threads
// counting one key lose nothing; the table's bound drops the rest, counted.
TEST_F(RuntimeTest, MissesAreCountedPerKeyAndWrittenAsJsonLines) {
  PreparedLookup gemm = bundle_->prepare("gemm", "f16", "h100-80gb-hbm3");
  EXPECT_EQ(gemm.lookup({4096, 4096, 4096}).level, Level::kExact);
  for (int i = 0; i < 3; ++i) gemm.lookup({1000, 1000, 1000});
  bundle_->lookup("gemm", "f16", "h100-80gb-hbm3", {{"K", 1000}, {"M", 1000}, {"N", 1000}});
  bundle_->lookup("gemm", "f16", "l40s", {{"M", 64}, {"N", 64}, {"K", 64}});
  bundle_->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 64}, {"N", 64}});  // not the op's dims: uncounted
  uint64_t dropped = 7;
  std::vector<Miss> misses = bundle_->misses(&dropped);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[0].count, 4u);
  EXPECT_EQ(misses[0].gpu_model, "h100-80gb-hbm3");
  EXPECT_EQ(misses[0].shape.ToString(), "M=1000,N=1000,K=1000");
  EXPECT_EQ(misses[0].level, Level::kNearestShape);
  EXPECT_EQ(misses[1].gpu_model, "l40s");
  EXPECT_EQ(misses[1].level, Level::kDefault);

  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      PreparedLookup mine = bundle_->prepare("gemm", "f16", "h100-80gb-hbm3");
      for (int i = 0; i < 1000; ++i) mine.lookup({2000 + (i % 2), 3000, 100 + t % 2});
    });
  }
  for (auto& th : threads) th.join();
  uint64_t total = 0;
  for (const Miss& m : bundle_->misses()) total += m.count;
  EXPECT_EQ(total, 4u + 1u + 4000u);

  const std::string path = dir_.Sub("misses.jsonl");
  ASSERT_TRUE(bundle_->WriteMisses(path).ok());
  ASSERT_TRUE(bundle_->WriteMisses(path).ok());  // appended
  std::ifstream in(path);
  std::string first, line;
  std::getline(in, first);
  size_t lines = 1;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 2 * bundle_->misses().size());
  EXPECT_NE(first.find("\"shape\": {\"M\": 200"), std::string::npos) << first;
  EXPECT_FALSE(bundle_->WriteMisses(dir_.Sub("no/such/dir/m.jsonl")).ok());

  // Past kMaxMissKeys keys, lookups are dropped and counted as such.
  PreparedLookup many = bundle_->prepare("gemm", "f16", "h100-80gb-hbm3");
  for (int64_t i = 0; i < int64_t(2 * kMaxMissKeys); ++i) many.lookup({5000 + i, 7, 7});
  bundle_->misses(&dropped);
  EXPECT_GT(dropped, 0u);
  EXPECT_LE(bundle_->misses().size(), kMaxMissKeys);
}

TEST_F(RuntimeTest, TooManyDimsIsRefused) {
  tune::Bundle big = TestBundle();
  big.entries[0].shape.dims.clear();
  for (size_t i = 0; i <= kMaxDims; ++i) big.entries[0].shape.dims.emplace_back("D" + std::to_string(i), 1);
  const std::string bytes = EncodeSignedBundle(big, key_);
  auto b = Bundle::LoadFromMemory(bytes.data(), bytes.size(), {key_file_}, "big");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("at most 16"), std::string::npos) << b.status().message();
}

TEST(RuntimeCategorical, StringAndBooleanParamsAnswerWithTheirSpelling) {
  tune::Bundle b = TestBundle();
  const tune::ParamValues params = {
      {"BM", 128}, {"SCHEDULE", tune::ParamValue::String("stream_k")}, {"TMA", tune::ParamValue::Bool(true)}};
  b.entries[0].config.params = params;
  b.defaults["gemm"].params = {
      {"BM", 64}, {"SCHEDULE", tune::ParamValue::String("persistent")}, {"TMA", tune::ParamValue::Bool(false)}};
  // The JSON form spells them as JSON strings and booleans.
  const std::string json = tune::BundleToJson(b);
  EXPECT_NE(json.find("\"SCHEDULE\": \"stream_k\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"TMA\": true"), std::string::npos);

  TempDir dir;
  const tune::SecretKey key = Key(3);
  const std::string key_file = dir.Sub("k.pub");
  std::ofstream(key_file) << FormatPublicKey(key.public_key());
  ASSERT_TRUE(WriteSignedBundleFiles(b, key, dir.Sub("cat")).ok());
  auto loaded = Bundle::Load(dir.Sub("cat") + ".tfb", {key_file});
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Answer exact = loaded->lookup("gemm", "f16", "h100-80gb-hbm3", {{"M", 1024}, {"N", 1024}, {"K", 1024}});
  ASSERT_EQ(exact.level, Level::kExact);
  ASSERT_EQ(exact.config->size(), 3u);
  EXPECT_EQ(exact.config->text(0), "");
  EXPECT_EQ(exact.config->value(0), 128);
  EXPECT_EQ(exact.config->text(1), "stream_k");
  EXPECT_EQ(exact.config->value(1), tune::CategoricalCode("stream_k"));  // what the op's rules compare
  EXPECT_EQ(exact.config->text(2), "true");
  EXPECT_EQ(exact.config->value(2), 1);
  EXPECT_EQ(exact.config->ToString(), "BM=128,SCHEDULE=stream_k,TMA=true");
  const Answer def = loaded->lookup("gemm", "bf16", "a100", {{"M", 1}, {"N", 1}, {"K", 1}});
  ASSERT_EQ(def.level, Level::kDefault);
  EXPECT_EQ(def.config->ToString(), "BM=64,SCHEDULE=persistent,TMA=false");
}

TEST(RuntimeLevels, Names) {
  EXPECT_STREQ(LevelName(Level::kExact), "exact");
  EXPECT_STREQ(LevelName(Level::kPredicted), "predicted");
  EXPECT_STREQ(LevelName(Level::kNearestShape), "nearest_shape");
  EXPECT_STREQ(LevelName(Level::kFamily), "family");
  EXPECT_STREQ(LevelName(Level::kDefault), "default");
  EXPECT_STREQ(LevelName(Level::kMiss), "miss");
}

// The exact and nearest-shape levels by brute force, as runtime.h defines
// them: among `src`'s entries of (op, dtype, model) with the query's dims,
// the one of equal dims, else the nearest in log2 (ties: the first). -1 when
// the model has no such entry.
int ReferenceEntry(const tune::Bundle& src, const std::string& dtype, const std::string& model,
                   const tune::Shape& query, bool* exact) {
  int best = -1;
  double best_d = 0;
  for (size_t i = 0; i < src.entries.size(); ++i) {
    const tune::BundleEntry& e = src.entries[i];
    if (e.op != "gemm" || e.dtype != dtype || e.gpu_model != model) continue;
    double d = 0;
    for (size_t j = 0; j < 3; ++j) {
      const double diff = std::log2(double(std::max<int64_t>(query.dims[j].second, 1))) -
                          std::log2(double(std::max<int64_t>(e.shape.dims[j].second, 1)));
      d += diff * diff;
    }
    if (e.shape.dims == query.dims) {
      *exact = true;
      return static_cast<int>(i);
    }
    if (best < 0 || d < best_d) best = static_cast<int>(i), best_d = d;
  }
  *exact = false;
  return best;
}

// A denser random bundle: many ties (sizes are powers of two), several
// models per family, duplicates. Plain and prepared lookups agree, and on
// the model's own entries both agree with a brute-force reference for the
// exact and nearest-shape levels.
TEST(RuntimeRandomTest, PreparedEqualsPlainAndTheReference) {
  std::mt19937_64 rng(1234);
  const std::vector<std::string> models = {"h100-80gb-hbm3", "h100-sxm5", "h200", "a100-sxm4-40gb", "sim-h100"};
  const std::vector<std::string> dtypes = {"f16", "bf16"};
  auto pow2 = [&] { return int64_t{1} << (6 + rng() % 9); };
  tune::Bundle src;
  src.defaults["gemm"] = tune::Config{{{"BM", 128}}};
  for (int i = 0; i < 300; ++i) {
    src.entries.push_back(E(models[rng() % models.size()], dtypes[rng() % dtypes.size()],
                            Mnk(pow2(), pow2(), pow2()), i));
  }
  const tune::SecretKey key = Key(11);
  const std::string bytes = EncodeSignedBundle(src, key);
  auto loaded = Bundle::LoadFromMemory(bytes.data(), bytes.size(), {FormatPublicKey(key.public_key())});
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Bundle& b = *loaded;

  const std::vector<std::string> query_models = {"h100-80gb-hbm3", "h100-sxm5", "h100-pcie", "h200",
                                                 "a100-sxm4-40gb", "a100-pcie", "l4", "sim-h100",
                                                 "sim-h100-x"};
  const std::vector<std::string> query_dtypes = {"f16", "bf16", "f32"};
  const std::string_view nkm[] = {"N", "K", "M"};
  int levels[5] = {};
  for (const std::string& model : query_models) {
    for (const std::string& dtype : query_dtypes) {
      PreparedLookup p = b.prepare("gemm", dtype, model);
      PreparedLookup q = b.prepare("gemm", dtype, model, nkm);
      for (int i = 0; i < 400; ++i) {
        int64_t m, n, k;
        if (i % 3 == 0) {
          const tune::Shape& s = src.entries[rng() % src.entries.size()].shape;
          m = s.dims[0].second, n = s.dims[1].second, k = s.dims[2].second;
        } else if (i % 3 == 1) {
          m = pow2(), n = pow2(), k = pow2();
        } else {
          auto any = [&] { return static_cast<int64_t>(std::exp2(std::uniform_real_distribution<>(0, 16)(rng))); };
          m = any(), n = any(), k = any();
        }
        const Answer plain = b.lookup("gemm", dtype, model, {{"M", m}, {"N", n}, {"K", k}});
        const Answer prepared = p.lookup({m, n, k});
        const Answer reordered = q.lookup({n, k, m});
        const Answer again = p.lookup({m, n, k});
        SCOPED_TRACE(model + " " + dtype + " " + std::to_string(m) + "," + std::to_string(n) + "," +
                     std::to_string(k));
        ASSERT_EQ(plain.level, prepared.level);
        ASSERT_EQ(plain.config, prepared.config);
        ASSERT_EQ(plain.entry, prepared.entry);
        ASSERT_EQ(plain.entry, reordered.entry);
        ASSERT_EQ(plain.level, reordered.level);
        ASSERT_EQ(plain.entry, again.entry);
        ++levels[static_cast<int>(plain.level)];

        bool exact = false;
        const int ref = ReferenceEntry(src, dtype, model, Mnk(m, n, k), &exact);
        if (ref < 0) {
          ASSERT_NE(plain.level, Level::kExact);
          ASSERT_NE(plain.level, Level::kNearestShape);
          continue;
        }
        ASSERT_EQ(plain.level, exact ? Level::kExact : Level::kNearestShape);
        ASSERT_EQ(plain.entry - b.entries().data(), ref);
      }
    }
  }
  // Every level took part.
  for (int l = 0; l < 4; ++l) EXPECT_GT(levels[l], 0) << LevelName(static_cast<Level>(l));
}

}  // namespace
}  // namespace tune::runtime
