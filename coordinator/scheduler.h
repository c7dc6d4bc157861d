// Scheduler: sweeps, work units and leases as pure logic.
//
// No sockets, no clock of its own: every call takes `now` (seconds on any
// monotonic scale), so lease expiry, worker death and retries are tested
// without waiting. The Coordinator drives it from its socket loop.
//
// A sweep = ops x dtypes x shapes x target GPU models. Each GPU model gets the
// whole legal config space of each op (what makes architectures comparable),
// split into units of configs on one shape, screened shape by shape with the
// least work first (CreateUnits says why); a worker's cubin cache makes a
// config's later shapes compile nothing. Units of a model are created when the
// first device of that model is seen, because legality depends on its limits;
// the enumeration that takes (ExpandSpace) may run on another thread
// (SetExpander).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "config_source.h"
#include "lease_book.h"
#include "pacing.h"
#include "passes.h"
#include "measure/backend.h"
#include "base/limits.h"
#include "opspec/op_definition.h"
#include "protocol/protocol.h"
#include "tune/status.h"
#include "base/types.h"

namespace tune {

struct SchedulerOptions {
  // Unit size when a sweep names none: the first unit a worker gets has
  // configs_per_unit configs; later ones are sized from that worker's
  // measured throughput to last about target_unit_seconds, within
  // [min, max]. A sweep's own configs_per_unit fixes the size.
  uint32_t configs_per_unit = 16;
  double target_unit_seconds = 20;
  uint32_t min_configs_per_unit = 1;
  uint32_t max_configs_per_unit = 256;
  // At the end of a model's configs, units shrink (guided self-scheduling):
  // a new unit takes at most ceil(configs left / (units in flight + 1)), so
  // that the devices still measuring end together rather than one device
  // running a full-size last unit while the others wait. Both sizes above
  // are upper bounds then.
  bool shrink_tail_units = true;
  double lease_base_seconds = 120;    // lease = base + per_pair * (config, shape) pairs
  double lease_per_pair_seconds = 5;
  uint32_t max_attempts = 4;          // leases of one unit before it is failed
  // Idle workers may duplicate a straggling lease at the tail of a sweep. A
  // straggler is a unit with one holder, no results batch waiting to be
  // stored, and no progress (lease or results batch) for tail_min_age_seconds
  // and for tail_slow_factor times what it should take: at the median pace
  // (seconds per pair) of its sweep's completed units of that model, or at
  // its holder's own pace before one is done. Results still arriving, or a
  // unit as long as its peers, do not make a straggler.
  bool tail_duplicates = true;
  double tail_min_age_seconds = 2;
  double tail_slow_factor = 1.5;
  // The refine pass (SweepSubmit::refine_pass) times again the configs
  // within this fraction of each shape's best screening figure: the
  // contenders of the workers' TimingPolicy::refine_within.
  double refine_within = TimingPolicy{}.refine_within;
  // Bounds on an op's config space, so that expanding a sweep never holds
  // the coordinator's loop for long or runs it out of memory: a sweep whose
  // op has more raw points (the product of its axes' sizes) is refused at
  // submit; one with more legal configs on a model fails with the reason.
  uint64_t max_raw_configs = 4'000'000;
  uint64_t max_legal_configs = 1'000'000;
  // Configs a searched key keeps in flight (proposed, not yet measured);
  // 0: sized from the model's live devices, the units each holds
  // (kUnitsHeldPerDevice) and their measured size (UnitSizeFor), at least
  // two batches, at most kMaxSearchInFlight. One batch is lock-step.
  uint32_t search_in_flight = 0;
  // A GPU model is live for a sweep while its devices do work. One with
  // work queued whose devices have neither asked for, taken nor finished
  // any for this long (and held no lease meanwhile) stops holding the
  // sweeps that target it only through `gpus = ["*"]`: the pairs it has not
  // measured are dropped from them (Scheduler::SkipQuietModels). A sweep
  // that names the model waits on, and says what for.
  double model_idle_seconds = 300;
  // Bounds on (config, shape) pairs (base/limits.h): per sweep and GPU
  // model, legal configs x shapes x dtypes over the sweep's ops, found while
  // its space is enumerated (before the pairs are held) and failing the
  // sweep with the reason; over every running sweep, pairs not yet measured,
  // refused at submit when the farm is at the limit already and failing a
  // sweep whose expansion would take it past.
  uint64_t max_sweep_pairs = kDefaultMaxSweepPairs;
  uint64_t max_farm_pairs = kDefaultMaxFarmPairs;
};

// The confirm phase of a sweep (SweepSubmit::confirm_top): the `top`
// fastest valid configs of one (model, op, dtype, shape), to time again
// together. Empty when there is nothing to confirm: no valid figure, or the
// key is confirmed already (a sweep resumed after its confirm unit ran).
// `retime_sweep`: the sweep's id when it is a retime (SweepSubmit::retime),
// whose passes start over among its own rows: other sweeps' do not count.
using ContendersFn = std::function<std::vector<Config>(const DeviceInfo& device, const OpSpec& spec,
                                                        const std::string& dtype, const Shape& shape,
                                                        uint32_t top, const std::string& retime_sweep)>;

using NearBestFn = std::function<NearBest(const DeviceInfo& device, const OpSpec& spec, const std::string& dtype,
                                          const Shape& shape, double within, const std::string& retime_sweep)>;

// Every stored row of one (model, op, dtype, shape) of the op's kernel on
// that model, valid or failed: what a search has observed so far.
using KeyRowsFn = std::function<std::vector<Measurement>(const DeviceInfo& device, const OpSpec& spec,
                                                         const std::string& dtype, const Shape& shape)>;


// A sweep's state; RunStateName gives the name in records and status.
enum class RunState { kRunning, kDone, kFailed, kCancelled };
const char* RunStateName(RunState state);  // "running", "done", "failed", "cancelled"

struct SweepState {
  std::string id;
  SweepSubmit submit;
  std::vector<OpSpec> specs;                 // parsed submit.op_packages
  RunState state = RunState::kRunning;
  std::string error;                         // why it failed
  std::set<std::string> models;              // models that have units
  std::set<std::string> expanding;           // of those, spaces being expanded
  MeasuredFn measured;                       // what the store holds: pairs not leased again, or leased with
                                             // their host digests (StoredPair::host_digests)
  std::vector<uint64_t> units;               // unit ids, creation order
  PipelineFigures pipeline;                  // its units' (Scheduler::AddPipeline)
  std::map<std::string, uint32_t> compile_threads;  // per worker that sent its units' figures
  double first_lease = -1, last_unit_end = -1;      // its pipeline's wall: first lease to last unit's end
  // Configs its searches proposed, by (model, op, dtype): kernels that
  // exist (or will) for every shape of the key, which a search of another
  // shape may take without a compile (SearchStrategy::NoteCompiled).
  std::map<std::string, std::shared_ptr<const std::vector<Config>>> proposed_by_kernel;
  uint64_t units_finished = 0;               // units done or failed
  // Units failed after SchedulerOptions::max_attempts leases (their pairs
  // count as failed, class "unit_failed"), and the last one's reason: a
  // sweep with any ends failed, saying so, whatever else it stored.
  uint64_t units_failed = 0;
  std::string unit_failure;
  SweepPasses passes;
  std::map<PoolKey, KeyPlan> plans;  // per key of every model expanded
  uint64_t pairs_total = 0, pairs_done = 0, pairs_failed = 0;
  std::map<std::string, uint64_t> failed_by_class;  // of pairs_failed, by FailureClassName
  // Models it stopped waiting for (SchedulerOptions::model_idle_seconds),
  // with the line status shows; their unmeasured pairs left pairs_total.
  std::map<std::string, std::string> skipped;
  int64_t started_unix = 0, finished_unix = 0;
  bool TargetsModel(const std::string& model) const;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions opts = {});

