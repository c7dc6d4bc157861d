// The scheduler's quiet-model rule (scheduler.h): a model no device takes
// work of while pairs are queued is skipped by the sweeps that did not name
// it, its queued pairs dropped.
#include "scheduler.h"

#include <algorithm>
#include <set>

namespace tune {

void Scheduler::NoteActive(const std::string& model, double now) {
  double& at = model_active_[model];
  at = std::max(at, now);
}

void Scheduler::NoteAsked(const std::string& model, double now) { NoteActive(model, now); }

uint64_t Scheduler::QueuedPairs(const SweepState& sweep, const std::string& model) const {
  uint64_t queued = 0;
  if (auto pools = pools_.find(model); pools != pools_.end()) {
    for (const ConfigPool& p : pools->second) {
      if (p.sweep_id == sweep.id) queued += p.configs->size() - std::min(p.next, p.configs->size());
    }
  }
  for (const Unit* u : book_.Queued(model, sweep.id)) queued += u->Pairs();
  return queued;
}

double Scheduler::QuietSeconds(const std::string& model, double now) const {
  auto since = queued_since_.find(model);
  if (since == queued_since_.end()) return 0;
  double from = since->second;
  if (auto active = model_active_.find(model); active != model_active_.end()) from = std::max(from, active->second);
  return std::max(0.0, now - from);
}

std::vector<Scheduler::SkippedModel> Scheduler::SkipQuietModels(double now, int64_t now_unix) {
  // The clocks first, for every model a running sweep has expanded: a
  // model busy with a lease (its deadline bounds how long a device that
  // took work and went quiet holds it) is active now; one with nothing
  // queued has nothing to be quiet about.
  std::map<std::string, uint64_t> queued;
  for (const auto& [id, sweep] : sweeps_) {
    if (sweep.state != RunState::kRunning) continue;
    for (const auto& model : sweep.models) {
      if (sweep.expanding.count(model) || sweep.skipped.count(model)) continue;
      queued[model] += QueuedPairs(sweep, model);
    }
  }
  for (auto it = queued_since_.begin(); it != queued_since_.end();) {
    auto q = queued.find(it->first);
    it = q == queued.end() || q->second == 0 ? queued_since_.erase(it) : std::next(it);
  }
  std::vector<SkippedModel> out;
  for (const auto& [model, pairs] : queued) {
    if (pairs == 0) continue;
    queued_since_.emplace(model, now);
    if (book_.LeasedOf(model) > 0) NoteActive(model, now);
    const double quiet = QuietSeconds(model, now);
    if (quiet < opts_.model_idle_seconds) continue;
    for (auto& [id, sweep] : sweeps_) {
      if (sweep.state != RunState::kRunning || !sweep.models.count(model) || sweep.expanding.count(model) ||
          sweep.skipped.count(model)) {
        continue;
      }
      const auto& named = sweep.submit.gpu_models;
      if (std::find(named.begin(), named.end(), model) != named.end()) continue;  // asked for by name: waits
      const uint64_t dropped = QueuedPairs(sweep, model);
      if (dropped == 0) continue;
      const std::string why = model + ": no device took work for " + std::to_string(static_cast<int64_t>(quiet)) +
                              " s with " + std::to_string(dropped) + " pairs queued; those pairs are dropped";
      SkipModel(sweep, model, why, now_unix);
      out.push_back({id, model, why});
    }
  }
  return out;
}

void Scheduler::SkipModel(SweepState& sweep, const std::string& model, const std::string& why, int64_t now_unix) {
  // Dropped rather than kept as skipped pairs: the sweep's progress then
  // reads as what it will measure, and a resubmitted sweep measures what
  // is missing once the model works again.
  sweep.skipped[model] = why;
  uint64_t dropped = 0;
  auto& pools = pools_[model];
  for (auto it = pools.begin(); it != pools.end();) {
    if (it->sweep_id != sweep.id) {
      ++it;
      continue;
    }
    dropped += it->configs->size() - std::min(it->next, it->configs->size());
    if (it->search && !it->search->ended) {
      dropped += it->search->budget() - it->search->proposed;  // what the search would still have proposed
      it->search->ended = true;
    }
    it = pools.erase(it);
  }
  sweep.passes.model[model].unsliced = 0;
  for (auto& [key, passes] : sweep.passes.key) {
    if (key.model == model) passes.unsliced = 0;
  }
  const std::vector<Unit*> pending = book_.Queued(model, sweep.id);
  for (const Unit* u : pending) dropped += u->Pairs() - std::min<uint64_t>(u->pairs_counted, u->Pairs());
  sweep.pairs_total -= std::min(dropped, sweep.pairs_total - std::min(sweep.pairs_total, sweep.pairs_done));
  for (Unit* u : pending) Finish(*u, UnitState::kFailed, now_unix);  // the last may end the sweep
  MaybeFinish(sweep, now_unix);
}

}  // namespace tune
