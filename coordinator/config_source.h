// A sweep's per-key config sources: what the scheduler cuts units from.
//
// A key (GPU model, op, dtype, shape) of a sweep takes its configs from one
// source: listed (the op's legal space on the model, or the sweep's config
// list), or searched (a SearchedKey over search/key_search.h, proposing a
// batch at a time). ExpandSpace makes a model's sources from a sweep; it
// runs off the scheduler's thread (Scheduler::SetExpander), and
// ProposeSearchBatch runs a searched key's next proposal (Scheduler::
// SetProposer). Neither names a strategy: search/registry.h decides.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/types.h"
#include "protocol/protocol.h"
#include "opspec/op_definition.h"
#include "search/key_search.h"
#include "search/strategy.h"
#include "tune/status.h"

namespace tune {

// What the store holds for a (config, shape) of a model: a valid row, or a
// failure (`failure` its class; kNone for a row that ran and was not valid).
struct StoredPair {
  bool failed = false;
  FailureClass failure = FailureClass::kNone;
  // Non-empty for an op whose hosts add to its kernel hash
  // (OpSpec::HostDigested): the host digests the store holds rows of the
  // pair under. Whether they are of the host that measures it is that
  // host's to say: the pair is leased with them (WorkUnit::reusable), and a
  // worker of one of these digests reuses the row.
  std::vector<std::string> host_digests;
};
// What the store holds for a config's shape on a model (nullopt: nothing),
// so a resumed sweep leases only what is missing and counts what failed.
using MeasuredFn = std::function<std::optional<StoredPair>(const DeviceInfo& device, const OpSpec& spec,
                                                           const std::string& dtype, const Config& config,
                                                           const Shape& shape)>;

// What the store holds of a key's neighbours (the op and dtype on other
// GPU models and other shapes) as priors of its search (warm start,
// search/features.h). Called on the expansion's thread.
using PriorsFn = std::function<std::vector<PriorTrial>(const DeviceInfo& device, const OpSpec& spec,
                                                         const std::string& dtype, const Shape& shape)>;

// The search of one (sweep, model, op, dtype, shape) key by a searching
// strategy (SweepSubmit::strategy; search/registry.h): its configs are proposed a
// batch at a time, up to `budget` evaluations or `budget_seconds` of
// proposing. A key keeps configs in flight: it proposes its next batch as
// soon as fewer than `depth - batch` of its configs wait to be measured
// (ProposalNow), so that its devices and the workers' compile pools never
// wait for its slowest unit. Batches keep one size whatever the devices: a
// seed and an order in which results arrive give the same search.
// The configs a search proposes at a time: the sweep's unit size within
// these bounds.
inline constexpr size_t kSearchBatchMin = 16, kSearchBatchMax = 64;
// The most configs one key keeps in flight, however many devices measure it
// (replay's bar holds at this depth: bench/search.md).
inline constexpr size_t kMaxSearchInFlight = 256;
// A searched key's next batch as its proposal computed it (off the
// scheduler's thread where a proposer runs it there): the configs, the rows
// a resumed key found stored, the strategy's warnings.
struct SearchBatch {
  std::vector<Config> configs;
  uint64_t stored = 0;
  std::vector<std::string> warnings;
};

// A searched key as the scheduler drives it: its search (search/
// key_search.h: strategy, space, budget) and the farm's side of it.
struct SearchedKey {
  std::unique_ptr<KeySearch> key;            // refers to nothing of the scheduler's
  uint64_t proposed = 0;                     // evaluations proposed or found stored, of key->budget()
  size_t depth = 0;                          // configs it may keep in flight (last sized)
  double budget_seconds = 0, started = -1;   // started: the first proposal's time
  bool resumed = false;                      // stored rows observed (once, at the first proposal)
  bool ended = false;                        // proposes no more
  // While a proposal runs, only it touches `key`.
  bool proposing = false;
  std::optional<SearchBatch> ready;          // a proposal's batch, not yet taken

