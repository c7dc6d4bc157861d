// Bundles that carry what a deployment launches: launch plans, per-model
// defaults and the measured cubins, from a real store through publish to a
// signed file and the runtime.
#include <gtest/gtest.h>

#include "support/cubin.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"
#include "bundle/bundle.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif
#include "opspec/config_space.h"
#include "publish/publish.h"
#include "store/records.h"
#include "store/result_store.h"
#include "tune/runtime.h"
#include "bundle/signing.h"

namespace tune {
namespace {

using tune::testing::TempDir;

const std::string kGpu = "h100-80gb-hbm3";

OpSpec GemmSpec() {
  auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return *spec;
}

// A stand-in cubin whose bytes differ per config (CI has no NVRTC; what is
// checked is that the bytes travel unchanged).
std::string FakeCubin(const std::string& tag, const std::string& arch = "sm_90") {
  return testing::SyntheticCubin(arch, "gemm", tag);
}

KernelImage Image(const std::string& hash, const Config& c, const std::string& arch) {
  KernelImage k{hash, c.Id(), "f16", arch, "", FakeCubin(c.Canonical(), arch), {}, {}};
  k.sha256 = Sha256Hex(k.image);
  return k;
}

Measurement Row(const OpSpec& spec, const std::string& hash, const Config& c, const std::string& shape, double us,
                bool passed = true) {
  Measurement m;
  m.gpu_model = kGpu;
  m.op = spec.name;
  m.dtype = "f16";
  m.shape = shape;
  m.kernel_hash = hash;
  m.config = c;
  m.config_id = c.Id();
  m.backend = "cuda";
  m.nvrtc_version = "13.0";
  m.arch = "sm_90";
  m.unix_time = 1763740000;
  m.check_passed = passed;
  m.failure = passed ? FailureClass::kNone : FailureClass::kWrongResult;
  m.samples = passed ? 10 : 0;
  m.median_us = m.mean_us = m.min_us = m.max_us = passed ? us : 0;
  return m;
}

// A config of the gemm space other than its default.
Config Other(const OpSpec& spec) {
  Config c = spec.default_config;
  for (auto& [name, value] : c.params)
    if (name == "STAGES") value = value == 2 ? 3 : 2;
  return c;
}

class PublishKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = GemmSpec();
    hash_ = KernelHash(spec_, "13.0");
    auto store = ResultStore::Open(dir_.path() + "/db");
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
    ASSERT_TRUE(store_->PutOp("gemm", 1763740000, spec_.package).ok());
  }
  void Put(const Measurement& m) { ASSERT_TRUE(store_->Put(m).ok()); }

  TempDir dir_;
  OpSpec spec_;
  std::string hash_;
  std::unique_ptr<ResultStore> store_;
};

