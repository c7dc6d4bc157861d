#include "lease_book.h"

#include <algorithm>

namespace tune {

Unit& LeaseBook::Add(Unit u) {
  u.id = next_id_++;
  u.state = UnitState::kPending;
  return units_.emplace(u.id, std::move(u)).first->second;
}

Unit* LeaseBook::Find(uint64_t id) {
  auto it = units_.find(id);
  return it == units_.end() ? nullptr : &it->second;
}

const Unit* LeaseBook::Find(uint64_t id) const {
  auto it = units_.find(id);
  return it == units_.end() ? nullptr : &it->second;
}

Unit* LeaseBook::FindOf(const std::string& sweep_id, uint64_t id) {
  Unit* u = Find(id);
  return u && u->sweep_id == sweep_id ? u : nullptr;
}

void LeaseBook::Queue(const Unit& u, bool front) {
  auto& queue = queued_[u.gpu_model];
  if (front) {
    queue.push_front(u.id);
  } else {
    queue.push_back(u.id);
  }
}

Unit* LeaseBook::Take(const std::string& model, const std::function<Pick(const Unit&)>& pick) {
  auto& queue = queued_[model];
  for (auto at = queue.begin(); at != queue.end();) {
    Unit* u = Find(*at);
    const Pick p = u && u->state == UnitState::kPending ? pick(*u) : Pick::kDrop;
    if (p == Pick::kSkip) {
      ++at;
      continue;
    }
    at = queue.erase(at);
    if (p == Pick::kTake) return u;
  }
  return nullptr;
}

std::vector<const Unit*> LeaseBook::Queued(const std::string& model, const std::string& sweep_id) const {
  std::vector<const Unit*> out;
  std::set<uint64_t> seen;  // a unit queued twice counts once
  for (const auto& [m, queue] : queued_) {
    if (!model.empty() && m != model) continue;
    for (uint64_t id : queue) {
      const Unit* u = Find(id);
      if (u && u->state == UnitState::kPending && (sweep_id.empty() || u->sweep_id == sweep_id) &&
          seen.insert(id).second)
        out.push_back(u);
    }
  }
  return out;
}

std::vector<Unit*> LeaseBook::Queued(const std::string& model, const std::string& sweep_id) {
  std::vector<Unit*> out;
  for (const Unit* u : std::as_const(*this).Queued(model, sweep_id)) out.push_back(Find(u->id));
  return out;
}

void LeaseBook::Lease(Unit& u, const std::string& worker, double now, double seconds) {
  u.state = UnitState::kLeased;
  u.attempts++;
  u.holders[worker] = now + seconds;
  u.started[worker] = now;
  u.last_progress = now;
  leased_.emplace(u.last_progress, u.id);
  leased_per_model_[u.gpu_model]++;
}

void LeaseBook::Duplicate(Unit& u, const std::string& worker, double now, double seconds) {
  u.holders[worker] = now + seconds;
  u.started[worker] = now;
}

bool LeaseBook::Release(Unit& u, const std::string& worker) {
  u.holders.erase(worker);
  u.started.erase(worker);
  return u.state == UnitState::kLeased && u.holders.empty();
}

void LeaseBook::Requeue(Unit& u) {
  if (u.state == UnitState::kLeased) {
    leased_.erase({u.last_progress, u.id});
    leased_per_model_[u.gpu_model]--;
  }
  u.state = UnitState::kPending;
  Queue(u, /*front=*/true);
}

void LeaseBook::NoteProgress(Unit& u, double now) {
  if (u.state != UnitState::kLeased || now <= u.last_progress) return;
  leased_.erase({u.last_progress, u.id});
  u.last_progress = now;
  leased_.emplace(u.last_progress, u.id);
}

void LeaseBook::End(Unit& u, UnitState state) {
  if (u.state == UnitState::kLeased) {
    leased_.erase({u.last_progress, u.id});
    leased_per_model_[u.gpu_model]--;
  }
  u.state = state;
}

std::vector<uint64_t> LeaseBook::LeasedIds() const {
  std::vector<uint64_t> ids;
  ids.reserve(leased_.size());
  for (const auto& entry : leased_) ids.push_back(entry.second);
  return ids;
}

bool LeaseBook::Holds(const std::string& worker, uint64_t id) const {
  const Unit* u = Find(id);
  return u && u->state == UnitState::kLeased && u->holders.count(worker);
}

double LeaseBook::HeldFor(const std::string& worker, double now) const {
  double longest = 0;
  for (const auto& entry : leased_) {
    const Unit& held = units_.at(entry.second);
    auto it = held.holders.find(worker);
    if (it != held.holders.end()) longest = std::max(longest, it->second - now);
  }
  return longest;
}

std::vector<std::pair<uint64_t, std::string>> LeaseBook::Expired(double now) const {
  std::vector<std::pair<uint64_t, std::string>> out;
  for (const auto& entry : leased_) {
    for (const auto& [worker, deadline] : units_.at(entry.second).holders) {
      if (deadline < now) out.emplace_back(entry.second, worker);
    }
  }
  return out;
}

size_t LeaseBook::LeasedOf(const std::string& model) const {
  auto it = leased_per_model_.find(model);
  return it == leased_per_model_.end() ? 0 : it->second;
}

void LeaseBook::ForgetModel(const std::string& model) {
  queued_.erase(model);
  leased_per_model_.erase(model);
}

}  // namespace tune
