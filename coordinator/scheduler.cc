// The scheduler (scheduler.h): sweeps, pools, units and leases, one state
// machine whose transitions read and change the same counters. Its parts
// with a subject of their own live beside it: the config sources a pool
// takes its configs from (config_source.cc), the lease book
// (scheduler_leases.cc), the search driver (scheduler_search.cc), the refine
// and confirm passes (scheduler_passes.cc) and the quiet-model rule
// (scheduler_quiet.cc).
#include "scheduler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "opspec/config_space.h"
#include "opspec/sweep_file.h"

namespace tune {

namespace {

// (config, shape) pairs of running sweeps not yet measured: what the farm
// holds queued.
uint64_t PairsQueued(const std::map<std::string, SweepState>& sweeps) {
  uint64_t queued = 0;
  for (const auto& [id, s] : sweeps)
    if (s.state == RunState::kRunning && s.pairs_total > s.pairs_done) queued += s.pairs_total - s.pairs_done;
  return queued;
}

}  // namespace

bool SweepState::TargetsModel(const std::string& model) const {
  for (const auto& m : submit.gpu_models) {
    if (m == "*" || m == model) return true;
  }
  return false;
}

const char* RunStateName(RunState state) {
  switch (state) {
    case RunState::kRunning: return "running";
    case RunState::kDone: return "done";
    case RunState::kFailed: return "failed";
    case RunState::kCancelled: return "cancelled";
  }
  return "unknown";
}

Scheduler::Scheduler(SchedulerOptions opts) : opts_(opts) {}

Result<std::string> Scheduler::AddSweep(const SweepSubmit& submit, const std::string& sweep_id,
                                        int64_t now_unix, MeasuredFn measured) {
  if (sweeps_.count(sweep_id)) return Status::Error("sweep " + sweep_id + " already exists");
  if (submit.ops.empty()) return Status::Error("sweep '" + submit.name + "': no ops");
  if (submit.ops.size() != submit.op_packages.size()) {
    return Status::Error("sweep '" + submit.name + "': " + std::to_string(submit.ops.size()) +
                         " ops but " + std::to_string(submit.op_packages.size()) + " op packages");
  }
  if (submit.dtypes.empty()) return Status::Error("sweep '" + submit.name + "': no dtypes");
  if (submit.shapes.empty()) return Status::Error("sweep '" + submit.name + "': no shapes");
  if (submit.gpu_models.empty()) return Status::Error("sweep '" + submit.name + "': no GPU models");
  if (submit.confirm_top > kMaxConfirmTop) {
    return Status::Error("sweep '" + submit.name + "': confirm_top must be at most " + std::to_string(kMaxConfirmTop));
  }
  if (submit.confirm_top > 0 && !(submit.confirm_seconds > 0 && submit.confirm_seconds <= 3600)) {
    return Status::Error("sweep '" + submit.name + "': confirm_seconds must be in (0, 3600] when confirm_top is set");
  }
  if (Status s = CheckSearchFields(submit, "sweep '" + submit.name + "': "); !s.ok()) return s;
  SweepSubmit listed = submit;  // its configs in the op's axis order
  if (Status s = CheckListedSweep(&listed, "sweep '" + submit.name + "': configs"); !s.ok()) return s;
  if (Status s = CheckSweepPriority(submit.priority, "sweep '" + submit.name + "': priority"); !s.ok()) return s;
  if (const uint64_t queued = PairsQueued(sweeps_); queued >= opts_.max_farm_pairs) {
    return Status::Error("sweep '" + submit.name + "': the farm has " + std::to_string(queued) +
                         " (config, shape) pairs queued, at the limit of " + std::to_string(opts_.max_farm_pairs) +
                         " pairs per farm (--max-farm-pairs); submit again once they are measured");
  }
  SweepState sweep;
  sweep.id = sweep_id;
  sweep.submit = std::move(listed);
  sweep.started_unix = now_unix;
  sweep.measured = std::move(measured);
  for (size_t i = 0; i < submit.ops.size(); ++i) {
    auto shared = SharedOpSpec(submit.op_packages[i], "op '" + submit.ops[i] + "'");
    if (!shared.ok()) return shared.status();
    const OpSpec* spec = shared->get();
    if (spec->name != submit.ops[i]) {
      return Status::Error("sweep '" + submit.name + "': op package for '" + submit.ops[i] +
                           "' holds op '" + spec->name + "'");
    }
    for (const auto& dt : submit.dtypes) {
      if (std::find(spec->dtypes.begin(), spec->dtypes.end(), dt) == spec->dtypes.end()) {
        return Status::Error("sweep '" + submit.name + "': op '" + spec->name +
                             "' does not support dtype '" + dt + "'");
      }
    }
    if (ShapesForOp(submit, *spec).empty()) {
      return Status::Error("sweep '" + submit.name + "': no shape gives the dims of op '" +
                           spec->name + "'");
    }
    for (const auto& shape : submit.shapes) {
      for (const auto& [dim, value] : shape.dims) {
        if (value <= 0) {
          return Status::Error("sweep '" + submit.name + "': shape " + shape.Canonical() +
                               ": dim " + dim + " must be positive");
        }
      }
    }
    // A config list is measured as given: its op's space is never enumerated.
    const uint64_t raw = RawSpaceSize(*spec);
    if (raw > opts_.max_raw_configs && submit.configs.empty()) {
      return Status::Error("sweep '" + submit.name + "': op '" + spec->name + "' has a config space of " +
                           (raw == UINT64_MAX ? std::string("over 2^64") : std::to_string(raw)) +
                           " raw points, more than this coordinator's limit of " +
                           std::to_string(opts_.max_raw_configs) + " (--max-raw-configs)");
    }
    sweep.specs.push_back(*spec);
  }
  auto& stored = sweeps_[sweep_id] = std::move(sweep);
  for (const auto& [model, device] : models_) {
    if (ModelLive(model) && stored.TargetsModel(model)) CreateUnits(stored, device, now_unix);
  }
  return sweep_id;
}

Status Scheduler::CancelSweep(const std::string& sweep_id, int64_t now_unix) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return Status::NotFound("unknown sweep '" + sweep_id + "'");
  SweepState& sweep = it->second;
  if (sweep.state != RunState::kRunning) {
    return Status::InvalidArgument("sweep " + sweep_id + " is " + RunStateName(sweep.state) + " already");
  }
  sweep.state = RunState::kCancelled;
  sweep.error = "cancelled";
  sweep.finished_unix = now_unix;
  return Status::OK();
}