TEST_F(PublishKernelsTest, ABundleCarriesPlansDefaultsAndTheMeasuredCubinsAndTheyRoundTripSigned) {
  const Config def = spec_.default_config, other = Other(spec_);
  const std::string small = "K=1024,M=1024,N=1024", big = "K=4096,M=4096,N=4096";
  Put(Row(spec_, hash_, def, small, 30));
  Put(Row(spec_, hash_, other, small, 20));
  Put(Row(spec_, hash_, def, big, 500));
  Put(Row(spec_, hash_, other, big, 450));
  // Two workers' keys sent each image: no single worker's word.
  for (const char* key : {"host-a", "host-b"}) {
    ASSERT_TRUE(store_->PutKernel(Image(hash_, def, "sm_90"), WitnessOfKey(testing::TestKey(key))).ok());
    ASSERT_TRUE(store_->PutKernel(Image(hash_, other, "sm_90"), WitnessOfKey(testing::TestKey(key))).ok());
  }

  std::vector<std::string> notes;
  auto b = BuildBundle(*store_, ResultFilter{}, "t", PublishOptions{}, &notes);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(notes.empty()) << notes[0];
  ASSERT_EQ(b->entries.size(), 2u);
  for (const BundleEntry& e : b->entries) {
    EXPECT_EQ(e.arch, "sm_90");
    EXPECT_EQ(e.config_id, other.Id());
  }
  ASSERT_EQ(b->launch_plans.size(), 1u);
  EXPECT_EQ(b->launch_plans[0].function, spec_.kernel);
  EXPECT_EQ(b->launch_plans[0].kernel_hash, hash_);
  // The op default passed on every shape of the model: it is the model's default.
  ASSERT_EQ(b->model_defaults.size(), 1u);
  EXPECT_EQ(b->model_defaults[0].config_id, def.Id());
  EXPECT_NEAR(b->model_defaults[0].median_us, std::sqrt(30.0 * 500.0), 1e-6);
  // Each cubin once: the winner's and the default's.
  ASSERT_EQ(b->kernels.size(), 2u);

  // The plan launches each entry as the farm did.
  Shape shape;
  ParseNamedValues(big, &shape.dims);
  auto vars = LaunchVariables(b->launch_plans[0], other.params, shape.dims, "f16", LaunchDevice{});
  ASSERT_TRUE(vars.ok()) << vars.status().message();
  auto got = EvaluateLaunchPlan(b->launch_plans[0], *vars);
  ASSERT_TRUE(got.ok()) << got.status().message();
  auto want = PlanLaunch(spec_, "f16", other, shape, DeviceInfo{});
  ASSERT_TRUE(want.ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got->grid[i], want->grid[i]);
    EXPECT_EQ(got->block[i], want->block[i]);
  }
  EXPECT_EQ(got->smem_bytes, want->smem_bytes);

  // Signed, verified and decoded: the same cubins, byte for byte.
  const SecretKey key = SecretKey::Generate();
  const std::string signed_bytes = EncodeSignedBundle(*b, key);
  auto back = DecodeVerifiedBundle(signed_bytes.data(), signed_bytes.size(), {key.public_key()});
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->kernels.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->kernels[i].image, b->kernels[i].image);
    EXPECT_EQ(back->kernels[i].sha256, b->kernels[i].sha256);
  }
  EXPECT_EQ(back->launch_plans[0].smem.code, b->launch_plans[0].smem.code);
  EXPECT_EQ(back->model_defaults[0].config_id, def.Id());

  // One changed byte of a cubin: the signature refuses the file, and an
  // unsigned read refuses the image.
  const size_t at = signed_bytes.find(FakeCubin(other.Canonical()));
  ASSERT_NE(at, std::string::npos);
  std::string tampered = signed_bytes;
  tampered[at + 100] ^= 1;
  auto refused = DecodeVerifiedBundle(tampered.data(), tampered.size(), {key.public_key()});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("signature check failed"), std::string::npos);
  std::string payload = EncodeBundle(*b);
  payload[payload.find(FakeCubin(other.Canonical())) + 100] ^= 1;
  auto corrupt = DecodeBundle(payload.data(), payload.size());
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("sha256 does not match"), std::string::npos)
      << corrupt.status().message();

  // JSON lists the cubins without their bytes.
  const std::string json = BundleToJson(*b);
  EXPECT_NE(json.find("\"sha256\""), std::string::npos);
  EXPECT_EQ(json.find(FakeCubin(other.Canonical()).substr(4)), std::string::npos);

  // Config-only on request.
  PublishOptions no_kernels;
  no_kernels.kernels = false;
  auto config_only = BuildBundle(*store_, ResultFilter{}, "t", no_kernels);
  ASSERT_TRUE(config_only.ok());
  EXPECT_TRUE(config_only->kernels.empty());
  EXPECT_EQ(config_only->launch_plans.size(), 1u);
}

TEST_F(PublishKernelsTest, AModelDefaultIsAConfigThatPassedThereAndMissingCubinsAreNamed) {
  const Config def = spec_.default_config, other = Other(spec_);
  const std::string small = "K=1024,M=1024,N=1024", big = "K=4096,M=4096,N=4096";
  // The op default fails on one shape (as it would past a GPU's shared memory).
  Put(Row(spec_, hash_, def, small, 30));
  Put(Row(spec_, hash_, def, big, 0, false));
  Put(Row(spec_, hash_, other, small, 40));
  Put(Row(spec_, hash_, other, big, 450));
  std::vector<std::string> notes;
  auto b = BuildBundle(*store_, ResultFilter{}, "t", PublishOptions{}, &notes);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->model_defaults.size(), 1u);
  EXPECT_EQ(b->model_defaults[0].config_id, other.Id());
  EXPECT_TRUE(b->kernels.empty());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("no cubin in the store"), std::string::npos) << notes[0];
}

