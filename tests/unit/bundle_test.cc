// Bundles: binary and JSON forms, files, and the lookup fallback chain.
#include "bundle/bundle.h"
#include "publish/publish.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <tuple>

#include "support/cubin.h"
#include "support/temp_dir.h"
#include "base/limits.h"
#include "bundle/signing.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

auto Tie(const BundleEntry& e) {
  return std::tie(e.op, e.dtype, e.gpu_model, e.shape.dims, e.config.params, e.config_id,
                  e.kernel_hash, e.median_us, e.stdev_us, e.ci95_us, e.samples,
                  e.default_median_us, e.baseline, e.baseline_median_us, e.backend, e.device_name,
                  e.nvrtc_version, e.driver_version, e.checked_against, e.energy_uj, e.power_w, e.power_limit_w,
                  e.objective);
}

void ExpectSameBundle(const Bundle& a, const Bundle& b) {
  EXPECT_EQ(a.format_version, b.format_version);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.farm_version, b.farm_version);
  EXPECT_EQ(a.created_unix, b.created_unix);
  ASSERT_EQ(a.defaults.size(), b.defaults.size());
  for (auto ia = a.defaults.begin(), ib = b.defaults.begin(); ia != a.defaults.end(); ++ia, ++ib) {
    EXPECT_EQ(ia->first, ib->first);
    EXPECT_EQ(ia->second.params, ib->second.params);
  }
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) EXPECT_EQ(Tie(a.entries[i]), Tie(b.entries[i])) << i;
}

Shape Mnk(int64_t m, int64_t n, int64_t k) { return Shape{{{"M", m}, {"N", n}, {"K", k}}}; }

BundleEntry Entry(const std::string& gpu, const Shape& shape, int64_t bm, double median) {
  BundleEntry e;
  e.op = "gemm";
  e.dtype = "f16";
  e.gpu_model = gpu;
  e.shape = shape;
  // BK=7 is not a plausible default: tells entries and defaults apart.
  e.config.params = {{"BM", bm}, {"BN", 128}, {"BK", 7}};
  e.config_id = "cfg" + std::to_string(bm);
  e.kernel_hash = "0123456789abcdef0123456789abcdef";
  e.median_us = median;
  e.stdev_us = median / 100;
  e.ci95_us = median / 300;
  e.samples = 33;
  e.default_median_us = median * 1.4;
  e.baseline = "cublaslt 13.1.0";
  e.baseline_median_us = median * 0.9;
  e.backend = "sim";
  e.device_name = "sim " + gpu;
  e.nvrtc_version = "sim";
  e.driver_version = "";
  e.checked_against = "default";
  // Energy where measured: every other entry (the columns show only then).
  if (bm % 128 == 0) {
    e.energy_uj = median * 300;
    e.power_w = 300;
    e.power_limit_w = 700;
    e.objective = "energy";
  }
  return e;
}

Bundle MakeBundle() {
  Bundle b;
  b.name = "nightly-2025-11-21";
  b.farm_version = "0.1.0";
  b.created_unix = 1763740000;
  b.defaults["gemm"] = Config{{{"BM", 128}, {"BN", 128}, {"BK", 32}}};
  b.defaults["softmax"] = Config{{{"ROWS", 4}}};
  b.entries = {
      Entry("h100", Mnk(1024, 1024, 1024), 64, 20.5),        // 0
      Entry("h100", Mnk(4096, 4096, 4096), 256, 800.25),     // 1
      Entry("h100", Mnk(4096, 4096, 1024), 128, 210.0),      // 2
      Entry("h200", Mnk(4096, 4096, 4096), 192, 650.0),      // 3
  };
  b.entries.push_back(Entry("h100", Mnk(1024, 1024, 1024), 32, 19.0));  // 4: duplicate key
  b.entries[4].dtype = "bf16";
  return b;
}

using tune::testing::TempDir;

