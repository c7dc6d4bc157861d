// Cost of a run-time lookup per fallback level, prepared and not, on a
// bundle of realistic size. Figures and how to run: bench/lookup.md.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "tune/runtime.h"
#include "bundle/signing.h"

namespace {

namespace rt = tune::runtime;

// Tuned shapes per model: a grid of M, N, K sizes, 6^3 = 216 for the
// h100, 3^3 = 27 for the h200, 2^3 = 8 for the a100. A nearest-shape lookup
// scans them all, so its cost grows with the count.
struct ModelGrid {
  const char* model;
  std::vector<int64_t> sizes;
};
const ModelGrid kGrids[] = {
    {"h100-80gb-hbm3", {512, 1024, 2048, 4096, 8192, 16384}},
    {"h200", {1024, 4096, 16384}},
    {"a100-sxm4-80gb", {1024, 8192}},
};
const char* const kDtypes[] = {"f16", "bf16"};

tune::Bundle MakeBundle() {
  tune::Bundle b;
  b.name = "bench";
  b.farm_version = "0.1.0";
  b.defaults["gemm"] = tune::Config{{{"BM", 128}, {"BN", 128}, {"BK", 32}}};
  for (const auto& [model, sizes] : kGrids) {
    for (const char* dtype : kDtypes) {
      for (int64_t m : sizes) {
        for (int64_t n : sizes) {
          for (int64_t k : sizes) {
            tune::BundleEntry e;
            e.op = "gemm";
            e.dtype = dtype;
            e.gpu_model = model;
            e.shape.dims = {{"M", m}, {"N", n}, {"K", k}};
            e.config.params = {{"BM", m >= 4096 ? 256 : 128}, {"BN", 128}, {"BK", k >= 4096 ? 64 : 32}};
            e.median_us = 1;
            b.entries.push_back(std::move(e));
          }
        }
      }
    }
  }
  return b;
}

const rt::Bundle& TheBundle() {
  static const rt::Bundle* bundle = [] {
    std::array<uint8_t, tune::kSecretSeedBytes> seed{};
    seed[0] = 1;
    const tune::SecretKey key = tune::SecretKey::FromSeed(seed);
    const std::string bytes = tune::EncodeSignedBundle(MakeBundle(), key);
    auto r = rt::Bundle::LoadFromMemory(bytes.data(), bytes.size(), {tune::FormatPublicKey(key.public_key())},
                                        "bench", {rt::LoadOptions::ForceDefaults::kNo});
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().message().c_str());
      std::abort();
    }
    return new rt::Bundle(std::move(r).value());
  }();
  return *bundle;
}

// Two shapes per case, so that the alternating runs defeat the one-entry
// cache and pay for the full resolution every call. Nearest and family
// scans are over the h100's 216 shapes unless the name says otherwise.
struct Case {
  const char* model;
  std::array<int64_t, 3> shapes[2];
  rt::Level level;
};

const Case kExact{"h100-80gb-hbm3", {{4096, 4096, 4096}, {1024, 8192, 2048}}, rt::Level::kExact};
const Case kNearest{"h100-80gb-hbm3", {{3000, 5000, 700}, {1500, 6000, 12000}}, rt::Level::kNearestShape};
const Case kNearest27{"h200", {{3000, 5000, 700}, {1500, 6000, 12000}}, rt::Level::kNearestShape};
const Case kNearest8{"a100-sxm4-80gb", {{3000, 5000, 700}, {1500, 6000, 12000}}, rt::Level::kNearestShape};
const Case kFamily{"h100-sxm5", {{3000, 5000, 700}, {1500, 6000, 12000}}, rt::Level::kFamily};
const Case kDefault{"l4", {{3000, 5000, 700}, {1500, 6000, 12000}}, rt::Level::kDefault};

void CheckLevel(benchmark::State& state, rt::Level got, rt::Level want) {
  if (got != want) state.SkipWithError(("answered at level " + std::string(rt::LevelName(got))).c_str());
}

void Prepared(benchmark::State& state, const Case& c, bool alternate) {
  rt::PreparedLookup p = TheBundle().prepare("gemm", "f16", c.model);
  CheckLevel(state, p.lookup(c.shapes[0]).level, c.level);
  size_t i = 0;
  for (auto _ : state) {
    rt::Answer a = p.lookup(c.shapes[i]);
    benchmark::DoNotOptimize(a);
    if (alternate) i ^= 1;
  }
}

void Unprepared(benchmark::State& state, const Case& c) {
  const rt::Bundle& b = TheBundle();
  size_t i = 0;
  auto query = [&](size_t s) {
    const rt::Dim dims[] = {{"M", c.shapes[s][0]}, {"N", c.shapes[s][1]}, {"K", c.shapes[s][2]}};
    return b.lookup("gemm", "f16", c.model, dims);
  };
  CheckLevel(state, query(0).level, c.level);
  for (auto _ : state) {
    rt::Answer a = query(i);
    benchmark::DoNotOptimize(a);
    i ^= 1;
  }
}

BENCHMARK_CAPTURE(Prepared, exact_repeat, kExact, false);
BENCHMARK_CAPTURE(Prepared, exact_alternate, kExact, true);
BENCHMARK_CAPTURE(Prepared, nearest_repeat, kNearest, false);
BENCHMARK_CAPTURE(Prepared, nearest_alternate, kNearest, true);
BENCHMARK_CAPTURE(Prepared, nearest27_alternate, kNearest27, true);
BENCHMARK_CAPTURE(Prepared, nearest8_alternate, kNearest8, true);
BENCHMARK_CAPTURE(Prepared, family_alternate, kFamily, true);
BENCHMARK_CAPTURE(Prepared, default_repeat, kDefault, false);
BENCHMARK_CAPTURE(Prepared, default_alternate, kDefault, true);
BENCHMARK_CAPTURE(Unprepared, exact, kExact);
BENCHMARK_CAPTURE(Unprepared, nearest, kNearest);
BENCHMARK_CAPTURE(Unprepared, family, kFamily);
BENCHMARK_CAPTURE(Unprepared, default, kDefault);

}  // namespace

BENCHMARK_MAIN();
