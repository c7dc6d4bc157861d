// The C API's prepared lookups (tune/c.h, tunefarm_lookup_prepare): the same
// answers as its JSON lookup at every level of the chain, and errors, never
// crashes, for bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "bundle/shape_selector.h"
#include "bundle/signing.h"
#include "support/temp_dir.h"
#include "tune/c.h"

namespace {

using Json = nlohmann::ordered_json;
using tune::testing::TempDir;

tune::Shape Mnk(int64_t m, int64_t n, int64_t k) { return tune::Shape{{{"M", m}, {"N", n}, {"K", k}}}; }

tune::BundleEntry E(const std::string& gpu, const tune::Shape& shape, int64_t bm) {
  tune::BundleEntry e;
  e.op = "gemm";
  e.dtype = "f16";
  e.gpu_model = gpu;
  e.shape = shape;
  e.config.params = {{"BM", bm}, {"SCHEDULE", tune::ParamValue::String("stream_k")}, {"TMA", tune::ParamValue::Bool(true)}};
  e.config_id = "cfg" + std::to_string(bm);
  e.kernel_hash = "hash" + std::to_string(bm);
  e.arch = "sm_90a";
  e.median_us = static_cast<double>(bm) / 8;
  e.backend = "cuda";
  return e;
}

tune::BundleEntry Mm(int64_t m, int64_t n, int64_t bm) {
  tune::BundleEntry e = E("h100-80gb-hbm3", tune::Shape{{{"M", m}, {"N", n}}}, bm);
  e.op = "mm";
  e.config.params = {{"BM", bm}};
  return e;
}

// Every level: exact, nearest shape, family, a model's default, an arch's
// default, the op's default, predicted (mm's selector) and a miss.
tune::Bundle TestBundle() {
  tune::Bundle b;
  b.name = "capi-lookup-test";
  b.farm_version = "0.1.0";
  b.created_unix = 1763740000;
  b.defaults["gemm"] = tune::Config{{{"BM", 32}, {"SCHEDULE", tune::ParamValue::String("persistent")},
                                     {"TMA", tune::ParamValue::Bool(false)}}};
  b.defaults["mm"] = tune::Config{{{"BM", 1}}};
  b.entries = {E("h100-80gb-hbm3", Mnk(1024, 1024, 1024), 64), E("h100-80gb-hbm3", Mnk(4096, 4096, 4096), 256),
               E("h100-sxm5", Mnk(2048, 2048, 2048), 96)};
  b.entries[1].baseline = "cublaslt 13.1.0";
  b.entries[1].baseline_median_us = 40;
  b.model_defaults.push_back(tune::ModelDefault{"gemm", "f16", "a100-sxm4-40gb",
                                                tune::Config{{{"BM", 48}, {"SCHEDULE", tune::ParamValue::String("persistent")},
                                                              {"TMA", tune::ParamValue::Bool(false)}}},
                                                "cfg48", "hash48", "sm_80", 12});
  b.arch_defaults.push_back(tune::ArchDefault{"gemm", "sm_89", tune::Config{{{"BM", 24}}}});
  const size_t first = b.entries.size();
  for (auto [m, n, bm] : std::vector<std::array<int64_t, 3>>{
           {1024, 1024, 64}, {2048, 2048, 256}, {1024, 2048, 64}, {2048, 4096, 256}, {2048, 1024, 64}, {4096, 4096, 256}})
    b.entries.push_back(Mm(m, n, bm));
  tune::SelectorInput in;
  for (size_t i = first; i < b.entries.size(); ++i) in.shapes.push_back(b.entries[i].shape);
  in.candidates = {b.entries[first].config, b.entries[first + 1].config};
  in.us = {{10, 60, 20, 120, 20, 240}, {14, 40, 28, 80, 28, 160}};
  const tune::ShapeSelector fitted = tune::FitShapeSelector(in);
  tune::BundleSelector sel{"mm", "f16", "h100-80gb-hbm3", fitted.dims, {}, fitted.nodes};
  for (size_t c : fitted.candidates) sel.entries.push_back(static_cast<uint32_t>(first + c));
  b.selectors.push_back(sel);
  return b;
}

// tunefarm_params_t as the JSON answer spells it.
Json ParamsJson(const tunefarm_params_t& p) {
  Json j = Json::object();
  for (size_t i = 0; i < p.n; ++i) {
    if (p.kinds[i] == TUNEFARM_PARAM_BOOL) j[p.names[i]] = p.values[i] != 0;
    else if (p.kinds[i] == TUNEFARM_PARAM_STRING) j[p.names[i]] = std::string(p.texts[i]);
    else j[p.names[i]] = p.values[i];
  }
  return j;
}

Json EntryJson(const tunefarm_entry_t& e) {
  Json j{{"gpu_model", e.gpu_model}, {"shape", ParamsJson(e.shape)}, {"config_id", e.config_id},
         {"kernel_hash", e.kernel_hash}, {"arch", e.arch},           {"backend", e.backend},
         {"median_us", e.median_us}};
  if (*e.baseline) {
    j["baseline"] = e.baseline;
    j["baseline_median_us"] = e.baseline_median_us;
  }
  return j;
}

Json AnswerJson(const tunefarm_answer_t& a) {
  Json j;
  j["level"] = a.level_name;
  j["config"] = a.level == TUNEFARM_LEVEL_MISS ? Json(nullptr) : ParamsJson(a.config);
  j["entry"] = a.entry ? EntryJson(*a.entry) : Json(nullptr);
  if (a.ncandidates > 0) {
    Json list = Json::array();
    for (size_t i = 0; i < a.ncandidates; ++i)
      list.push_back(Json{{"config", ParamsJson(a.candidates[i]->config)}, {"entry", EntryJson(*a.candidates[i])}});
    j["candidates"] = std::move(list);
  }
  return j;
}

// Takes a message the C API allocated; "" when there was none.
std::string Take(char* err) {
  std::string s = err ? err : "";
  tunefarm_free(err);
  return s;
}

class CapiLookupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("TUNEFARM_FORCE_DEFAULTS");
    std::array<uint8_t, tune::kSecretSeedBytes> seed{};
    seed.fill(5);
    const tune::SecretKey key = tune::SecretKey::FromSeed(seed);
    key_file_ = dir_.Sub("farm.pub");
    std::ofstream(key_file_) << tune::FormatPublicKey(key.public_key());
    ASSERT_TRUE(tune::WriteSignedBundleFiles(TestBundle(), key, dir_.Sub("c")).ok());
    bundle_ = Load();
    ASSERT_NE(bundle_, nullptr);
  }
  void TearDown() override { tunefarm_bundle_destroy(bundle_); }

  tunefarm_bundle_t* Load() {
    const char* trusted[] = {key_file_.c_str()};
    char* err = nullptr;
    tunefarm_bundle_t* b = tunefarm_bundle_load((dir_.Sub("c") + ".tfb").c_str(), trusted, 1, &err);
    EXPECT_NE(b, nullptr) << Take(err);
    return b;
  }

  static Json Misses(tunefarm_bundle_t* b) {
    char* err = nullptr;
    char* text = tunefarm_bundle_misses(b, &err);
    EXPECT_NE(text, nullptr) << Take(err);
    Json j = text ? Json::parse(text) : Json();
    tunefarm_free(text);
    return j;
  }

  Json JsonLookup(const char* op, const char* gpu, const std::vector<const char*>& names,
                  const std::vector<int64_t>& values, const char* arch) {
    char* err = nullptr;
    char* text = tunefarm_bundle_lookup(bundle_, op, "f16", gpu, names.data(), values.data(), names.size(), arch, &err);
    EXPECT_NE(text, nullptr) << Take(err);
    Json j = text ? Json::parse(text) : Json();
    tunefarm_free(text);
    return j;
  }

  TempDir dir_;
  std::string key_file_;
  tunefarm_bundle_t* bundle_ = nullptr;
};