TEST_F(PublishKernelsTest, EntriesCarryTheBaselineAndMayBeHeldToIt) {
  const Config def = spec_.default_config, other = Other(spec_);
  const std::string small = "K=1024,M=1024,N=1024", big = "K=4096,M=4096,N=4096";
  Put(Row(spec_, hash_, other, small, 20));
  Put(Row(spec_, hash_, other, big, 450));
  // cuBLASLt: slower than the winner at the small shape, faster at the big one.
  for (const auto& [shape, us] : {std::pair{small, 25.0}, std::pair{big, 300.0}}) {
    Measurement b = Row(spec_, hash_, def, shape, us);
    b.baseline = "cublaslt 13.1.0";
    ASSERT_TRUE(store_->PutBaseline(b).ok());
  }
  auto all = BuildBundle(*store_, ResultFilter{}, "t", PublishOptions{});
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->entries.size(), 2u);
  for (const BundleEntry& e : all->entries) {
    EXPECT_EQ(e.baseline, "cublaslt 13.1.0");
    EXPECT_EQ(e.baseline_median_us, e.shape.Canonical() == small ? 25.0 : 300.0)
        << e.shape.Canonical();
  }
  // The binary form keeps them, and the runtime answers with them.
  auto decoded = DecodeBundle(EncodeBundle(*all).data(), EncodeBundle(*all).size());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->entries[0].baseline_median_us, all->entries[0].baseline_median_us);

  PublishOptions held;
  held.min_vs_baseline = 1.0;
  std::vector<std::string> notes;
  auto b = BuildBundle(*store_, ResultFilter{}, "t", held, &notes);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->entries.size(), 1u);
  EXPECT_EQ(b->entries[0].shape.Canonical(), small);
  bool named = false;
  for (const std::string& n : notes) named |= n.find("stays out") != std::string::npos && n.find("0.667x") != std::string::npos;
  EXPECT_TRUE(named) << ::testing::PrintToString(notes);
}

TEST_F(PublishKernelsTest, TheStoreKeepsTheFirstImageOfAKeyAndRefusesDamagedOnes) {
  const Config def = spec_.default_config;
  KernelImage k = Image(hash_, def, "sm_90");
  KernelPut put;
  ASSERT_TRUE(store_->PutKernel(k, WitnessOfKey(testing::TestKey("host-a")), &put).ok());
  EXPECT_EQ(put, KernelPut::kNew);
  ASSERT_TRUE(store_->PutKernel(k, WitnessOfKey(testing::TestKey("host-a")), &put).ok());  // the same again: a no-op
  EXPECT_EQ(put, KernelPut::kSame);
  k.witnesses = {"forged:1", "forged:2"};  // a sender's say is not taken
  ASSERT_TRUE(store_->PutKernel(k, WitnessOfKey(testing::TestKey("host-b")), &put).ok());
  EXPECT_EQ(put, KernelPut::kWitnessed);
  KernelImage other = k;
  other.image += "x";
  other.sha256 = Sha256Hex(other.image);
  Status st = store_->PutKernel(other, WitnessOfKey(testing::TestKey("host-c")), &put);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_EQ(put, KernelPut::kConflict);
  EXPECT_NE(st.message().find(WitnessOfKey(testing::TestKey("host-c"))), std::string::npos) << st.message();
  auto got = store_->GetKernel(hash_, def.Id(), "f16", "sm_90");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->image, k.image);
  EXPECT_EQ(got->witnesses, (std::vector<std::string>{WitnessOfKey(testing::TestKey("host-a")), WitnessOfKey(testing::TestKey("host-b"))}));
  ASSERT_EQ(got->conflicts.size(), 1u);
  EXPECT_EQ(got->conflicts[0], WitnessOfKey(testing::TestKey("host-c")) + " " + other.sha256);
  EXPECT_FALSE(got->Corroborated());
  KernelImage lying = k;
  lying.sha256 = Sha256Hex("else");
  EXPECT_EQ(store_->PutKernel(lying).code(), StatusCode::kCorruption);
  KernelImage not_elf = k;
  not_elf.image = "MZ" + not_elf.image;
  not_elf.sha256 = Sha256Hex(not_elf.image);
  EXPECT_FALSE(store_->PutKernel(not_elf).ok());
  EXPECT_EQ(store_->GetKernel(hash_, def.Id(), "f16", "sm_80").status().code(), StatusCode::kNotFound);
}