  // Units created from now on are numbered from `first`. A coordinator gives
  // each of its runs over one store a range of its own: workers still send
  // results of units that the run before a restart leased, and those must
  // never be taken for (and complete) a unit of this run.
  void NumberUnitsFrom(uint64_t first) { book_.NumberFrom(first); }

  // Validates and registers a sweep (op packages parse, dims of every shape
  // match each op, dtypes supported by the op). Creates units at once for
  // every already-known model it targets. Errors name the op/field. Pairs
  // for which `measured` (when given) says the store holds the config's
  // shape are counted as done instead of leased: a sweep resumed after a
  // restart, or submitted again, measures only what is missing. Pairs it
  // holds under host digests are leased with them (WorkUnit::reusable): a
  // worker of one of those digests leaves them out.
  Result<std::string> AddSweep(const SweepSubmit& submit, const std::string& sweep_id, int64_t now_unix,
                               MeasuredFn measured = nullptr);
  // Stops a running sweep: nothing of it is leased again, its leases run
  // out (late results are acknowledged unstored), and it ends as
  // "cancelled". Fails when the sweep is unknown or has ended.
  Status CancelSweep(const std::string& sweep_id, int64_t now_unix);
  // Where the confirm phase of sweeps finds its contenders. Without it a
  // sweep's confirm_top is ignored.
  void SetContenders(ContendersFn fn) { contenders_ = std::move(fn); }
  // Where the refine pass of sweeps finds its contenders. Without it a
  // sweep's refine_pass is ignored.
  void SetNearBest(NearBestFn fn) { near_best_ = std::move(fn); }
  // What searched keys have measured (their observations). Without it a
  // search sees no figures: each batch is proposed blind.
  void SetKeyRows(KeyRowsFn fn) { key_rows_ = std::move(fn); }
  // Where searches find their priors (warm start). Without it every search
  // starts cold.
  void SetPriors(PriorsFn fn) { priors_ = std::move(fn); }
  // Where a search's warnings go (a model that failed to train and fell
  // back to random): the sweep and a line naming the key.
  using SearchWarningFn = std::function<void(const std::string& sweep_id, const std::string& line)>;
  void SetSearchWarning(SearchWarningFn fn) { search_warning_ = std::move(fn); }
  // Where the expansions of config spaces run. Unset, they run at once,
  // inside AddSweep and AddDevice. Set, each is handed to `fn` (which may run
  // it on another thread), and its outcome must come back through
  // ApplyExpansion on the scheduler's thread; meanwhile the sweep leases
  // nothing of that model and cannot end.
  using ExpandFn = std::function<void(SpaceExpansion)>;
  void SetExpander(ExpandFn fn) { expander_ = std::move(fn); }
  // Where searched keys' proposals run (the store scan of the key's rows
  // and the strategy's model training). Unset, they run at once, inside the
  // lease that needs the batch. Set, `fn` gets the work (which it may run
  // on another thread) and must run the completion it returns on the
  // scheduler's thread; the key leases its batch from the next request on.
  using ProposeWork = std::function<std::function<void()>()>;
  using ProposerFn = std::function<void(ProposeWork)>;
  void SetProposer(ProposerFn fn) { proposer_ = std::move(fn); }
  // The outcome of ExpandSpace for (sweep_id, model): its pools become
  // units, or the sweep fails with the error. Ignored when the sweep is gone,
  // ended or expects no such expansion.
  void ApplyExpansion(const std::string& sweep_id, const std::string& model, Result<ExpandedSpace> space,
                      int64_t now_unix);
  // A device of a (possibly new) model is live; creates units for every
  // running sweep that targets it and has none yet. Errors (a constraint that
  // fails to evaluate, a space over the bounds) fail that sweep with the
  // message. A model is live while it has more AddDevice than RemoveDevice
  // calls: `gpus = ["*"]` means the live models, resolved when units are made.
  void AddDevice(const DeviceInfo& device, int64_t now_unix);
  // A device of `model` went away. A model with no live device and no
  // running sweep's units is forgotten, so models named by peers long gone
  // cost nothing.
  void RemoveDevice(const std::string& model);
  bool ModelLive(const std::string& model) const;