TEST_F(CapiLookupTest, AnswersAsTheJsonLookupAtEveryLevel) {
  struct Query {
    const char* op;
    const char* gpu;
    const char* arch;
    std::vector<const char*> names;
    std::vector<int64_t> values;
    const char* level;
  };
  const std::vector<Query> queries = {
      {"gemm", "h100-80gb-hbm3", nullptr, {"M", "N", "K"}, {4096, 4096, 4096}, "exact"},
      {"gemm", "h100-80gb-hbm3", nullptr, {"K", "M", "N"}, {1024, 1024, 1024}, "exact"},  // another order
      {"gemm", "h100-80gb-hbm3", nullptr, {"M", "N", "K"}, {3000, 4000, 4096}, "nearest_shape"},
      {"gemm", "h100-nvl", nullptr, {"M", "N", "K"}, {2000, 2048, 2048}, "family"},
      {"gemm", "a100-sxm4-40gb", "sm_80", {"M", "N", "K"}, {64, 64, 64}, "default"},  // the model's
      {"gemm", "l4", "sm_89", {"M", "N", "K"}, {64, 64, 64}, "default"},              // the arch's
      {"gemm", "l4", "sm_86", {"M", "N", "K"}, {64, 64, 64}, "default"},              // the op's
      {"gemm", "l4", nullptr, {"M", "N", "K"}, {64, 64, 64}, "default"},
      {"gemm", "h100-80gb-hbm3", nullptr, {"X", "Y", "Z"}, {1024, 1024, 1024}, "default"},  // not its dims
      {"mm", "h100-80gb-hbm3", nullptr, {"M", "N"}, {1024, 4096}, "predicted"},
      {"mm", "h100-80gb-hbm3", nullptr, {"N", "M"}, {4096, 1024}, "predicted"},
      {"nope", "h100-80gb-hbm3", nullptr, {"M"}, {7}, "miss"},
  };
  tunefarm_bundle_t* prepared_side = Load();  // its misses are those of the prepared lookups
  ASSERT_NE(prepared_side, nullptr);
  for (const Query& q : queries) {
    SCOPED_TRACE(std::string(q.op) + " on " + q.gpu + " as " + q.level);
    const Json want = JsonLookup(q.op, q.gpu, q.names, q.values, q.arch);
    ASSERT_EQ(want["level"], q.level) << want.dump();
    EXPECT_EQ(JsonLookup(q.op, q.gpu, q.names, q.values, q.arch), want);
    char* err = nullptr;
    tunefarm_lookup_t* l = tunefarm_lookup_prepare(prepared_side, q.op, "f16", q.gpu, q.arch, q.names.data(), q.names.size(), &err);
    ASSERT_NE(l, nullptr) << Take(err);
    tunefarm_answer_t a{};
    ASSERT_EQ(tunefarm_lookup(l, q.values.data(), q.values.size(), &a, &err), 0) << Take(err);
    EXPECT_EQ(AnswerJson(a), want);
    // Again: the cached answer, at the same addresses.
    tunefarm_answer_t again{};
    ASSERT_EQ(tunefarm_lookup(l, q.values.data(), q.values.size(), &again, &err), 0) << Take(err);
    EXPECT_EQ(again.config.names, a.config.names);
    EXPECT_EQ(again.entry, a.entry);
    EXPECT_EQ(AnswerJson(again), want);
    tunefarm_lookup_destroy(l);
  }
  // The same keys counted, under the same dims, as often.
  const Json misses = Misses(bundle_);
  EXPECT_EQ(misses["misses"].size(), 5u) << misses.dump();  // l4 asked thrice, one key
  EXPECT_EQ(Misses(prepared_side), misses);
  tunefarm_bundle_destroy(prepared_side);
}