void Scheduler::AddDevice(const DeviceInfo& device, int64_t now_unix) {
  if (device.model.empty()) return;
  models_.emplace(device.model, device);
  if (live_devices_[device.model]++ > 0) return;
  const DeviceInfo& first = models_.at(device.model);
  for (auto& [id, sweep] : sweeps_) {
    if (sweep.state == RunState::kRunning && sweep.TargetsModel(device.model)) CreateUnits(sweep, first, now_unix);
  }
}

void Scheduler::RemoveDevice(const std::string& model) {
  auto it = live_devices_.find(model);
  if (it == live_devices_.end()) return;
  if (--it->second > 0) return;
  live_devices_.erase(it);
  for (const auto& [id, sweep] : sweeps_) {
    if (sweep.state == RunState::kRunning && sweep.models.count(model)) return;  // its units still need it
  }
  models_.erase(model);
  pools_.erase(model);
  book_.ForgetModel(model);
}

bool Scheduler::ModelLive(const std::string& model) const { return live_devices_.count(model) > 0; }

void Scheduler::CreateUnits(SweepState& sweep, const DeviceInfo& device, int64_t now_unix) {
  if (!sweep.models.insert(device.model).second) return;
  SpaceExpansion job;
  job.sweep_id = sweep.id;
  job.device = device;
  job.specs = sweep.specs;
  job.dtypes = sweep.submit.dtypes;
  for (const auto& spec : sweep.specs) job.shapes.push_back(ShapesForOp(sweep.submit, spec));
  job.measured = sweep.measured;
  job.search.strategy = sweep.submit.strategy;
  job.search.seed = sweep.submit.seed;
  job.search.budget = sweep.submit.budget;
  ParseObjective(sweep.submit.objective, &job.search.objective);  // checked by AddSweep (CheckSearchFields)
  job.budget_seconds = sweep.submit.budget_seconds;
  job.priors = priors_;
  job.listed = sweep.submit.configs;
  job.max_legal_configs = opts_.max_legal_configs;
  job.max_pairs = opts_.max_sweep_pairs;
  sweep.expanding.insert(device.model);
  if (expander_) {
    expander_(std::move(job));
  } else {
    ApplyExpansion(sweep.id, device.model, ExpandSpace(job), now_unix);
  }
}