  // Gives `worker` a unit for `gpu_model`: a pending one, or at the tail of a
  // sweep a duplicate lease of a straggler. nullopt when there is none.
  // Sweeps of higher SweepSubmit::priority go first, each level in full (its
  // stragglers' duplicates included) before any unit of a lower one; sweeps
  // of equal priority in submission order.
  // Asking counts as work for the quiet-model rule: with work queued, an
  // ask is always given a unit. `now_unix` (wall seconds) stamps the end of
  // a sweep whose last search ends here.
  std::optional<WorkUnit> Lease(const std::string& worker, const std::string& gpu_model,
                                double now, int64_t now_unix);
  // A results batch of the unit arrived and waits to be stored: the unit is
  // making progress, and is no straggler until the batch is ingested.
  // Batches for a unit this scheduler does not know (or of another sweep,
  // after a restart) are ignored here and in BatchIngested.
  void BatchQueued(const std::string& sweep_id, uint64_t unit_id, double now);
  // A batch announced by BatchQueued was ingested: `stored` new rows, of
  // which `stored_failed` record failures (both 0 when the batch was refused
  // or its write failed). Counts for progress.
  void BatchIngested(const std::string& sweep_id, uint64_t unit_id, uint64_t stored,
                     uint64_t stored_failed, const std::map<std::string, uint64_t>& failed_by_class, double now);
  // A worker left `n` configs of the unit out, their stored rows its own
  // (Results::reused): they are no part of its pace, and those rows'
  // failures (`failed`, by class) count as the sweep's. Only the unit's
  // first report counts them (a resent batch or a duplicate lease's says
  // the same).
  void NoteReused(const std::string& sweep_id, uint64_t unit_id, uint64_t n, uint64_t failed,
                  const std::map<std::string, uint64_t>& failed_by_class);
  // A worker's pipeline figures of the unit (with its final batch, checked
  // by the ingester), added to its sweep's once: a unit already done (a
  // resent batch, a duplicate lease's) adds nothing.
  void AddPipeline(const std::string& worker, const std::string& sweep_id, uint64_t unit_id,
                   const PipelineFigures& figures);
  // What a sweep's searched keys keep in flight now: configs proposed and
  // not yet measured, and the most they may (SearchedKey::depth), summed.
  std::pair<uint64_t, uint64_t> InFlight(const std::string& sweep_id) const;
  // The final results batch of the unit is stored: it is done, and the
  // worker's throughput is updated from how long it took over the configs
  // it measured. Returns that time, from the worker's lease to now (0 when
  // it held no lease of it).
  double CompleteUnit(const std::string& worker, const std::string& sweep_id, uint64_t unit_id,
                    double now, int64_t now_unix);
  // Configs the next fresh unit of `shape` for `worker` would hold
  // (adaptive sizing).
  uint32_t UnitSizeFor(const std::string& worker, const Shape& shape) const;
  // The worker is gone: its leases go back to the queue.
  void DropWorker(const std::string& worker, int64_t now_unix);
  // A device of `model` asked for work and was given none for a reason of
  // the caller's (the store refuses writes): it counts as asking, as a
  // Lease call does, so a model is not taken for quiet while it cannot be
  // served.
  void NoteAsked(const std::string& model, double now);
  // The quiet-model rule (SchedulerOptions::model_idle_seconds), for the
  // caller's periodic tick: every running sweep that targets a quiet model
  // only through `*` drops its queued work of that model (pending units end
  // as failed, uncut configs are discarded, pairs_total shrinks by the
  // unmeasured pairs), records why in SweepState::skipped and may end. A
  // model is quiet once it has had work queued, no lease held and no ask,
  // lease or results for model_idle_seconds. Returns what it skipped now.
  struct SkippedModel {
    std::string sweep_id, model, why;
  };
  std::vector<SkippedModel> SkipQuietModels(double now, int64_t now_unix);
  // `worker` no longer holds `unit_id` (its results were refused, `why`):
  // the unit goes back to the queue unless another worker holds it, or
  // fails when its leases are spent. No-op when it holds no such lease.
  void GiveUpLease(const std::string& worker, uint64_t unit_id, int64_t now_unix, const std::string& why);
  // Whether `worker` holds a live lease of `unit_id` now.
  bool Holds(const std::string& worker, uint64_t unit_id) const;
  // Whether sweep `id` is known and running.
  bool Running(const std::string& id) const;
  // Leases past their deadline go back to the queue; returns how many.
  size_t ExpireLeases(double now, int64_t now_unix);