// A cubin ships only when it is not one worker's word: one worker's image
// ships config-only unless this host recompiles the same bytes, two
// agreeing workers ship it, and an image another worker contradicts never
// ships (each a note that says why).
TEST_F(PublishKernelsTest, OneWorkersCubinShipsOnlyWhenRecompiledOrCorroborated) {
  const Config def = spec_.default_config;
  Put(Row(spec_, hash_, def, "K=1024,M=1024,N=1024", 30));
  const KernelImage k = Image(hash_, def, "sm_90");
  ASSERT_TRUE(store_->PutKernel(k, WitnessOfKey(testing::TestKey("host-a"))).ok());
  auto publish = [&](PublishOptions o, std::vector<std::string>* notes) {
    auto b = BuildBundle(*store_, ResultFilter{}, "t", o, notes);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return b.ok() ? b->kernels.size() : size_t(99);
  };
  std::vector<std::string> notes;
  EXPECT_EQ(publish(PublishOptions{}, &notes), 0u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("1 cubins ship config-only: measured by one worker"), std::string::npos) << notes[0];

  PublishOptions same;
  same.recompile = [&](const OpSpec&, const std::string&, const Config& c, const std::string& arch,
                       const std::string& hash) -> Result<std::string> {
    EXPECT_EQ(c.Id(), def.Id());
    EXPECT_EQ(arch, "sm_90");
    EXPECT_EQ(hash, hash_);
    return k.image;
  };
  notes.clear();
  EXPECT_EQ(publish(same, &notes), 1u);
  PublishOptions planted;
  planted.recompile = [&](const OpSpec&, const std::string&, const Config&, const std::string&,
                          const std::string&) -> Result<std::string> { return k.image + "other"; };
  notes.clear();
  EXPECT_EQ(publish(planted, &notes), 0u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("differs from the worker's image"), std::string::npos) << notes[0];

  ASSERT_TRUE(store_->PutKernel(k, WitnessOfKey(testing::TestKey("host-b"))).ok());
  notes.clear();
  EXPECT_EQ(publish(PublishOptions{}, &notes), 1u) << "two workers agree";
  KernelImage other = Image(hash_, def, "sm_90");
  other.image = testing::SyntheticCubin("sm_90", "gemm", "planted");
  other.sha256 = Sha256Hex(other.image);
  EXPECT_FALSE(store_->PutKernel(other, WitnessOfKey(testing::TestKey("host-c"))).ok());
  notes.clear();
  EXPECT_EQ(publish(same, &notes), 0u) << "a contradicted image never ships";
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("two workers sent different images"), std::string::npos) << notes[0];
}

#ifdef TUNEFARM_WITH_CUDA
// The same with cubins NVRTC makes here (no GPU needed): what a worker hands
// in is what the signed bundle carries, byte for byte, and one changed byte
// of it is refused.
TEST_F(PublishKernelsTest, NvrtcCubinsTravelFromTheStoreIntoASignedBundleByteForByte) {
  const Config def = spec_.default_config;
  CompiledKernel ck = CompileConfig(spec_, "f16", def, "sm_90", dir_.path() + "/cache");
  ASSERT_EQ(ck.failure, FailureClass::kNone) << ck.failure_message << ck.log;
  const std::string hash = ck.kernel_hash;
  Measurement row = Row(spec_, hash, def, "K=1024,M=1024,N=1024", 30);
  row.nvrtc_version = NvrtcVersionString();
  Put(row);
  KernelImage k{hash, def.Id(), "f16", "sm_90", Sha256Hex(ck.image), ck.image, {}, {}};
  ASSERT_TRUE(store_->PutKernel(k, WitnessOfKey(testing::TestKey("host-a"))).ok());
  EXPECT_TRUE(CheckCubinEntries(k.image, {spec_.kernel}).ok());
  EXPECT_FALSE(CheckCubinEntries(k.image, {spec_.kernel + "_x"}).ok());
  // One worker's image ships once this host compiles the same bytes (no
  // cache: NVRTC is deterministic).
  PublishOptions verify;
  verify.recompile = [](const OpSpec& spec, const std::string& dtype, const Config& c, const std::string& arch,
                        const std::string&) -> Result<std::string> {
    return CompileConfig(spec, dtype, c, arch, "").image;
  };
  auto b = BuildBundle(*store_, ResultFilter{}, "t", verify);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->kernels.size(), 1u);
  ASSERT_EQ(b->launch_plans.size(), 1u) << "the plan of the NVRTC kernel hash";
  const SecretKey key = SecretKey::Generate();
  std::string bytes = EncodeSignedBundle(*b, key);
  auto back = DecodeVerifiedBundle(bytes.data(), bytes.size(), {key.public_key()});
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->kernels[0].image, ck.image);
  EXPECT_EQ(back->kernels[0].sha256, Sha256Hex(ck.image));
  bytes[bytes.find(ck.image.substr(64, 64)) + 10] ^= 0x20;
  EXPECT_FALSE(DecodeVerifiedBundle(bytes.data(), bytes.size(), {key.public_key()}).ok());
}
#endif

