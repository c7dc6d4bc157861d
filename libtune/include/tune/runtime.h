// The run-time library for deployments: load a signed bundle once, then ask
// for the tuned config of (op, dtype, GPU model, shape) on the hot path.
//
//   find_package(tunefarm REQUIRED)
//   target_link_libraries(app PRIVATE tunefarm::runtime)
//
//   auto bundle = tune::runtime::Bundle::Load("gemm.tfb", {"/etc/tunefarm/farm.pub"});
//   if (!bundle.ok()) { log(bundle.status().message()); ... }
//   tune::runtime::PreparedLookup gemm = bundle->prepare("gemm", "f16", "h100-sxm5");
//   tune::runtime::Answer a = gemm.lookup({M, N, K});     // dims in the op's order
//   int64_t bm = a.config->get("BM");                    // a.level says who answered
//
// This header needs only the C++ standard library and tune/status.h.
//
// Fallback chain. Every answer says which level produced it:
//   kExact         a tuned entry for exactly (op, dtype, gpu_model, shape).
//   kPredicted     a shape the farm never tuned, of an (op, dtype,
//                  gpu_model) whose tuned shapes left a selector in the
//                  bundle (bundle/shape_selector.h): a small tree over
//                  log2 dims and their pairs' products picks one of a few
//                  tuned configs that held every tuned shape within 5% of
//                  its best; `candidates` lists those it chose from. Where
//                  the pick cannot run at these dims, kNearestShape answers.
//   kNearestShape  the tuned shape of the same (op, dtype, gpu_model) nearest
//                  to the query: smallest Euclidean distance between the
//                  vectors of log2(max(dim, 1)), dims paired by name (the
//                  one metric of the farm: `tunefarm bundle lookup` answers
//                  through this chain too). Ties go to the entry
//                  that comes first in the bundle.
//   kFamily        no tuned shape for this GPU model: the nearest shape, same
//                  metric and ties, among the entries of the same op and dtype
//                  for the other models of its GPU family (GpuFamily).
//   kDefault       the default of the GPU model (ModelDefault in bundle/bundle.h:
//                  legal there, measured there), else of another model of
//                  its family, else, where the caller names its GPU's
//                  architecture, the op's default for it (op.toml
//                  [arch_defaults]), else the op's default config.
//   kMiss          the bundle has neither tuned entries that fit nor a
//                  default for the op; `config` is nullptr.
// Only entries whose dim names are those of the query take part. The dims of
// an op are those of its first entry in the bundle; entries of the same op
// with another set of dims (another op version) are never answers.
//
// Misses. Every lookup answered below kExact (a shape or model the farm
// never tuned) is counted per (op, dtype, gpu_model, dims) in a table of
// kMaxMissKeys keys, without a lock; keys past it are counted as dropped.
// misses() lists them, most asked first, and WriteMisses appends them to a
// file as JSON lines, which `tunefarm sweep from-misses` turns into the
// next sweep file. TUNEFARM_MISSES=path at Load time writes them there
// when the Bundle is destroyed.
//
// TUNEFARM_FORCE_DEFAULTS: when set to anything but "" or "0" at Load time,
// every lookup answers the op default (kDefault, or kMiss without one). It
// is the switch to rule a bad bundle out in production without a rebuild.
//
// Ownership and threads: a Bundle is immutable after Load; lookup() and
// prepare() may be called from any number of threads. Answers point into the
// Bundle, and PreparedLookups read it: both must not outlive it. A
// PreparedLookup caches its last answer, so each thread uses its own copy
// (copies are cheap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tune/status.h"

namespace tune {
struct Bundle;
}

namespace tune::runtime {

// The most dims a shape may have.
inline constexpr size_t kMaxDims = 16;

// In chain order: exact, predicted, nearest_shape, family, default, miss
// (kPredicted came last to keep the values of the others).
enum class Level : uint8_t { kExact, kNearestShape, kFamily, kDefault, kMiss, kPredicted };
// "exact", "predicted", "nearest_shape", "family", "default", "miss".
const char* LevelName(Level level);

// The GPU family of a model key as the farm writes it (lower case, '-'
// separated, as NormaliseGpuModel in types.h makes it): its first token that
// contains a digit, which is the product name a vendor's variants share.
//   "h100-80gb-hbm3", "h100-sxm5", "h100-nvl" -> "h100"
//   "a100-sxm4-40gb" -> "a100"      "tesla-v100-sxm2-16gb" -> "v100"
//   "geforce-rtx-4090" -> "4090"    "gh200-480gb" -> "gh200" (not "h200")
// A model without a digit is its own family. Simulated models keep their
// "sim-" prefix ("sim-h100" -> "sim-h100"), so that simulated figures never
// stand in for hardware, nor hardware for a simulation.
std::string GpuFamily(std::string_view gpu_model);

// (name, value) pairs in a fixed order: a config's params, a shape's dims.
// A categorical param (a string or a boolean axis of the op) has a text,
// its spelling ("stream_k", "true"), and a value, its number: 0 or 1 for a
// boolean, the string's code for a string (what the op's rules compare).
class NamedInts {
 public:
  NamedInts() = default;
  // `texts`: empty, or one per value ("" for an integer).
  NamedInts(std::vector<std::string> names, std::vector<int64_t> values, std::vector<std::string> texts = {});