void Scheduler::ApplyExpansion(const std::string& sweep_id, const std::string& model,
                               Result<ExpandedSpace> space, int64_t now_unix) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return;
  SweepState& sweep = it->second;
  if (!sweep.expanding.erase(model) || sweep.state != RunState::kRunning) return;
  if (!space.ok()) {
    sweep.state = RunState::kFailed;
    sweep.error = space.status().message();
    return;
  }
  // Counted here, on the loop, where every running sweep's pairs are known.
  const uint64_t queued = PairsQueued(sweeps_), adding = space->pairs_total - space->pairs_done;
  if (queued + adding > opts_.max_farm_pairs) {
    sweep.state = RunState::kFailed;
    sweep.error = "sweep '" + sweep.submit.name + "' on " + model + ": " + std::to_string(adding) +
                  " (config, shape) pairs to measure with " + std::to_string(queued) +
                  " queued already, more than the limit of " + std::to_string(opts_.max_farm_pairs) +
                  " pairs per farm (--max-farm-pairs)";
    sweep.finished_unix = now_unix;
    return;
  }
  sweep.pairs_total += space->pairs_total;
  sweep.pairs_done += space->pairs_done;
  sweep.pairs_failed += space->pairs_failed;
  for (const auto& [cls, n] : space->failed_by_class) sweep.failed_by_class[cls] += n;
  for (const auto& [key, left] : space->pool_unsliced) {
    sweep.passes.Unsliced(key, int64_t(left));
  }
  for (auto& [key, plan] : space->plans) sweep.plans[key] = std::move(plan);
  for (auto& pool : space->pools) pools_[model].push_back(std::move(pool));
  MaybeFinish(sweep, now_unix);  // a resumed sweep may have nothing left
}

uint32_t Scheduler::UnitSizeFor(const std::string& worker, const Shape& shape) const {
  return pacing_.UnitSize(worker, shape.Canonical(), opts_.configs_per_unit, opts_.target_unit_seconds,
                          opts_.min_configs_per_unit, opts_.max_configs_per_unit);
}

Unit* Scheduler::CutUnit(const std::string& worker, const std::string& gpu_model, uint32_t priority, double now,
                         int64_t now_unix) {
  auto& pools = pools_[gpu_model];
  for (auto it = pools.begin(); it != pools.end();) {
    ConfigPool& pool = *it;
    SweepState& sweep = sweeps_.at(pool.sweep_id);
    if (sweep.state != RunState::kRunning) {
      it = pools.erase(it);
      continue;
    }
    if (sweep.submit.priority != priority) {  // another level's (Lease)
      ++it;
      continue;
    }
    if (pool.next >= pool.configs->size()) {
      // A searched key waits for its batch's figures; the next pools go meanwhile.
      if (!pool.search || pool.search->ended) {
        it = pools.erase(it);
        continue;
      }
      if (!NextSearchBatch(sweep, worker, gpu_model, pool, now, now_unix)) {
        ++it;
        continue;
      }
      if (pool.next >= pool.configs->size()) {
        it = pools.erase(it);
        continue;
      }
    }
    size_t n = sweep.submit.configs_per_unit ? sweep.submit.configs_per_unit
                                             : UnitSizeFor(worker, pool.shape);
    if (opts_.shrink_tail_units) {
      size_t left = 0;
      for (const auto& p : pools) {  // the level's: its devices end together
        if (sweeps_.at(p.sweep_id).submit.priority != priority) continue;
        left += p.configs->size() - std::min(p.next, p.configs->size());
      }
      // The model's units in flight (a device holds its next unit while it
      // runs one) and the asker's. A model with one device has nothing to
      // balance: halving its units would only cut a program op's compiles
      // ahead (measure/program/program_backend.h) into ever smaller plans.
      auto live = live_devices_.find(gpu_model);
      const bool lone = live != live_devices_.end() && live->second == 1;
      const size_t sharers = lone ? 1 : book_.LeasedOf(gpu_model) + 1;
      n = std::min(n, (left + sharers - 1) / sharers);
    }
    const size_t end = std::min(pool.configs->size(), pool.next + std::max<size_t>(n, 1));
    Unit u;
    u.sweep_id = pool.sweep_id;
    u.op = pool.op;
    u.dtype = pool.dtype;
    u.gpu_model = gpu_model;
    u.configs.assign(pool.configs->begin() + pool.next, pool.configs->begin() + end);
    if (pool.reusable) {
      for (const Config& c : u.configs) {
        auto stored = pool.reusable->find(c.Id());
        if (stored == pool.reusable->end()) continue;
        for (const std::string& digest : stored->second) u.reusable.push_back({c.Id(), digest});
      }
    }
    u.shape = pool.shape;
    u.shape_key = pool.shape.Canonical();
    sweep.passes.Unsliced(PoolKey{gpu_model, pool.op, pool.dtype, u.shape_key}, -int64_t(end - pool.next));
    pool.next = end;
    return &AddUnit(sweep, std::move(u));
  }
  return nullptr;
}

