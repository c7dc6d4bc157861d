// ConfigSpace: the legal configs of an op on one GPU model.
//
// Enumeration is deterministic: an odometer over the spec's axes (last axis
// fastest), constraints evaluated with the device's limits; illegal points are
// pruned. Config ids are content hashes, so they are stable across processes
// and runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "opspec/op_definition.h"
#include "tune/status.h"

namespace tune {

struct SpaceStats {
  uint64_t raw = 0;      // product of axis sizes
  uint64_t legal = 0;    // points that passed every constraint
};

// Every legal config of `spec` on `device`, in enumeration order. Fails only
// if a constraint does not compile, the raw space exceeds
// kMaxRawConfigPoints, or more than `max_legal` points are legal (found
// before they are all held in memory; stats->legal then exceeds it). 10^6 raw points take well under 1 s.
//
// Constraints may read `dsize`; this form uses the largest dtype of the op,
// so the configs it returns are legal for every dtype the op declares (one
// config set shared by all dtypes of a sweep).
Result<std::vector<Config>> EnumerateConfigs(const OpSpec& spec, const DeviceInfo& device,
                                             SpaceStats* stats = nullptr, uint64_t max_legal = UINT64_MAX);
// The same for one dtype ("f16", ...): `dsize` is that dtype's size. Fails on
// an unknown dtype.
Result<std::vector<Config>> EnumerateConfigs(const OpSpec& spec, const DeviceInfo& device,
                                             const std::string& dtype, SpaceStats* stats = nullptr);

// The configs of `configs` that the op's shape rules (OpSpec::
// shape_constraints: rules that read dims) allow at `shape` on `device`,
// with `dtype`'s dsize, in their order: all of them when the op has none.
// `first_rejecting` (optional, one count per shape rule): how many configs
// each rule rejects first. Errors: a rule that does not compile, an unknown
// dtype, a shape that lacks a dim of the op.
Result<std::vector<Config>> ConfigsForShape(const OpSpec& spec, const DeviceInfo& device, const std::string& dtype,
                                            const std::vector<Config>& configs, const Shape& shape,
                                            std::vector<uint64_t>* first_rejecting = nullptr);

// Why a space on `device` is the size it is (`tunefarm op check`): every raw
// point evaluated against every rule, with the largest dsize of the op's
// dtypes (as EnumerateConfigs does). `rejected[r]`: points rule r rejects;
// `first_rejecting[r]`: points whose first rejecting rule, in spec order,
// is r (they sum to raw - legal). Refuses spaces over kMaxExplainedPoints.
struct SpaceExplanation {
  uint64_t raw = 0, legal = 0;
  std::vector<uint64_t> rejected, first_rejecting;
};
inline constexpr uint64_t kMaxExplainedPoints = 20'000'000;
Result<SpaceExplanation> ExplainSpace(const OpSpec& spec, const DeviceInfo& device);

// A space larger than this is refused rather than enumerated for hours.
inline constexpr uint64_t kMaxRawConfigPoints = 1'000'000'000;

// The product of the sizes of `spec`'s axes (UINT64_MAX when it overflows):
// what enumerating its space costs at most, known without enumerating.
uint64_t RawSpaceSize(const OpSpec& spec);

// Resolved launch geometry and argument sizes of one config on one shape.
struct LaunchPlan {
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  int64_t smem_bytes = 0;
  std::vector<int64_t> arg_elems;      // elements per buffer arg (0 for scalars)
  std::vector<double> scalar_values;   // value per scalar arg (0 for buffers)
  // Per arg: a buffer's extents (its shape), a tensor map's box; empty for
  // scalars. Outermost dim first, as written in op.toml.
  std::vector<std::vector<int64_t>> arg_extents;
  int64_t ref_grid[3] = {1, 1, 1};
  int64_t ref_block[3] = {1, 1, 1};
  double flops = 0, bytes = 0;         // metrics for this shape
};

// Evaluates launch, args, reference launch and metrics. Errors name the field.
// Thread-safe. Each thread caches the compiled expressions of the last few
// (spec, dtype, device limits) it planned, so repeated calls cost microseconds;
// a LaunchPlanner does the same without the cache lookup.
Result<LaunchPlan> PlanLaunch(const OpSpec& spec, const std::string& dtype, const Config& config,
                              const Shape& shape, const DeviceInfo& device);

// PlanLaunch with the expressions compiled once. Errors: the config lacks a
// param or has one the spec does not know, the shape lacks a dim or has an
// unknown one, a grid/block value below 1, a negative smem or buffer size, or
// a non-finite value; each names the field, the config and the shape.
// Not thread-safe: use one per thread. Keeps no reference to `spec`.
class LaunchPlanner {
 public:
  static Result<LaunchPlanner> Create(const OpSpec& spec, const std::string& dtype,
                                      const DeviceInfo& device);
  LaunchPlanner(LaunchPlanner&&) noexcept;
  LaunchPlanner& operator=(LaunchPlanner&&) noexcept;
  ~LaunchPlanner();

  Result<LaunchPlan> Plan(const Config& config, const Shape& shape);

 private:
  LaunchPlanner();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
