#include "tune/status.h"
#include "base/types.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tune