TEST_F(CapiLookupTest, ShapesTakingTurnsKeepTheirAnswersAndOutliveTheBundleHandle) {
  const char* names[] = {"M", "N", "K"};
  char* err = nullptr;
  tunefarm_lookup_t* l = tunefarm_lookup_prepare(bundle_, "gemm", "f16", "h100-80gb-hbm3", nullptr, names, 3, &err);
  ASSERT_NE(l, nullptr) << Take(err);
  tunefarm_bundle_destroy(bundle_);  // the prepared lookup keeps the bundle
  bundle_ = nullptr;
  const int64_t small[] = {1024, 1024, 1024}, large[] = {4096, 4096, 4096};
  tunefarm_answer_t a{}, b{}, a2{};
  ASSERT_EQ(tunefarm_lookup(l, small, 3, &a, &err), 0) << Take(err);
  ASSERT_EQ(tunefarm_lookup(l, large, 3, &b, &err), 0) << Take(err);
  ASSERT_EQ(tunefarm_lookup(l, small, 3, &a2, &err), 0) << Take(err);
  EXPECT_EQ(a.level, TUNEFARM_LEVEL_EXACT);
  EXPECT_EQ(b.level, TUNEFARM_LEVEL_EXACT);
  EXPECT_EQ(a.config.values[0], 64);  // still valid after the later lookups
  EXPECT_EQ(b.config.values[0], 256);
  EXPECT_EQ(a2.entry, a.entry);
  EXPECT_STREQ(b.entry->baseline, "cublaslt 13.1.0");
  EXPECT_STREQ(a.config.texts[1], "stream_k");
  EXPECT_EQ(a.config.kinds[2], TUNEFARM_PARAM_BOOL);
  tunefarm_lookup_destroy(l);
}

