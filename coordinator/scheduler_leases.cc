// The scheduler's lease book (scheduler.h): which unit a device asking for
// work gets (priority levels, fresh units, stragglers' duplicates), how long
// a lease lasts, and what happens to the leases of a worker that gives a
// unit up, goes quiet or leaves.
#include "scheduler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace tune {

double Scheduler::LeaseSeconds(const Unit& u) const {
  // A confirm unit of a profiling sweep also runs the profiler on its
  // fastest: a process start and the kernel's replays each.
  constexpr double kProfileSeconds = 720;  // ProfileKernel's limits: 600 s of run, 120 s to write the report
  const uint32_t profiles = u.kind == UnitKind::kConfirm ? sweeps_.at(u.sweep_id).submit.profile_top : 0;
  return opts_.lease_base_seconds + u.confirm_seconds + opts_.lease_per_pair_seconds * double(u.Pairs()) +
         kProfileSeconds * double(std::min<size_t>(profiles, u.Pairs()));
}

WorkUnit Scheduler::MakeWorkUnit(const Unit& u, double lease_seconds) const {
  const auto& sweep = sweeps_.at(u.sweep_id);
  WorkUnit w;
  w.sweep_id = u.sweep_id;
  w.unit_id = u.id;
  w.attempt = u.attempts;
  w.op = u.op;
  for (size_t i = 0; i < sweep.submit.ops.size(); ++i) {
    if (sweep.submit.ops[i] != u.op) continue;
    w.op_package = sweep.submit.op_packages[i];
  }
  w.shapes = {u.shape};
  w.dtype = u.dtype;
  w.configs = u.configs;
  w.lease_seconds = lease_seconds;
  w.confirm_seconds = u.confirm_seconds;
  if (u.confirm_seconds > 0) w.confirm_timing = sweep.submit.confirm_timing;
  w.refine_best_us = u.refine_best_us;
  w.screen_only = u.kind == UnitKind::kScreen && sweep.submit.refine_pass && near_best_;
  if (u.kind == UnitKind::kConfirm) w.profile_top = sweep.submit.profile_top;
  if (u.kind == UnitKind::kScreen) w.reusable = u.reusable;
  if (sweep.submit.objective != ObjectiveName(Objective::kTime)) w.energy_seconds = kSweepEnergySeconds;
  return w;
}

std::vector<uint32_t> Scheduler::PriorityLevels(const std::string& gpu_model) const {
  std::set<uint32_t, std::greater<>> levels;
  for (const auto& [id, sweep] : sweeps_) {
    if (sweep.state == RunState::kRunning && sweep.models.count(gpu_model)) levels.insert(sweep.submit.priority);
  }
  return {levels.begin(), levels.end()};
}

std::optional<WorkUnit> Scheduler::Lease(const std::string& worker, const std::string& gpu_model,
                                         double now, int64_t now_unix) {
  NoteActive(gpu_model, now);
  // Sweeps by priority (SweepSubmit::priority), highest first, each level
  // in full before the next: a farm shared by a long sweep and an urgent
  // one serves the urgent one first, down to its tail duplicates. Within a
  // level, units that went back to the queue (and refine and confirm units)
  // first, then fresh ones, then early refine units, then a duplicate of a
  // straggler; sweeps of a level in submission order.
  for (const uint32_t level : PriorityLevels(gpu_model)) {
    if (auto unit = LeaseAt(worker, gpu_model, level, now, now_unix)) return unit;
  }
  return std::nullopt;
}

std::optional<WorkUnit> Scheduler::LeaseAt(const std::string& worker, const std::string& gpu_model,
                                           uint32_t priority, double now, int64_t now_unix) {
  auto take_pending = [&]() -> Unit* {
    return book_.Take(gpu_model, [&](const Unit& u) {
      const SweepState& sweep = sweeps_.at(u.sweep_id);
      if (sweep.state != RunState::kRunning) return LeaseBook::Pick::kDrop;
      return sweep.submit.priority == priority ? LeaseBook::Pick::kTake : LeaseBook::Pick::kSkip;
    });
  };
  Unit* next = take_pending();
  if (!next) next = CutUnit(worker, gpu_model, priority, now, now_unix);
  if (!next && RefineEarly(gpu_model, priority)) next = take_pending();
  if (next) {
    Unit& u = *next;
    // A worker asks for a device's next unit while it runs its last one: the
    // new unit waits behind what the worker holds, and its lease must not
    // run down meanwhile.
    const double lease = LeaseSeconds(u) + book_.HeldFor(worker, now);
    book_.Lease(u, worker, now, lease);
    if (double& first = sweeps_.at(u.sweep_id).first_lease; first < 0) first = now;
    return MakeWorkUnit(u, lease);
  }
  if (!opts_.tail_duplicates) return std::nullopt;
  // Tail of the sweep: duplicate a straggler. Ingestion is idempotent, so
  // whichever copy finishes first wins and the other's rows are ignored.
  Unit* straggler = FindStraggler(worker, gpu_model, priority, now);
  if (!straggler) return std::nullopt;
  const double lease = LeaseSeconds(*straggler);
  book_.Duplicate(*straggler, worker, now, lease);
  return MakeWorkUnit(*straggler, lease);
}