  size_t size() const { return values_.size(); }
  const std::string& name(size_t i) const { return names_[i]; }
  int64_t value(size_t i) const { return values_[i]; }
  // The spelling of a categorical value; "" for an integer.
  const std::string& text(size_t i) const;
  // Index of `name`, or -1. Linear: resolve indices once, outside hot loops.
  int index(std::string_view name) const;
  // Value of `name`, or `fallback` when absent.
  int64_t get(std::string_view name, int64_t fallback = 0) const;
  // "BM=128,BN=64,SCHEDULE=stream_k" in order.
  std::string ToString() const;

 private:
  std::vector<std::string> names_;
  std::vector<int64_t> values_;
  std::vector<std::string> texts_;  // empty when no value has one
};

// One tuned entry of the bundle, with what justifies it.
struct Entry {
  std::string op, dtype, gpu_model;
  NamedInts shape, config;
  std::string config_id, kernel_hash;
  std::string backend;             // "cuda" | "sim"
  std::string arch;                // of the measured cubin ("sm_90a"; "" for sim)
  double median_us = 0;
  double default_median_us = 0;    // the op default on the same key; 0 = not measured
  // The op's vendor baseline on the same key ("cublaslt 13.1.0") and its
  // median; 0 = not measured.
  std::string baseline;
  double baseline_median_us = 0;
};

struct Answer {
  const NamedInts* config = nullptr;  // nullptr only for kMiss
  // The tuned entry; for kDefault the model's default (an Entry without a
  // shape) or nullptr for the op's default; nullptr for kMiss.
  const Entry* entry = nullptr;
  Level level = Level::kMiss;
  // kPredicted: the tuned entries the selector chose among (`entry` is one
  // of them); empty otherwise.
  std::span<const Entry* const> candidates;
};

// A named dim of a query shape.
struct Dim {
  std::string_view name;
  int64_t value;
};

struct LoadOptions {
  enum class ForceDefaults { kFromEnvironment, kNo, kYes };
  ForceDefaults force_defaults = ForceDefaults::kFromEnvironment;
};

namespace detail {
struct Plan;
struct BundleData;
struct MissKey;
class MissTable;
}  // namespace detail

// A key answered below kExact, and how often it was asked.
struct Miss {
  std::string op, dtype, gpu_model;
  NamedInts shape;           // the query's dims, as asked (before buckets)
  Level level = Level::kMiss;  // how it was answered when first counted
  uint64_t count = 0;
};
inline constexpr size_t kMaxMissKeys = 4096;

// Lookups for one (op, dtype, GPU model), resolved ahead: a lookup takes the
// dims as integers in a fixed order, allocates nothing and compares no
// strings. Repeating the previous shape costs a few compares.
class PreparedLookup {
 public:
  PreparedLookup();  // answers kMiss
  PreparedLookup(const PreparedLookup&) = default;
  PreparedLookup& operator=(const PreparedLookup&) = default;
  PreparedLookup(PreparedLookup&&) noexcept = default;
  PreparedLookup& operator=(PreparedLookup&&) noexcept = default;

  // The order of the dims that lookup() takes.
  const std::vector<std::string>& dim_names() const;
  size_t ndims() const { return ndims_; }

  // `dims` in dim_names() order. A span of another length cannot match any
  // tuned shape: the answer is the op default (or kMiss).
  Answer lookup(std::span<const int64_t> dims) {
    if (cached_ && dims.size() == ndims_) {
      // One branch on the outcome, not one per dim: shapes that alternate
      // would mispredict the early exits.
      uint64_t diff = 0;
      for (size_t i = 0; i < ndims_; ++i) diff |= static_cast<uint64_t>(last_[i] ^ dims[i]);
      if (diff == 0) {
        if (last_answer_.level != Level::kExact) CountMiss(last_answer_.level);
        return last_answer_;
      }
    }
    return Refresh(dims);
  }
  Answer lookup(std::initializer_list<int64_t> dims) {
    return lookup(std::span<const int64_t>(dims.begin(), dims.size()));
  }

 private:
  friend class Bundle;
  PreparedLookup(std::shared_ptr<const detail::Plan> plan, detail::MissTable* misses, const detail::MissKey* key);
  Answer Refresh(std::span<const int64_t> dims);
  void CountMiss(Level level) const;  // the cached dims