// The one rule for which rows a bundle draws on: per (GPU model, op, dtype,
// shape), the rows of the kernel hash of the key's most recent row; a tie
// goes to the smaller hash; order is kept.
TEST(NewestKernelOnly, KeepsEachKeysNewestHashAndBreaksTiesByHash) {
  auto row = [](const std::string& gpu, const std::string& shape, const std::string& hash, int64_t t,
                const std::string& config_id) {
    Measurement m;
    m.gpu_model = gpu;
    m.op = "gemm";
    m.dtype = "f16";
    m.shape = shape;
    m.kernel_hash = hash;
    m.unix_time = t;
    m.config_id = config_id;
    return m;
  };
  const std::vector<Measurement> rows = {
      row("h100", "M=1", "old", 10, "a"), row("h100", "M=1", "new", 20, "b"), row("h100", "M=1", "old", 30, "c"),
      row("h100", "M=2", "zz", 5, "d"),   row("h100", "M=2", "aa", 5, "e"),  row("a100", "M=1", "old", 1, "f"),
  };
  std::vector<std::string> kept;
  for (const auto& m : NewestKernelOnly(rows)) kept.push_back(m.config_id);
  // h100/M=1: "old" has the most recent row (30); h100/M=2: a tie, "aa"
  // wins; a100/M=1 is a key of its own.
  EXPECT_EQ(kept, (std::vector<std::string>{"a", "c", "e", "f"}));
}

TEST(BundleTest, BinaryRoundTrip) {
  const Bundle b = MakeBundle();
  const std::string bytes = EncodeBundle(b);
  auto out = DecodeBundle(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectSameBundle(*out, b);
}

// A bundle's cubins are encoded as the store's are (one KernelImage codec),
// but without the workers that vouched for them: host names are the farm's
// bookkeeping, and one winner's bytes must not differ from farm to farm.
TEST(BundleTest, KernelsShipWithoutTheFarmsWitnesses) {
  Bundle b = MakeBundle();
  KernelImage k{"hash1", "cfg1", "f16", "sm_90", "", testing::SyntheticCubin("sm_90", "gemm", "w"), {}, {}};
  k.sha256 = Sha256Hex(k.image);
  Bundle bare = b;
  bare.kernels = {k};
  k.witnesses = {"host-a:1", "host-b:1"};
  k.conflicts = {"host-c:1 " + std::string(64, '0')};
  b.kernels = {k};
  const std::string bytes = EncodeBundle(b);
  EXPECT_EQ(bytes, EncodeBundle(bare));
  auto out = DecodeBundle(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->kernels.size(), 1u);
  EXPECT_EQ(out->kernels[0].image, k.image);
  EXPECT_EQ(out->kernels[0].sha256, k.sha256);
  EXPECT_EQ(out->kernels[0].Key(), k.Key());
  EXPECT_TRUE(out->kernels[0].witnesses.empty());
  EXPECT_TRUE(out->kernels[0].conflicts.empty());
}

// Bundle bytes reach the decoder from files and from memory at any address;
// both go through the codec's frame checks.
TEST(BundleTest, MisalignedBytesDecodeAndTrailingBytesAreCorrupt) {
  const std::string bytes = EncodeBundle(MakeBundle());
  std::string shifted = " " + bytes;
  auto out = DecodeBundle(shifted.data() + 1, bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectSameBundle(*out, MakeBundle());

  const std::string padded = bytes + std::string(8, '\0');
  auto bad = DecodeBundle(padded.data(), padded.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "bundle is corrupt: 8 trailing bytes after the message");
}

TEST(BundleTest, JsonTextIsStableAndReadable) {
  const Bundle b = MakeBundle();
  const std::string json = BundleToJson(b);
  EXPECT_EQ(json, BundleToJson(b));
  // People read it: header first, params in spec order, not alphabetical.
  EXPECT_EQ(json.find("\"format_version\""), json.find('"'));
  EXPECT_LT(json.find("\"BM\": 128"), json.find("\"BK\": 32"));
  // What checked each winner, its energy where measured and what picked it.
  EXPECT_NE(json.find("\"checked_against\": \"default\""), std::string::npos);
  EXPECT_NE(json.find("\"power_limit_w\": 700"), std::string::npos);
  EXPECT_NE(json.find("\"objective\": \"energy\""), std::string::npos);
}

TEST(BundleTest, FilesRoundTripWithoutLeftovers) {
  TempDir dir;
  const Bundle b = MakeBundle();
  ASSERT_TRUE(WriteBundleFiles(b, dir.Sub("gemm")).ok());
  ASSERT_TRUE(WriteBundleFiles(b, dir.Sub("gemm")).ok());  // replacing works too
  EXPECT_TRUE(fs::exists(dir.Sub("gemm.tfb")));
  EXPECT_TRUE(fs::exists(dir.Sub("gemm.json")));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 2);
  auto out = ReadBundleFile(dir.Sub("gemm.tfb"));
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectSameBundle(*out, b);

  std::ifstream json_in(dir.Sub("gemm.json"));
  std::stringstream json;
  json << json_in.rdbuf();
  EXPECT_EQ(json.str(), BundleToJson(b));
}

TEST(BundleTest, MissingOrCorruptFileNamesTheFile) {
  TempDir dir;
  const std::string missing = dir.Sub("nope.tfb");
  auto r = ReadBundleFile(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(missing), std::string::npos) << r.status().message();

  const std::string bytes = EncodeBundle(MakeBundle());
  const std::string truncated = dir.Sub("truncated.tfb");
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2 / 8 * 8);
  r = ReadBundleFile(truncated);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(truncated), std::string::npos) << r.status().message();

  const std::string garbage = dir.Sub("garbage.tfb");
  std::ofstream(garbage, std::ios::binary) << "this is not a bundle, it is a text file\n";
  r = ReadBundleFile(garbage);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(garbage), std::string::npos) << r.status().message();

  const std::string empty = dir.Sub("empty.tfb");
  std::ofstream(empty, std::ios::binary).flush();
  EXPECT_FALSE(ReadBundleFile(empty).ok());
}

