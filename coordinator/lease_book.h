// LeaseBook: the scheduler's units and their leases, as bookkeeping only.
//
// It holds every unit of the coordinator's run under its id, the queue of
// units waiting to be leased per GPU model, who holds each leased unit
// until when, and the leased units quietest first (by their last
// progress), which expiry, dead workers and the straggler search visit.
// What a unit is for, which one a device gets, and what a lease's end means
// to its sweep are the scheduler's (scheduler.h); the book keeps a unit's
// state, holders and indexes consistent. Every time is the caller's `now`.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "unit.h"

namespace tune {

class LeaseBook {
 public:
  // Units filed from now on are numbered from `first` (Scheduler::NumberUnitsFrom).
  void NumberFrom(uint64_t first) { next_id_ = first; }

  // Files `u` (state kPending, not queued) under a new id.
  Unit& Add(Unit u);
  Unit* Find(uint64_t id);
  const Unit* Find(uint64_t id) const;
  // The unit when it is of `sweep_id`: results name both.
  Unit* FindOf(const std::string& sweep_id, uint64_t id);

  // Queues a pending unit for its model's devices: at the back, or at the
  // front (a unit whose lease ended is retried first).
  void Queue(const Unit& u, bool front = false);
  // What Take does with a queued unit.
  enum class Pick { kTake, kSkip, kDrop };
  // The first pending unit queued for `model` that `pick` takes, out of the
  // queue; units it drops (and any no longer pending) leave the queue as
  // it is walked, those it skips stay. nullptr when none is taken.
  Unit* Take(const std::string& model, const std::function<Pick(const Unit&)>& pick);
  // The pending units queued for `model` (every model when empty) of
  // `sweep_id` (every sweep when empty), each once, in queue order.
  std::vector<Unit*> Queued(const std::string& model, const std::string& sweep_id = "");
  std::vector<const Unit*> Queued(const std::string& model, const std::string& sweep_id = "") const;

  // `worker` leases `u` (pending) from `now` for `seconds`: it is leased,
  // one attempt more, its progress clock starts.
  void Lease(Unit& u, const std::string& worker, double now, double seconds);
  // `worker` also holds `u` (leased to another: a straggler's duplicate).
  void Duplicate(Unit& u, const std::string& worker, double now, double seconds);
  // `worker` no longer holds `u`. True when `u` is leased and no one holds
  // it now: the caller requeues it (Requeue) or ends it (End).
  bool Release(Unit& u, const std::string& worker);
  // A leased unit no one holds goes back to pending, queued first.
  void Requeue(Unit& u);
  // A results batch of leased `u` at `now`: it moves in the quietest-first order.
  void NoteProgress(Unit& u, double now);
  // `u` ends (kDone or kFailed), out of the leased units if it was one.
  void End(Unit& u, UnitState state);

  // The leased units as (last progress, id), quietest first.
  const std::set<std::pair<double, uint64_t>>& leased() const { return leased_; }
  // Their ids, a copy to iterate over while releasing.
  std::vector<uint64_t> LeasedIds() const;
  // Whether `worker` holds a live lease of `id`.
  bool Holds(const std::string& worker, uint64_t id) const;
  // How long the longest lease `worker` holds still runs after `now`.
  double HeldFor(const std::string& worker, double now) const;
  // (unit, worker) of every lease whose deadline is before `now`.
  std::vector<std::pair<uint64_t, std::string>> Expired(double now) const;
  // Units leased now of `model`, and per model.
  size_t LeasedOf(const std::string& model) const;
  const std::map<std::string, size_t>& leased_per_model() const { return leased_per_model_; }
  // A model no device or running sweep needs: its queue and count go.
  void ForgetModel(const std::string& model);

 private:
  std::map<uint64_t, Unit> units_;
  std::set<std::pair<double, uint64_t>> leased_;
  std::map<std::string, size_t> leased_per_model_;
  std::map<std::string, std::deque<uint64_t>> queued_;  // per model
  uint64_t next_id_ = 1;
};

}  // namespace tune