  std::shared_ptr<const detail::Plan> plan_;
  detail::MissTable* misses_ = nullptr;
  const detail::MissKey* key_ = nullptr;
  size_t ndims_ = 0;
  bool cached_ = false;
  Answer last_answer_;
  int64_t last_[kMaxDims] = {};
};

// A verified bundle in memory, indexed for lookups.
class Bundle {
 public:
  // Reads the signed bundle file `path` and checks its signature against
  // `trusted_keys`, each either the path of a public key file or the key
  // itself (the text of such a file, or its 64 hex digits). Refuses, with one
  // line that names the file: unreadable file, unsigned or damaged bundle,
  // a signer not among the trusted keys, a bad trusted key, a shape of more
  // than kMaxDims dims.
  static Result<Bundle> Load(const std::string& path, const std::vector<std::string>& trusted_keys,
                             const LoadOptions& options = {});
  // The same for a signed bundle already in memory (embedded in a binary);
  // `name` stands for the file name in errors.
  static Result<Bundle> LoadFromMemory(const void* data, size_t size,
                                       const std::vector<std::string>& trusted_keys,
                                       const std::string& name = "<memory>",
                                       const LoadOptions& options = {});

  // Reads a .tfb, signed or not, WITHOUT checking any signature, so that
  // tools answer a lookup exactly as a deployment would (`tunefarm bundle
  // lookup`). Never for deployments; signer_key_id() is "".
  static Result<Bundle> LoadUnverified(const std::string& path, const LoadOptions& options = {});

  Bundle(Bundle&&) noexcept;
  Bundle& operator=(Bundle&&) noexcept;
  ~Bundle();

  // The fallback chain for one query; dims are paired with the op's by name,
  // in any order. Allocates nothing once the calling thread has made a few
  // lookups; costs hashing the strings (prepare() avoids that).
  Answer lookup(std::string_view op, std::string_view dtype, std::string_view gpu_model,
                std::span<const Dim> shape) const;
  Answer lookup(std::string_view op, std::string_view dtype, std::string_view gpu_model,
                std::initializer_list<Dim> shape) const {
    return lookup(op, dtype, gpu_model, std::span<const Dim>(shape.begin(), shape.size()));
  }

  // The same, for a GPU of architecture `arch` ("sm_89"): where the chain
  // ends at the op's default, the op's default for that architecture answers
  // instead when the bundle has one.
  Answer lookup(std::string_view op, std::string_view dtype, std::string_view gpu_model, std::span<const Dim> shape,
                std::string_view arch) const;

  // Resolves (op, dtype, gpu_model) once. The PreparedLookup takes dims in
  // the op's order (dims_of(op)), or in `dim_order` when given (a
  // permutation of the op's dim names; other names make every lookup fall
  // back to the op default). Answers equal lookup()'s for the same query.
  PreparedLookup prepare(std::string_view op, std::string_view dtype, std::string_view gpu_model) const;
  PreparedLookup prepare(std::string_view op, std::string_view dtype, std::string_view gpu_model,
                         std::span<const std::string_view> dim_order) const;

  // prepare() over the candidates `usable` accepts only: each tuned entry,
  // model default and the op default (entry nullptr) is offered once, here,
  // and the chain skips those refused (the launcher refuses configs the
  // device cannot run or has no cubin for).
  // `arch` as for lookup(); "" for none.
  PreparedLookup prepare(std::string_view op, std::string_view dtype, std::string_view gpu_model,
                         std::string_view arch, const std::function<bool(const Answer&)>& usable) const;

  // The bundle as decoded (launch plans, cubins), for the launcher.
  const tune::Bundle& source() const;

  // The op's dim names in order, or nullptr when it has no tuned entry.
  const std::vector<std::string>* dims_of(std::string_view op) const;

  const std::string& name() const;
  const std::string& farm_version() const;
  int64_t created_unix() const;
  const std::string& signer_key_id() const;    // the trusted key that verified it
  const std::vector<Entry>& entries() const;   // bundle order
  bool forcing_defaults() const;

  // The keys answered below kExact so far, most asked first (ties: op,
  // dtype, model, dims); `dropped` (if given) receives the lookups not
  // counted because the table was full. A snapshot: lookups may go on.
  std::vector<Miss> misses(uint64_t* dropped = nullptr) const;
  // Appends misses() to `path` as JSON lines, one per key:
  //   {"op": "gemm", "dtype": "f16", "gpu_model": "h100-sxm5",
  //    "shape": {"M": 4000, ...}, "level": "predicted", "count": 17}
  // Errors name the file.
  Status WriteMisses(const std::string& path) const;

 private:
  explicit Bundle(std::unique_ptr<detail::BundleData> data);
  std::unique_ptr<detail::BundleData> data_;
};

}  // namespace tune::runtime
