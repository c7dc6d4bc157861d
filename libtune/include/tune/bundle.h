// Bundles: the best configs for deployments, and their run-time lookup.
//
// A bundle holds, per (op, dtype, GPU model, shape), the winning config with
// its kernel hash, latency, spread and provenance, plus each op's default
// config. Stored as Cap'n Proto binary (schema/bundle.capnp) for deployments
// and JSON for people.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tune/status.h"
#include "tune/types.h"

namespace tune {

struct BundleEntry {
  std::string op, dtype, gpu_model;
  Shape shape;
  Config config;
  std::string config_id, kernel_hash;
  double median_us = 0, stdev_us = 0, ci95_us = 0;
  uint32_t samples = 0;
  double default_median_us = 0;     // the op's default config on the same key (0 = not measured)
  std::string backend;              // "cuda" | "sim"
  std::string device_name, nvrtc_version, driver_version;
};

struct Bundle {
  uint32_t format_version = 1;
  std::string name;
  std::string farm_version;
  int64_t created_unix = 0;
  std::map<std::string, Config> defaults;   // op -> default config
  std::vector<BundleEntry> entries;
};

std::string EncodeBundle(const Bundle& b);                         // Cap'n Proto binary
Result<Bundle> DecodeBundle(const void* data, size_t size);
std::string BundleToJson(const Bundle& b);                         // pretty, stable order
// Inverse of BundleToJson, for bundles edited or assembled by hand. Errors
// name the offending field.
Result<Bundle> BundleFromJson(const std::string& json);
Status WriteBundleFiles(const Bundle& b, const std::string& path_without_ext);  // .tfb + .json
Result<Bundle> ReadBundleFile(const std::string& path);            // .tfb

// Which level of the fallback chain answered a lookup.
enum class LookupLevel { kExact, kNearestShape, kDefault, kMiss };
const char* LookupLevelName(LookupLevel l);

struct LookupResult {
  LookupLevel level = LookupLevel::kMiss;
  const Config* config = nullptr;         // owned by the BundleIndex; nullptr on kMiss
  const BundleEntry* entry = nullptr;     // nullptr for kDefault / kMiss
};

// Run-time lookup over a loaded bundle. Fallback chain:
//   1. exact (op, dtype, gpu_model, shape);
//   2. nearest tuned shape of the same (op, dtype, gpu_model), by Euclidean
//      distance of log2 of each dim (ties: first in bundle order);
//   3. the op's default config.
// Immutable after construction; safe to share across threads.
class BundleIndex {
 public:
  explicit BundleIndex(Bundle bundle);
  LookupResult Lookup(const std::string& op, const std::string& dtype, const std::string& gpu_model,
                      const Shape& shape) const;
  const Bundle& bundle() const { return bundle_; }

 private:
  Bundle bundle_;
  std::map<std::string, std::vector<size_t>> by_group_;  // "op\0dtype\0gpu" -> entry indices
  std::map<std::string, size_t> exact_;                  // group + "\0" + shape -> entry index
};

}  // namespace tune
