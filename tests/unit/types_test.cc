#include "tune/status.h"
#include "base/types.h"
#include "base/backend_kinds.h"
#include "base/known_gpus.h"
#include "base/target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace tune {
namespace {

TEST(NamedValues, JoinAndParseRoundTrip) {
  NamedValues v = {{"M", 4096}, {"N", -3}, {"K", 0}};
  EXPECT_EQ(JoinNamedValues(v), "M=4096,N=-3,K=0");
  NamedValues back;
  ASSERT_TRUE(ParseNamedValues("M=4096,N=-3,K=0", &back));
  EXPECT_EQ(back, v);
  EXPECT_EQ(JoinNamedValues({}), "");
  ASSERT_TRUE(ParseNamedValues("", &back));
  EXPECT_TRUE(back.empty());
}

TEST(ParamValues, CategoricalValuesSpellAsWrittenAndKeepIntegerIdsAsTheyWere) {
  const ParamValues params = {{"BM", 128}, {"SCHEDULE", ParamValue::String("stream_k")}, {"TMA", ParamValue::Bool(true)}};
  EXPECT_EQ(JoinParamValues(params), "BM=128,SCHEDULE=stream_k,TMA=true");
  ParamValues back;
  ASSERT_TRUE(ParseParamValues("BM=128,SCHEDULE=stream_k,TMA=true", &back));
  EXPECT_EQ(back, params);
  EXPECT_EQ(back[1].second.kind(), ParamValue::Kind::kString);
  EXPECT_EQ(back[2].second.kind(), ParamValue::Kind::kBool);
  EXPECT_EQ(back[2].second.Number(), 1);
  // A string's number is its code: the same text, the same number, in a
  // double exactly, above any integer a tile size could be.
  const int64_t code = CategoricalCode("stream_k");
  EXPECT_EQ(params[1].second.Number(), code);
  EXPECT_EQ(ParamValue::String("stream_k").Number(), code);
  EXPECT_NE(CategoricalCode("split_k"), code);
  EXPECT_GE(code, int64_t{1} << 52);
  EXPECT_LT(code, int64_t{1} << 53);
  EXPECT_EQ(static_cast<int64_t>(static_cast<double>(code)), code);
  // The same config whatever the axis order; a string differs from an
  // integer of the same number.
  Config a{params}, b{{params[2], params[0], params[1]}};
  EXPECT_EQ(a.Canonical(), "BM=128,SCHEDULE=stream_k,TMA=true");
  EXPECT_EQ(a.Id(), b.Id());
  Config c{{{"BM", 128}, {"SCHEDULE", code}, {"TMA", 1}}};
  EXPECT_NE(a.Id(), c.Id());
  // An integer config's text, and so its id, is what it always was.
  Config ints{{{"BM", 128}, {"BN", 64}}};
  NamedValues as_ints = {{"BN", 64}, {"BM", 128}};
  std::sort(as_ints.begin(), as_ints.end());
  EXPECT_EQ(ints.Canonical(), JoinNamedValues(as_ints));
  // A runtime's (number, spelling) gives the value back.
  for (const auto& [name, v] : params) EXPECT_EQ(ParamValue::Of(v.Number(), v.IsInt() ? "" : v.ToString()), v);
}

TEST(ParamValues, OnlyMacroTokensAreStrings) {
  for (const char* ok : {"stream_k", "_x", "A1", "persistent"}) EXPECT_TRUE(CheckCategoricalText(ok).ok()) << ok;
  for (const char* bad : {"", "1x", "a b", "a-b", "true", "false", "\xff", "x\ny"})
    EXPECT_FALSE(CheckCategoricalText(bad).ok()) << bad;
  EXPECT_FALSE(CheckCategoricalText(std::string(65, 'a')).ok());
  ParamValues out = {{"keep", 1}};
  for (const char* bad : {"A=a b", "A=1x", "A=-", "A=x,", "A=\"x\""}) EXPECT_FALSE(ParseParamValues(bad, &out)) << bad;
  EXPECT_EQ(out, (ParamValues{{"keep", 1}}));
}

TEST(NamedValues, ParseRejectsMalformedText) {
  NamedValues out = {{"keep", 1}};
  for (const char* bad : {"A", "=1", "A=", "A=x", "A=1,", ",A=1", "A=1x", "A=1,,B=2", "A=99999999999999999999"}) {
    EXPECT_FALSE(ParseNamedValues(bad, &out)) << bad;
  }
  // A failed parse leaves the output alone.
  EXPECT_EQ(out, (NamedValues{{"keep", 1}}));
}

TEST(NamedValues, ValueOf) {
  NamedValues v = {{"BM", 128}, {"BN", 64}};
  EXPECT_EQ(ValueOf(v, "BN"), 64);
  EXPECT_EQ(ValueOf(v, "BK"), 0);
  EXPECT_EQ(ValueOf(v, "BK", -1), -1);
}

TEST(Config, CanonicalIsSortedByName) {
  Config a{{{"BM", 128}, {"BK", 32}}};
  Config b{{{"BK", 32}, {"BM", 128}}};
  EXPECT_EQ(a.Canonical(), "BK=32,BM=128");
  EXPECT_EQ(a.Canonical(), b.Canonical());
  // Axis order of the spec is kept in params; only the canonical text sorts.
  EXPECT_EQ(a.params[0].first, "BM");
}

TEST(Config, IdIsBlake2b64OfCanonical) {
  Config a{{{"BM", 128}, {"BK", 32}}};
  // hashlib.blake2b(b"BK=32,BM=128", digest_size=8).hexdigest()
  EXPECT_EQ(a.Id(), "6d0d4b88554fae96");
  EXPECT_EQ(Config{}.Id(), "e4a6a0577479b2b4");
  Config reordered{{{"BK", 32}, {"BM", 128}}};
  EXPECT_EQ(reordered.Id(), a.Id());
  Config other{{{"BM", 128}, {"BK", 64}}};
  EXPECT_NE(other.Id(), a.Id());
  EXPECT_EQ(a.Id().size(), 16u);
}

TEST(FailureClass, NamesRoundTrip) {
  const std::pair<FailureClass, const char*> all[] = {
      {FailureClass::kNone, "none"},
      {FailureClass::kCompileError, "compile_error"},
      {FailureClass::kResources, "resources"},
      {FailureClass::kLaunchError, "launch_error"},
      {FailureClass::kCrash, "crash"},
      {FailureClass::kTimeout, "timeout"},
      {FailureClass::kWrongResult, "wrong_result"},
      {FailureClass::kNan, "nan"},
      {FailureClass::kSkipped, "skipped"},
  };
  std::set<std::string> seen;
  for (const auto& [c, name] : all) {
    EXPECT_STREQ(FailureClassName(c), name);
    EXPECT_EQ(FailureClassFromName(name), c);
    seen.insert(name);
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_EQ(FailureClassFromName("exploded"), FailureClass::kNone);
  EXPECT_EQ(FailureClassFromName("CRASH"), FailureClass::kNone);
}

TEST(NormaliseGpuModel, DeviceNames) {
  EXPECT_EQ(NormaliseGpuModel("NVIDIA H100 80GB HBM3"), "h100-80gb-hbm3");
  EXPECT_EQ(NormaliseGpuModel("NVIDIA A100-SXM4-80GB"), "a100-sxm4-80gb");
  EXPECT_EQ(NormaliseGpuModel("NVIDIA GeForce RTX 4090"), "geforce-rtx-4090");
  EXPECT_EQ(NormaliseGpuModel("  Tesla V100--PCIE  "), "tesla-v100-pcie");
  EXPECT_EQ(NormaliseGpuModel("NVIDIA H200"), "h200");
  EXPECT_EQ(NormaliseGpuModel("h100-80gb-hbm3"), "h100-80gb-hbm3");  // idempotent
}

// A Status keeps its kind through a prefix; OK stays OK.
TEST(Status, CodesSurvivePrefixes) {
  const Status s = Status::Corruption("table 000012.sst: bad block");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  const Status where = s.WithPrefix("result store /x: ");
  EXPECT_EQ(where.code(), StatusCode::kCorruption);
  EXPECT_EQ(where.message(), "result store /x: table 000012.sst: bad block");
  EXPECT_TRUE(Status::OK().WithPrefix("x").ok());
  EXPECT_EQ(Status::OK().code(), StatusCode::kOk);
  EXPECT_EQ(Status::Error("e").code(), StatusCode::kError);
  EXPECT_EQ(Status::EndOfStream("closed").code(), StatusCode::kEndOfStream);
  const Result<int> r = Status::NotFound("no such sweep");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(BackendKinds, OneTableNamesEveryBackendAndWhichAreSimulated) {
  ASSERT_NE(FindBackendKind("cuda"), nullptr);
  EXPECT_FALSE(FindBackendKind("cuda")->simulated);
  EXPECT_EQ(FindBackendKind("cuda")->visible_devices_env, "CUDA_VISIBLE_DEVICES");
  ASSERT_NE(FindBackendKind("sim"), nullptr);
  EXPECT_TRUE(IsSimulatedBackend("sim"));
  EXPECT_FALSE(IsSimulatedBackend("cuda"));
  // Unknown names (what a hostile peer may send) are neither.
  EXPECT_EQ(FindBackendKind("Sim"), nullptr);
  EXPECT_EQ(FindBackendKind(""), nullptr);
  EXPECT_FALSE(IsSimulatedBackend("hip"));
  EXPECT_EQ(BackendNamesText(), "cuda, sim");
  EXPECT_EQ(BackendKinds().size(), 2u);
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// base/target.h: the one home of architecture names.
TEST(Target, ADevicesTargetAndTheArchitectureNames) {
  DeviceInfo h100;
  for (const DeviceInfo& d : KnownGpus())
    if (d.cc_major == 9) h100 = d;
  ASSERT_EQ(h100.cc_major, 9);
  h100.nvrtc_version = "13.0";
  const Target t = TargetOf(h100);
  EXPECT_EQ(t, (Target{"cuda", "sm_90", "13.0"}));
  EXPECT_EQ(t.Text(), "cuda sm_90, toolchain 13.0");
  EXPECT_EQ(CudaArch(12, 0), "sm_120");
  for (const char* good : {"sm_80", "sm_90a", "sm_100", "sm_100a"}) EXPECT_TRUE(IsCudaArch(good)) << good;
  for (const char* bad : {"sm_9", "sm_1000", "sm_90b", "sm_90f", "sm90", "compute_90", "", "sm_", "sm_9a"})
    EXPECT_FALSE(IsCudaArch(bad)) << bad;
  EXPECT_EQ(ArchSm("sm_90a"), 90);
  EXPECT_EQ(ArchSm("sm_100f"), 100);  // a family image's SM, as a cubin's flags give it
  EXPECT_EQ(ArchSm("sm_9"), 0);
  EXPECT_EQ(ArchCapability("sm_90a"), "sm_90");
  EXPECT_EQ(ArchCapability("sm_80"), "sm_80");
}

}  // namespace
}  // namespace tune