Unit& Scheduler::AddUnit(SweepState& sweep, Unit unit) {
  Unit& u = book_.Add(std::move(unit));
  sweep.units.push_back(u.id);
  sweep.passes.Opened(u);
  return u;
}

void Scheduler::BatchQueued(const std::string& sweep_id, uint64_t unit_id, double now) {
  Unit* u = book_.FindOf(sweep_id, unit_id);
  if (!u) return;
  u->batches_queued++;
  book_.NoteProgress(*u, now);
  NoteActive(u->gpu_model, now);
}

void Scheduler::BatchIngested(const std::string& sweep_id, uint64_t unit_id, uint64_t stored,
                              uint64_t stored_failed, const std::map<std::string, uint64_t>& failed_by_class,
                              double now) {
  Unit* u = book_.FindOf(sweep_id, unit_id);
  if (!u) return;
  if (u->batches_queued > 0) u->batches_queued--;
  book_.NoteProgress(*u, now);
  NoteActive(u->gpu_model, now);
  auto& sweep = sweeps_.at(sweep_id);
  // At most the unit's own pairs: a duplicate lease's rows come back too.
  const uint64_t counted = std::min<uint64_t>(stored, u->Pairs() - std::min<uint64_t>(u->pairs_counted, u->Pairs()));
  u->pairs_counted += counted;
  sweep.pairs_done += counted;
  sweep.pairs_failed += stored_failed;
  for (const auto& [cls, n] : failed_by_class) sweep.failed_by_class[cls] += n;
}

void Scheduler::NoteReused(const std::string& sweep_id, uint64_t unit_id, uint64_t n, uint64_t failed,
                           const std::map<std::string, uint64_t>& failed_by_class) {
  Unit* u = book_.FindOf(sweep_id, unit_id);
  if (!u || u->reused > 0) return;
  u->reused = std::min<uint64_t>(n, u->Pairs());
  SweepState& sweep = sweeps_.at(sweep_id);
  sweep.pairs_failed += failed;
  for (const auto& [cls, count] : failed_by_class) sweep.failed_by_class[cls] += count;
}

void Scheduler::AddPipeline(const std::string& worker, const std::string& sweep_id, uint64_t unit_id,
                            const PipelineFigures& figures) {
  const Unit* u = book_.FindOf(sweep_id, unit_id);
  if (!u || u->state == UnitState::kDone) return;
  SweepState& sweep = sweeps_.at(sweep_id);
  sweep.pipeline += figures;
  if (figures.compile_threads > 0) sweep.compile_threads[worker] = figures.compile_threads;
}

std::pair<uint64_t, uint64_t> Scheduler::InFlight(const std::string& sweep_id) const {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || it->second.state != RunState::kRunning) return {0, 0};
  uint64_t in_flight = 0, depth = 0;
  for (const auto& [model, pools] : pools_) {
    for (const ConfigPool& pool : pools) {
      if (pool.sweep_id != sweep_id || !pool.search || pool.search->ended) continue;
      const auto passes = it->second.passes.key.find(PoolKey{model, pool.op, pool.dtype, pool.shape.Canonical()});
      in_flight += pool.configs->size() - std::min(pool.next, pool.configs->size());
      if (passes != it->second.passes.key.end()) in_flight += passes->second.open_screen_configs;
      depth += pool.search->depth;
    }
  }
  return {in_flight, depth};
}