double Scheduler::StragglerAge(const Unit& u) {
  // What the unit should take: at its sweep's median pace for the model and
  // shape, or before any of those units is done, at its holder's own
  // measured pace on the shape.
  const double seconds_per_pair =
      pacing_.SecondsPerPair(u.sweep_id, u.gpu_model, u.shape_key, u.holders.begin()->first);
  return std::max(opts_.tail_min_age_seconds,
                  opts_.tail_slow_factor * seconds_per_pair * static_cast<double>(u.Pairs()));
}

Unit* Scheduler::FindStraggler(const std::string& worker, const std::string& gpu_model, uint32_t priority,
                               double now) {
  // The unit of this model, held by one other worker, that has gone longest
  // without progress, if that is longer than its units usually take. Idle
  // workers ask often, so the common answer (every lease made progress
  // lately) costs one look at the quietest lease.
  for (const auto& [progress, id] : book_.leased()) {
    if (now - progress < opts_.tail_min_age_seconds) break;  // the rest are younger
    Unit& u = *book_.Find(id);
    if (u.gpu_model != gpu_model || u.holders.size() != 1 || u.holders.count(worker)) continue;
    if (sweeps_.at(u.sweep_id).submit.priority != priority) continue;
    // Confirm units are long by design, and one device's figures must not
    // mix in; refine units time contenders to the CI target, several times
    // a screening unit's pace.
    if (u.kind != UnitKind::kScreen) continue;
    if (u.batches_queued == 0 && now - progress >= StragglerAge(u)) return &u;
  }
  return nullptr;
}

void Scheduler::ReleaseHolder(Unit& u, const std::string& worker, int64_t now_unix, const std::string& why) {
  if (u.state == UnitState::kLeased) u.lost_lease = why;
  if (!book_.Release(u, worker)) return;
  if (u.attempts >= opts_.max_attempts) {
    // Its pairs will not be measured: they count as failed, and the sweep
    // says why when it ends (MaybeFinish), not "done" with nothing measured.
    SweepState& sweep = sweeps_.at(u.sweep_id);
    const uint64_t lost = u.Pairs() - std::min<uint64_t>(u.pairs_counted, u.Pairs());
    u.pairs_counted += lost;
    u.lost_pairs = lost;
    u.leases_ran_out = true;
    sweep.pairs_done += lost;
    sweep.pairs_failed += lost;
    if (lost) sweep.failed_by_class["unit_failed"] += lost;
    sweep.units_failed++;
    sweep.unit_failure = "unit " + std::to_string(u.id) + " (" + u.op + " " + u.dtype + " " + u.shape_key + " on " +
                         u.gpu_model + ") after " + std::to_string(u.attempts) + " leases: " + u.lost_lease;
    Finish(u, UnitState::kFailed, now_unix);
    return;
  }
  book_.Requeue(u);  // retried first
}

void Scheduler::DropWorker(const std::string& worker, int64_t now_unix) {
  // ReleaseHolder may take the unit out of the leased ones: a copy.
  for (uint64_t id : book_.LeasedIds()) {
    Unit& u = *book_.Find(id);
    if (u.holders.count(worker)) ReleaseHolder(u, worker, now_unix, "its worker left");
  }
}

bool Scheduler::Holds(const std::string& worker, uint64_t unit_id) const { return book_.Holds(worker, unit_id); }

void Scheduler::GiveUpLease(const std::string& worker, uint64_t unit_id, int64_t now_unix, const std::string& why) {
  Unit* u = book_.Find(unit_id);
  if (u && u->holders.count(worker)) ReleaseHolder(*u, worker, now_unix, "results refused: " + why);
}

size_t Scheduler::ExpireLeases(double now, int64_t now_unix) {
  const auto late = book_.Expired(now);
  for (const auto& [id, worker] : late) ReleaseHolder(*book_.Find(id), worker, now_unix, "its lease expired");
  return late.size();
}

std::map<std::string, size_t> Scheduler::LeasesPerWorker() const {
  std::map<std::string, size_t> out;
  for (const auto& [progress, id] : book_.leased()) {
    // A cancelled or failed sweep's units still out are no work: its
    // results will be refused.
    const Unit& unit = *book_.Find(id);
    const auto sweep = sweeps_.find(unit.sweep_id);
    if (sweep == sweeps_.end() || sweep->second.state != RunState::kRunning) continue;
    for (const auto& [worker, deadline] : unit.holders) out[worker]++;
  }
  return out;
}

std::map<std::string, uint64_t> Scheduler::LeasedUnitsPerModel() const {
  std::map<std::string, uint64_t> out;
  for (const auto& [model, n] : live_devices_) out[model] = 0;
  for (const auto& [model, n] : book_.leased_per_model()) out[model] = n;
  return out;
}

}  // namespace tune