// Deployments read bundles from disk: a damaged file is an error, never a
// crash.
TEST(BundleTest, MutatedBytesNeverCrash) {
  const std::string good = EncodeBundle(MakeBundle());
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes = good;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 6); k < n; ++k) {
      const size_t pos = rng() % bytes.size();
      if (rng() % 4 == 0) {
        bytes.resize(pos);
        if (bytes.empty()) break;
      } else {
        bytes[pos] = static_cast<char>(rng());
      }
    }
    auto r = DecodeBundle(bytes.data(), bytes.size());
    if (r.ok()) {
      (void)BundleToJson(*r);  // what decodes can be printed
    } else {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
}

// A signed bundle whose config has more params than an op may have is
// refused at load, naming the entry and the bound, rather than loaded for
// every lookup to bind 100,000 params; so are defaults and launch plans
// over their bounds.
TEST(BundleTest, ConfigsAndPlansOverTheBoundsAreRefusedAtLoad) {
  const SecretKey key = SecretKey::Generate();
  auto refused = [&](const Bundle& b, const std::string& names) {
    const std::string bytes = EncodeSignedBundle(b, key);
    auto r = DecodeVerifiedBundle(bytes.data(), bytes.size(), {key.public_key()});
    ASSERT_FALSE(r.ok()) << names;
    EXPECT_NE(r.status().message().find(names), std::string::npos) << r.status().message();
  };
  Bundle b = MakeBundle();
  for (int i = 0; i < 100000; ++i) b.entries[1].config.params.emplace_back("P" + std::to_string(i), 1);
  refused(b, "entry gemm f16 h100: a config of 100003 params, more than the limit of " +
                 std::to_string(kMaxOpParams) + " params per config");

  b = MakeBundle();
  for (size_t i = 0; i <= kMaxOpParams; ++i) b.defaults["gemm"].params.emplace_back("P" + std::to_string(i), 1);
  refused(b, "default of gemm: a config of " + std::to_string(kMaxOpParams + 4) + " params");

  b = MakeBundle();
  BundleLaunchPlan plan;
  plan.op = "gemm";
  plan.kernel_hash = "0123456789abcdef0123456789abcdef";
  plan.function = "gemm";
  for (int i = 0; i < 100000; ++i) plan.vars.push_back("V" + std::to_string(i));
  b.launch_plans.push_back(plan);
  refused(b, "launch plan gemm@0123456789abcdef0123456789abcdef: 100000 variables, more than the limit of " +
                 std::to_string(kMaxOpParams + kMaxOpDims + 1));

  // At the bound, it loads.
  b = MakeBundle();
  while (b.entries[1].config.params.size() < kMaxOpParams)
    b.entries[1].config.params.emplace_back("P" + std::to_string(b.entries[1].config.params.size()), 1);
  const std::string bytes = EncodeSignedBundle(b, key);
  EXPECT_TRUE(DecodeVerifiedBundle(bytes.data(), bytes.size(), {key.public_key()}).ok());
}