  uint64_t budget() const { return key->budget(); }
};

// The work of a searched key's next batch: observes `rows` (the key's
// stored rows; other sweeps' failures of `retry` classes left out) and
// proposes up to `batch` configs within the budget. Touches `ks.key` only;
// reads its counts.
// `compiled`: configs whose kernels exist (other shapes' proposals), told
// to the search (KeySearch::NoteCompiled) before it proposes.
SearchBatch ProposeSearchBatch(SearchedKey& ks, const std::function<std::vector<Measurement>()>& rows, size_t batch,
                               const std::vector<std::string>& retry, const std::string& sweep_id,
                               const std::vector<Config>& compiled = {});

// Configs of one (sweep, op, dtype, model, shape) waiting to be cut into
// units. A searched key's pool holds its latest batch, and `search` gives
// the next one once it is measured.
struct ConfigPool {
  std::string sweep_id, op, dtype;
  Shape shape;
  std::shared_ptr<const std::vector<Config>> configs;
  size_t next = 0;
  std::shared_ptr<SearchedKey> search;
  // Config id -> StoredPair::host_digests of its stored rows, for the
  // configs of `configs` that have some (null: none has).
  std::shared_ptr<const std::map<std::string, std::vector<std::string>>> reusable;
};

// The screening of one (GPU model, op, dtype, shape): a config pool's key
// in a sweep's per-key passes. `shape` is Shape::Canonical().
struct PoolKey {
  std::string model, op, dtype, shape;
  bool operator<(const PoolKey& o) const {
    return std::tie(model, op, dtype, shape) < std::tie(o.model, o.op, o.dtype, o.shape);
  }
};

// The expansion of one sweep's config spaces for one GPU model: the work
// that may take seconds (every raw point of each op's space enumerated and
// checked against the model's limits; for a resumed sweep, a store read per
// config and shape). Self-contained, so that it runs on another thread
// than the scheduler's (Scheduler::SetExpander).
struct SpaceExpansion {
  std::string sweep_id;
  DeviceInfo device;
  std::vector<OpSpec> specs;
  std::vector<std::string> dtypes;
  std::vector<std::vector<Shape>> shapes;  // per spec: ShapesForOp
  MeasuredFn measured;                     // may be null: nothing stored yet
  // The sweep's strategy, seed and budgets (SweepSubmit): keys of a
  // searching strategy get a SearchedKey instead of their configs listed.
  SearchOptions search;
  double budget_seconds = 0;
  PriorsFn priors;                         // may be null: every search starts cold
  // SweepSubmit::configs: measured instead of each op's space (the sweep
  // has one op then), every key "listed".
  std::vector<Config> listed;
  uint64_t max_legal_configs = 0;
  uint64_t max_pairs = UINT64_MAX;         // legal configs x shapes x dtypes, over the specs
};

// How one (model, op, dtype, shape) key of a sweep is measured: what its
// coverage record says once the sweep ends (KeyCoverage).
struct KeyPlan {
  uint64_t legal = 0;
  bool legal_exact = true;
  std::string strategy;  // the proposer's name, "exhaustive/1" for a key measured whole, "listed/1" for a config list
  uint64_t budget = 0;   // evaluations a search may take; 0 for exhaustive
  bool searched = false;
};

// What a SpaceExpansion yields: the pools with configs left to measure,
// least work first (Scheduler::CreateUnits says why), and the counts.
struct ExpandedSpace {
  std::vector<ConfigPool> pools;
  uint64_t pairs_total = 0;  // (config, shape) pairs of the model's spaces
  uint64_t pairs_done = 0;   // of those, stored before (a resumed sweep)
  uint64_t pairs_failed = 0;  // of those, stored as failures
  std::map<std::string, uint64_t> failed_by_class;  // of those, by FailureClassName
  // Per (model, op, dtype, shape) pool key: configs left to cut.
  std::map<PoolKey, uint64_t> pool_unsliced;
  std::map<PoolKey, KeyPlan> plans;
};

// Runs `job`; safe on any thread. Fails, naming the op and model, on a
// constraint that fails to evaluate, more legal configs than
// job.max_legal_configs or more pairs than job.max_pairs (each found before
// they are all held).
Result<ExpandedSpace> ExpandSpace(const SpaceExpansion& job);

}  // namespace tune