TEST_F(CapiLookupTest, BadInputIsAnErrorNeverACrash) {
  const char* names[] = {"M", "N", "K"};
  const int64_t dims[] = {1024, 1024, 1024};
  tunefarm_answer_t a{};
  a.level = -7;  // left alone on failure
  char* err = nullptr;

  EXPECT_EQ(tunefarm_lookup(nullptr, dims, 3, &a, &err), -1);
  EXPECT_NE(Take(err).find("tunefarm_lookup"), std::string::npos);
  err = nullptr;

  EXPECT_EQ(tunefarm_lookup_prepare(nullptr, "gemm", "f16", "h100", nullptr, names, 3, &err), nullptr);
  EXPECT_NE(Take(err).find("NULL"), std::string::npos);
  err = nullptr;
  EXPECT_EQ(tunefarm_lookup_prepare(bundle_, "gemm", "f16", "h100", nullptr, nullptr, 3, &err), nullptr);
  EXPECT_NE(Take(err).find("NULL"), std::string::npos);
  err = nullptr;
  const char* with_null[] = {"M", nullptr, "K"};
  EXPECT_EQ(tunefarm_lookup_prepare(bundle_, "gemm", "f16", "h100", nullptr, with_null, 3, &err), nullptr);
  EXPECT_NE(Take(err).find("dim name 1 is NULL"), std::string::npos);
  err = nullptr;
  const char* twice[] = {"M", "N", "M"};
  EXPECT_EQ(tunefarm_lookup_prepare(bundle_, "gemm", "f16", "h100", nullptr, twice, 3, &err), nullptr);
  EXPECT_NE(Take(err).find("dim M named twice"), std::string::npos);
  err = nullptr;
  std::vector<const char*> many(17, "D");
  EXPECT_EQ(tunefarm_lookup_prepare(bundle_, "gemm", "f16", "h100", nullptr, many.data(), many.size(), &err), nullptr);
  EXPECT_NE(Take(err).find("at most 16"), std::string::npos);
  err = nullptr;

  tunefarm_lookup_t* l = tunefarm_lookup_prepare(bundle_, "gemm", "f16", "h100-80gb-hbm3", nullptr, names, 3, &err);
  ASSERT_NE(l, nullptr) << Take(err);
  EXPECT_EQ(tunefarm_lookup(l, dims, 2, &a, &err), -1);
  EXPECT_EQ(Take(err), "tunefarm_lookup: 2 dims for 3 (M, N, K)");
  err = nullptr;
  const int64_t negative[] = {1024, -1, 1024};
  EXPECT_EQ(tunefarm_lookup(l, negative, 3, &a, &err), -1);
  EXPECT_EQ(Take(err), "tunefarm_lookup: dim N = -1 is negative (a dim is a size, >= 0)");
  err = nullptr;
  EXPECT_EQ(tunefarm_lookup(l, nullptr, 3, &a, &err), -1);
  EXPECT_NE(Take(err).find("NULL"), std::string::npos);
  err = nullptr;
  EXPECT_EQ(tunefarm_lookup(l, dims, 3, nullptr, &err), -1);
  EXPECT_NE(Take(err).find("NULL"), std::string::npos);
  err = nullptr;
  EXPECT_EQ(a.level, -7);
  // Still good after the refusals; a NULL errptr is allowed.
  EXPECT_EQ(tunefarm_lookup(l, dims, 3, &a, nullptr), 0);
  EXPECT_EQ(a.level, TUNEFARM_LEVEL_EXACT);
  tunefarm_lookup_destroy(l);
  tunefarm_lookup_destroy(nullptr);
}

}  // namespace
