// The scheduler's passes after screening (scheduler.h): refine, where a
// shape's near-best configs are timed again to the CI target, and confirm,
// where a model's contenders are timed together.
#include "scheduler.h"

#include <algorithm>
#include <cmath>

#include "base/stats.h"

namespace tune {

namespace {

// Calls fn(i, dtype, shape) for each (op, dtype, shape) of a sweep, `i`
// indexing its ops and specs.
template <typename Fn>
void ForEachOpDtypeShape(const SweepState& sweep, Fn&& fn) {
  for (size_t i = 0; i < sweep.specs.size(); ++i) {
    for (const auto& dtype : sweep.submit.dtypes) {
      for (const auto& shape : ShapesForOp(sweep.submit, sweep.specs[i])) fn(i, dtype, shape);
    }
  }
}

}  // namespace

void Scheduler::MaybeRefine(SweepState& sweep, const std::string& model) {
  if (!sweep.submit.refine_pass || !near_best_ || sweep.state != RunState::kRunning) return;
  ForEachOpDtypeShape(sweep, [&](size_t i, const std::string& dtype, const Shape& shape) {
    // Once the shape is screened: refine at once, while the next shapes
    // are screened, early refine units or not; then, each time one of the
    // key's refine units is done, the configs that came near the best since.
    if (sweep.passes.key[PoolKey{model, sweep.submit.ops[i], dtype, shape.Canonical()}].RefineNow(false)) {
      CreateRefineUnits(sweep, model, i, dtype, shape);
    }
  });
}

bool Scheduler::RefineEarly(const std::string& model, uint32_t priority) {
  if (!near_best_) return false;
  bool created = false;
  for (auto& [id, sweep] : sweeps_) {
    if (sweep.submit.priority != priority) continue;
    if (!sweep.submit.refine_pass || sweep.state != RunState::kRunning || !sweep.models.count(model) ||
        sweep.expanding.count(model) || sweep.skipped.count(model)) {
      continue;  // a model being expanded has no keys screened yet
    }
    ForEachOpDtypeShape(sweep, [&](size_t i, const std::string& dtype, const Shape& shape) {
      if (!sweep.passes.key[PoolKey{model, sweep.submit.ops[i], dtype, shape.Canonical()}].RefineNow(true)) return;
      const size_t before = sweep.units.size();
      CreateRefineUnits(sweep, model, i, dtype, shape);
      created = created || sweep.units.size() > before;
    });
  }
  return created;
}

void Scheduler::CreateRefineUnits(SweepState& sweep, const std::string& model, size_t i, const std::string& dtype,
                                  const Shape& shape) {
  NearBest near = near_best_(models_.at(model), sweep.specs[i], dtype, shape, opts_.refine_within,
                             sweep.submit.retime ? sweep.id : "");
  auto& queued = sweep.passes.key[PoolKey{model, sweep.submit.ops[i], dtype, shape.Canonical()}].refine_queued;
  std::erase_if(near.configs, [&](const Config& c) { return !queued.insert(c.Id()).second; });
  if (near.configs.empty() || near.best_us <= 0) return;
  // Small units, leased before any screening unit: the pass spreads over
  // every device of the model while the next shapes are screened, and its
  // last units end close together.
  const size_t most = sweep.submit.configs_per_unit ? sweep.submit.configs_per_unit : opts_.configs_per_unit;
  const size_t per_unit = std::clamp<size_t>((near.configs.size() + 31) / 32, 1, std::max<size_t>(most, 1));
  for (size_t at = 0; at < near.configs.size(); at += per_unit) {
    QueueShapeUnit(sweep, model, i, dtype, shape,
                   {near.configs.begin() + at, near.configs.begin() + std::min(near.configs.size(), at + per_unit)},
                   UnitKind::kRefine, 0, near.best_us);
  }
}

void Scheduler::QueueShapeUnit(SweepState& sweep, const std::string& model, size_t i, const std::string& dtype,
                               const Shape& shape, std::vector<Config> configs, UnitKind kind,
                               double confirm_seconds, double refine_best_us) {
  Unit u;
  u.sweep_id = sweep.id;
  u.op = sweep.submit.ops[i];
  u.dtype = dtype;
  u.gpu_model = model;
  u.configs = std::move(configs);
  u.shape = shape;
  u.shape_key = shape.Canonical();
  u.kind = kind;
  u.confirm_seconds = confirm_seconds;
  u.refine_best_us = refine_best_us;
  sweep.pairs_total += u.configs.size();
  book_.Queue(AddUnit(sweep, std::move(u)));
}

void Scheduler::MaybeConfirm(SweepState& sweep, const std::string& model) {
  if (sweep.submit.confirm_top == 0 || !contenders_ || sweep.state != RunState::kRunning) return;
  if (!sweep.passes.model[model].ConfirmNow()) return;
  ForEachOpDtypeShape(sweep, [&](size_t i, const std::string& dtype, const Shape& shape) {
    std::vector<Config> top = contenders_(models_.at(model), sweep.specs[i], dtype, shape, sweep.submit.confirm_top,
                                          sweep.submit.retime ? sweep.id : "");
    if (!top.empty()) QueueShapeUnit(sweep, model, i, dtype, shape, std::move(top), UnitKind::kConfirm,
                                    sweep.submit.confirm_seconds, 0);
  });
}

}  // namespace tune