// A bundle as publish makes it, for the runtime's chain.
runtime::Bundle Load(const Bundle& b, const TempDir& dir) {
  const SecretKey key = SecretKey::Generate();
  EXPECT_TRUE(WriteSignedBundleFiles(b, key, dir.path() + "/b").ok());
  auto rb = runtime::Bundle::Load(dir.path() + "/b.tfb", {FormatPublicKey(key.public_key())});
  EXPECT_TRUE(rb.ok()) << rb.status().message();
  return std::move(rb).value();
}

TEST(RuntimeModelDefaults, TheModelsDefaultComesBeforeTheOpsAndRefusedCandidatesAreSkipped) {
  Bundle b;
  b.defaults["gemm"] = Config{{{"BM", 256}}};
  BundleEntry e;
  e.op = "gemm";
  e.dtype = "f16";
  e.gpu_model = kGpu;
  e.shape.dims = {{"M", 1024}};
  e.config.params = {{"BM", 64}};
  e.config_id = "c64";
  e.arch = "sm_90";
  b.entries.push_back(e);
  e.shape.dims = {{"M", 4096}};
  e.config.params = {{"BM", 128}};
  e.config_id = "c128";
  b.entries.push_back(e);
  b.model_defaults.push_back(ModelDefault{"gemm", "f16", kGpu, Config{{{"BM", 32}}}, "c32", "kh", "sm_90", 5});
  TempDir dir;
  runtime::Bundle rb = Load(b, dir);

  runtime::Answer a = rb.lookup("gemm", "bf16", kGpu, {{"M", 1024}});
  EXPECT_EQ(a.level, runtime::Level::kDefault);
  EXPECT_EQ(a.config->get("BM"), 256);  // no model default for bf16: the op's
  // A GPU of the same family gets that model's default.
  a = rb.prepare("gemm", "f16", "h100-sxm5").lookup({1024});
  EXPECT_EQ(a.level, runtime::Level::kFamily);

  auto refuse = [](std::vector<std::string> ids) {
    return [ids](const runtime::Answer& a) {
      const std::string id = a.entry ? a.entry->config_id : "op-default";
      return std::find(ids.begin(), ids.end(), id) == ids.end();
    };
  };
  // The exact entry refused: the nearest one answers.
  a = rb.prepare("gemm", "f16", kGpu, "", refuse({"c64"})).lookup({1024});
  EXPECT_EQ(a.level, runtime::Level::kNearestShape);
  EXPECT_EQ(a.entry->config_id, "c128");
  // Every tuned entry refused: the model's default.
  a = rb.prepare("gemm", "f16", kGpu, "", refuse({"c64", "c128"})).lookup({1024});
  EXPECT_EQ(a.level, runtime::Level::kDefault);
  ASSERT_NE(a.entry, nullptr);
  EXPECT_EQ(a.entry->config_id, "c32");
  EXPECT_EQ(a.config->get("BM"), 32);
  // ... then the op's, then nothing.
  a = rb.prepare("gemm", "f16", kGpu, "", refuse({"c64", "c128", "c32"})).lookup({1024});
  EXPECT_EQ(a.level, runtime::Level::kDefault);
  EXPECT_EQ(a.entry, nullptr);
  EXPECT_EQ(a.config->get("BM"), 256);
  a = rb.prepare("gemm", "f16", kGpu, "", refuse({"c64", "c128", "c32", "op-default"})).lookup({1024});
  EXPECT_EQ(a.level, runtime::Level::kMiss);
  EXPECT_EQ(a.config, nullptr);
}

}  // namespace
}  // namespace tune