// A kernel that takes tensor maps ships a plan the launcher can encode them
// from: the described buffer, its extents and the box, through both formats;
// a map that describes no buffer is refused at load.
TEST(BundleTest, TensorMapArgsRoundTripEvaluateAndAreCheckedAtLoad) {
  auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm_hopper");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto plan = MakeLaunchPlan(*spec, "0123456789abcdef0123456789abcdef");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  Bundle b = MakeBundle();
  b.launch_plans = {*plan};
  const std::string bytes = EncodeBundle(b);
  auto binary = DecodeBundle(bytes.data(), bytes.size());
  ASSERT_TRUE(binary.ok()) << binary.status().message();
  EXPECT_EQ(binary->format_version, 2u);  // readers of format 1 refuse it
  for (const Bundle& got : {*binary}) {
    ASSERT_EQ(got.launch_plans.size(), 1u);
    const BundleLaunchPlan& p = got.launch_plans[0];
    ASSERT_EQ(p.args.size(), 11u);
    const BundleLaunchArg& tma = p.args[4];
    EXPECT_EQ(tma.name, "tmA");
    EXPECT_TRUE(tma.tensor_map());
    EXPECT_EQ(tma.map_of, 0);
    EXPECT_EQ(tma.swizzle, 128);
    ASSERT_EQ(tma.extents.size(), 2u);
    EXPECT_EQ(tma.extents[0].text, "M");
    EXPECT_EQ(p.args[6].map_of, 2);  // tmC describes C
    EXPECT_FALSE(p.args[7].tensor_map());

    // The default's plan at M=1000, N=512, K=72: A is 1000 x 72, boxes of
    // BM/CN = 128 rows by 64.
    NamedValues dims = {{"M", 1000}, {"N", 512}, {"K", 72}};
    auto vars = LaunchVariables(p, spec->default_config.params, dims, "f16", LaunchDevice{232448, 1024, 132, 90, 50 << 20});
    ASSERT_TRUE(vars.ok()) << vars.status().message();
    auto g = EvaluateLaunchPlan(p, *vars);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->map_extents[4], (std::vector<int64_t>{1000, 72}));
    EXPECT_EQ(g->map_box[4], (std::vector<int64_t>{128, 64}));
    EXPECT_EQ(g->map_box[6], (std::vector<int64_t>{64, 32}));
    EXPECT_TRUE(g->map_extents[0].empty());
    EXPECT_EQ(p.args[10].name, "a_rows");
    EXPECT_EQ(g->scalars[10], 128);  // the kernel's count of A's box rows
    // Fewer rows than a tile: A's box, and a_rows with it, shrink to M
    // rounded up to 8.
    dims = {{"M", 36}, {"N", 512}, {"K", 72}};
    vars = LaunchVariables(p, spec->default_config.params, dims, "f16", LaunchDevice{232448, 1024, 132, 90, 50 << 20});
    ASSERT_TRUE(vars.ok()) << vars.status().message();
    g = EvaluateLaunchPlan(p, *vars);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->map_box[4], (std::vector<int64_t>{40, 64}));
    EXPECT_EQ(g->scalars[10], 40);
  }

  const SecretKey key = SecretKey::Generate();
  const std::pair<std::function<void(BundleLaunchArg&)>, std::string> broken_maps[] = {
      {[](BundleLaunchArg& a) { a.map_of = 7; }, "tensor map tmA: map_of 7 is not a buffer of the plan"},
      {[](BundleLaunchArg& a) { a.map_of = 99; }, "tensor map tmA: map_of 99 is not a buffer of the plan"},
      {[](BundleLaunchArg& a) { a.swizzle = 48; }, "tensor map tmA: swizzle 48 is not 0, 32, 64 or 128"},
      {[](BundleLaunchArg& a) { a.box.pop_back(); }, "tensor map tmA: 2 extents and 1 box dims"},
      {[](BundleLaunchArg& a) { a.buffer = true; }, "tensor map tmA: buffer or scalar_type says otherwise"},
  };
  for (const auto& [breaks, message] : broken_maps) {
    Bundle broken = b;
    breaks(broken.launch_plans[0].args[4]);
    const std::string signed_bytes = EncodeSignedBundle(broken, key);
    auto r = DecodeVerifiedBundle(signed_bytes.data(), signed_bytes.size(), {key.public_key()});
    ASSERT_FALSE(r.ok()) << message;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  }
}

TEST(BundleTest, NewerFormatIsRefused) {
  Bundle b = MakeBundle();
  b.format_version = 3;
  const std::string bytes = EncodeBundle(b);
  auto r = DecodeBundle(bytes.data(), bytes.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version 3"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace tune