  // Leases held per worker (units leased, duplicates counted for each
  // holder).
  std::map<std::string, size_t> LeasesPerWorker() const;
  // Per GPU model: configs not yet leased (pending units and uncut pools),
  // and units leased now.
  std::map<std::string, uint64_t> QueuedConfigsPerModel() const;
  std::map<std::string, uint64_t> LeasedUnitsPerModel() const;
  const SweepState* FindSweep(const std::string& id) const;
  // Which strategy proposes the configs of a key of a sweep ("" when the
  // sweep or key is unknown): what its rows record (Measurement::proposer).
  std::string ProposerOf(const std::string& sweep_id, const PoolKey& key) const;
  // With `now`, each running sweep's SweepProgress::waits also names the
  // live models it has work queued for that no device has taken for a
  // while (the quiet-model rule's clock).
  std::vector<SweepProgress> Progress(const std::string& sweep_id,
                                      std::optional<double> now = std::nullopt) const;
  const std::map<std::string, SweepState>& sweeps() const { return sweeps_; }

  // Read-only views for builders (coordinator/build_service.h), which
  // compile what the devices will take next: per GPU model, the config
  // pools in creation order (each config from ConfigPool::next on is not
  // yet cut into a unit), and the first device seen of each model the
  // scheduler keeps (its compute capability and toolchain).
  const std::map<std::string, std::deque<ConfigPool>>& pools() const { return pools_; }
  // Proposes the next batch of each searched key of `model` whose pool is
  // dry, where its in-flight depth leaves room (as a device's lease would)
  // widened by `ahead` configs (what a builder asks for, up to
  // kMaxSearchInFlight in all): a builder compiles it while the devices
  // time what they hold, and the devices fetch its images when they lease
  // it. A proposal may complete later (off the loop). `now_unix` stamps
  // the end of a sweep whose last search ends here.
  void ProposeAhead(const std::string& model, double now, int64_t now_unix, size_t ahead = 0);
  const std::map<std::string, DeviceInfo>& models() const { return models_; }