double Scheduler::CompleteUnit(const std::string& worker, const std::string& sweep_id,
                             uint64_t unit_id, double now, int64_t now_unix) {
  Unit* found = book_.FindOf(sweep_id, unit_id);
  if (!found) return 0;
  Unit& u = *found;
  NoteActive(u.gpu_model, now);
  auto& sweep = sweeps_.at(u.sweep_id);
  auto started = u.started.find(worker);
  // A confirm unit's length is set by the sweep, and a refine unit times
  // contenders to the CI target: neither is the worker's screening pace.
  if (started != u.started.end() && now > started->second && u.kind == UnitKind::kScreen) {
    const double pairs = static_cast<double>(u.Pairs() - std::min<uint64_t>(u.reused, u.Pairs()));
    pacing_.Record(worker, u.sweep_id, u.gpu_model, u.shape_key, pairs, now - started->second);
  }
  sweep.last_unit_end = std::max(sweep.last_unit_end, now);
  double took = 0;
  if (started != u.started.end()) {
    took = std::max(0.0, now - started->second);
    u.started.erase(started);
  }
  u.holders.erase(worker);
  if (u.state == UnitState::kDone) return took;
  if (u.state == UnitState::kFailed && u.leases_ran_out) {
    // Its last holder's results came after all: not failed.
    sweep.pairs_failed -= std::min(sweep.pairs_failed, u.lost_pairs);
    if (auto c = sweep.failed_by_class.find("unit_failed"); c != sweep.failed_by_class.end()) {
      c->second -= std::min(c->second, u.lost_pairs);
      if (c->second == 0) sweep.failed_by_class.erase(c);
    }
    sweep.units_failed -= std::min<uint64_t>(sweep.units_failed, 1);
    u.lost_pairs = 0;
    u.leases_ran_out = false;
  }
  // Its pairs are stored now, whoever stored them: rows a late batch of the
  // last run stored first came back as duplicates and counted nothing.
  if (u.pairs_counted < u.Pairs()) sweep.pairs_done += u.Pairs() - u.pairs_counted;
  u.pairs_counted = u.Pairs();
  Finish(u, UnitState::kDone, now_unix);
  return took;
}

void Scheduler::Finish(Unit& u, UnitState state, int64_t now_unix) {
  auto& sweep = sweeps_.at(u.sweep_id);
  if (u.state != UnitState::kDone && u.state != UnitState::kFailed) {
    sweep.units_finished++;
    sweep.passes.Closed(u);
  }
  book_.End(u, state);
  MaybeFinish(sweep, now_unix);
}

bool Scheduler::Running(const std::string& id) const {
  auto it = sweeps_.find(id);
  return it != sweeps_.end() && it->second.state == RunState::kRunning;
}

void Scheduler::MaybeFinish(SweepState& sweep, int64_t now_unix) {
  if (sweep.state != RunState::kRunning) return;
  for (const auto& model : sweep.models) {
    if (sweep.expanding.count(model)) continue;  // no pools yet: nothing is screened
    if (sweep.skipped.count(model)) continue;    // none of its passes run on
    MaybeRefine(sweep, model);
    MaybeConfirm(sweep, model);
  }
  if (sweep.models.empty() || !sweep.expanding.empty()) return;
  for (const auto& m : sweep.submit.gpu_models) {
    if (m != "*" && !sweep.models.count(m)) return;  // a targeted model not seen yet
  }
  for (const auto& [model, passes] : sweep.passes.model) {
    if (passes.unsliced > 0) return;
  }
  if (sweep.units_finished < sweep.units.size()) return;
  sweep.finished_unix = now_unix;
  if (sweep.units_failed == 0) {
    sweep.state = RunState::kDone;
    return;
  }
  sweep.state = RunState::kFailed;
  sweep.error = std::to_string(sweep.units_failed) + " of " + std::to_string(sweep.units.size()) +
                " units failed, their pairs unmeasured (last: " + sweep.unit_failure + "); " +
                std::to_string(sweep.pairs_done - std::min(sweep.pairs_done, sweep.pairs_failed)) + " pairs measured and stored";
}