 private:
  // Expands the sweep's spaces for the device's model (at once, or through
  // the expander).
  void CreateUnits(SweepState& sweep, const DeviceInfo& device, int64_t now_unix);
  // The priorities of the running sweeps with units of `gpu_model`,
  // highest first.
  std::vector<uint32_t> PriorityLevels(const std::string& gpu_model) const;
  // Lease's work for the sweeps of one priority.
  std::optional<WorkUnit> LeaseAt(const std::string& worker, const std::string& gpu_model, uint32_t priority,
                                  double now, int64_t now_unix);
  // A fresh unit from the pools of the sweeps of `priority`.
  Unit* CutUnit(const std::string& worker, const std::string& gpu_model, uint32_t priority, double now,
                int64_t now_unix);
  // A searched pool that has run dry: its next batch, once the last one's
  // units are done. False while they run; true with the pool refilled, or
  // with its search ended (its unspent budget leaves the sweep's counts).
  // A search that ends may end the sweep, stamped `now_unix`. `ahead`
  // widens the depth for builders (ProposeAhead).
  bool NextSearchBatch(SweepState& sweep, const std::string& worker, const std::string& model, ConfigPool& pool,
                       double now, int64_t now_unix, size_t ahead = 0);
  // The configs a searched key of `model` may keep in flight, proposing
  // `batch` at a time (SchedulerOptions::search_in_flight).
  size_t SearchDepth(const std::string& worker, const std::string& model, const Shape& shape, size_t batch) const;
  void ReleaseHolder(Unit& u, const std::string& worker, int64_t now_unix, const std::string& why);
  // Moves a unit out of kPending/kLeased for good.
  void Finish(Unit& u, UnitState state, int64_t now_unix);
  void MaybeFinish(SweepState& sweep, int64_t now_unix);
  // Creates the refine units of each (op, dtype, shape) of `model` once its
  // configs are all screened.
  void MaybeRefine(SweepState& sweep, const std::string& model);
  // Nothing left to cut for `model`: refines the contenders screened so far
  // of every (op, dtype, shape) whose configs are all cut, once each, so that the
  // devices that run dry at the end of the screening have work. True when
  // it created units.
  bool RefineEarly(const std::string& model, uint32_t priority);
  // Refine units for the configs of op `i` and `dtype` near `shape`'s best
  // stored figure that have none yet.
  void CreateRefineUnits(SweepState& sweep, const std::string& model, size_t i, const std::string& dtype,
                         const Shape& shape);
  // Creates the confirm units of `model` once its configs are all measured.
  void MaybeConfirm(SweepState& sweep, const std::string& model);
  Unit& AddUnit(SweepState& sweep, Unit u);
  // Queues a confirm or refine unit (`kind`, with confirm_seconds or
  // refine_best_us) of op `i` and `dtype` with `configs` on `shape` alone,
  // to be leased before any screening unit.
  void QueueShapeUnit(SweepState& sweep, const std::string& model, size_t i, const std::string& dtype,
                      const Shape& shape, std::vector<Config> configs, UnitKind kind, double confirm_seconds,
                      double refine_best_us);
  Unit* FindStraggler(const std::string& worker, const std::string& gpu_model, uint32_t priority, double now);
  // How long `u` (with one holder) may go without progress before it counts
  // as a straggler.
  double StragglerAge(const Unit& u);
  WorkUnit MakeWorkUnit(const Unit& u, double lease_seconds) const;
  double LeaseSeconds(const Unit& u) const;
  // (config, shape) pairs of `sweep` queued for `model`: uncut and in
  // pending units.
  uint64_t QueuedPairs(const SweepState& sweep, const std::string& model) const;
  // How long `model` has had work queued with none asked for, taken or
  // finished (0 when it is busy or has nothing queued).
  double QuietSeconds(const std::string& model, double now) const;
  void NoteActive(const std::string& model, double now);
  // Drops `sweep`'s queued work of `model` (SkipQuietModels).
  void SkipModel(SweepState& sweep, const std::string& model, const std::string& why, int64_t now_unix);

  SchedulerOptions opts_;
  std::map<std::string, SweepState> sweeps_;
  LeaseBook book_;  // every unit, the queues, who holds what
  std::map<std::string, DeviceInfo> models_;  // first device seen per model
  std::map<std::string, size_t> live_devices_;  // per model: AddDevice - RemoveDevice
  std::map<std::string, std::deque<ConfigPool>> pools_;  // per model, creation order
  Pacing pacing_;  // workers' paces and sweeps' per-pair medians
  // The quiet-model rule's clocks, per model: the last ask, lease or
  // results (or tick with a lease held), and since when work is queued.
  std::map<std::string, double> model_active_;
  std::map<std::string, double> queued_since_;
  ContendersFn contenders_;
  NearBestFn near_best_;
  KeyRowsFn key_rows_;
  ProposerFn proposer_;
  PriorsFn priors_;
  SearchWarningFn search_warning_;
  ExpandFn expander_;
};

}  // namespace tune