std::string Scheduler::ProposerOf(const std::string& sweep_id, const PoolKey& key) const {
  const auto s = sweeps_.find(sweep_id);
  if (s == sweeps_.end()) return "";
  const auto plan = s->second.plans.find(key);
  return plan == s->second.plans.end() ? "" : plan->second.strategy;
}

std::map<std::string, uint64_t> Scheduler::QueuedConfigsPerModel() const {
  std::map<std::string, uint64_t> out;
  for (const auto& [model, n] : live_devices_) out[model] = 0;  // a live model with nothing queued says 0
  for (const auto& [model, pools] : pools_) {
    for (const ConfigPool& p : pools) out[model] += p.configs->size() - std::min(p.next, p.configs->size());
  }
  for (const Unit* u : book_.Queued("")) out[u->gpu_model] += u->configs.size();
  return out;
}

const SweepState* Scheduler::FindSweep(const std::string& id) const {
  auto it = sweeps_.find(id);
  return it == sweeps_.end() ? nullptr : &it->second;
}

std::vector<SweepProgress> Scheduler::Progress(const std::string& sweep_id, std::optional<double> now) const {
  std::vector<SweepProgress> out;
  for (const auto& [id, s] : sweeps_) {
    if (!sweep_id.empty() && id != sweep_id) continue;
    SweepProgress p;
    p.sweep_id = id;
    p.name = s.submit.name;
    p.state = RunStateName(s.state);
    p.priority = s.submit.priority;
    p.pipeline = s.pipeline;
    for (const auto& [worker, threads] : s.compile_threads) p.pipeline.compile_threads += threads;
    if (s.first_lease >= 0) {
      const double end = s.state == RunState::kRunning && now ? *now : s.last_unit_end;
      p.pipeline.wall_seconds = std::max(0.0, end - s.first_lease);
    }
    std::tie(p.in_flight, p.in_flight_depth) = InFlight(id);
    p.units_total = s.units.size();
    p.units_done = s.units_finished;
    p.pairs_total = s.pairs_total;
    p.pairs_done = s.pairs_done;
    p.pairs_failed = s.pairs_failed;
    p.failed_by_class = s.failed_by_class;
    p.gpu_models.assign(s.models.begin(), s.models.end());
    p.error = s.error;
    p.expanding.assign(s.expanding.begin(), s.expanding.end());
    if (s.state == RunState::kRunning) {
      for (const auto& m : s.submit.gpu_models) {
        if (m != "*" && !s.models.count(m)) p.waiting_for.push_back(m);  // never seen live
      }
      for (const auto& m : s.models) {
        const auto passes = s.passes.model.find(m);
        const bool work_left = passes != s.passes.model.end() && passes->second.WorkLeft();
        if (work_left && !ModelLive(m) && !s.skipped.count(m)) p.waiting_for.push_back(m);
      }
      // What it waits for, in words: whether a model is absent or present
      // and quiet, and whether it will stop waiting.
      const auto& named = s.submit.gpu_models;
      for (const auto& m : named) {
        if (m != "*" && !s.models.count(m)) p.waits.push_back(m + ": no live worker has it");
      }
      for (const auto& m : s.models) {
        if (s.expanding.count(m) || s.skipped.count(m)) continue;
        const uint64_t queued = QueuedPairs(s, m);
        const bool by_name = std::find(named.begin(), named.end(), m) != named.end();
        const std::string until = by_name ? "" : "; skipped after " + std::to_string(static_cast<int64_t>(
                                                                           opts_.model_idle_seconds)) + " s";
        const double quiet = now ? QuietSeconds(m, *now) : 0;
        if (!ModelLive(m) && std::find(p.waiting_for.begin(), p.waiting_for.end(), m) != p.waiting_for.end()) {
          p.waits.push_back(m + ": " + std::to_string(queued) + " pairs queued, no live worker has it" + until);
        } else if (queued > 0 && quiet >= std::min(10.0, opts_.model_idle_seconds)) {
          p.waits.push_back(m + ": " + std::to_string(queued) + " pairs queued, no device has taken work for " +
                            std::to_string(static_cast<int64_t>(quiet)) + " s" + until);
        }
      }
    }
    for (const auto& [m, why] : s.skipped) p.skipped.push_back(why);
    p.started_unix = s.started_unix;
    p.finished_unix = s.finished_unix;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tune
