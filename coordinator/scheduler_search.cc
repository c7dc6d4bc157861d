// The scheduler's search driver (scheduler.h): when a searched key's pool
// runs dry, how deep it may go and its next batch, proposed on the
// proposer's thread and taken on the loop's.
#include "scheduler.h"

#include <algorithm>

namespace tune {

namespace {

// The key of configs that compile to one kernel in a sweep: every shape of
// a (GPU model, op, dtype) takes the same cubin for a config.
std::string KernelKey(const std::string& model, const ConfigPool& pool) {
  return model + '\0' + pool.op + '\0' + pool.dtype;
}

}  // namespace

void Scheduler::ProposeAhead(const std::string& model, double now, int64_t now_unix, size_t ahead) {
  auto found = pools_.find(model);
  if (found == pools_.end()) return;
  for (ConfigPool& pool : found->second) {
    if (!pool.search || pool.search->ended || pool.next < pool.configs->size()) continue;
    auto sweep = sweeps_.find(pool.sweep_id);
    if (sweep == sweeps_.end() || sweep->second.state != RunState::kRunning) continue;
    // The model's pace (RateKey's `who` may be a model) sizes the depth.
    NextSearchBatch(sweep->second, model, model, pool, now, now_unix, ahead);
  }
}

bool Scheduler::NextSearchBatch(SweepState& sweep, const std::string& worker, const std::string& model,
                                ConfigPool& pool, double now, int64_t now_unix, size_t ahead) {
  SearchedKey& ks = *pool.search;
  KeyPasses& passes = sweep.passes.key[PoolKey{model, pool.op, pool.dtype, pool.shape.Canonical()}];
  if (ks.proposing) return false;  // its batch is being proposed
  // A batch of a fixed size, not one sized to the devices: what a seed
  // proposes must not depend on how many devices measure it (the depth
  // does: how many batches are out while their figures come in).
  const size_t unit = sweep.submit.configs_per_unit ? sweep.submit.configs_per_unit : opts_.configs_per_unit;
  const size_t batch = std::clamp<size_t>(unit, kSearchBatchMin, kSearchBatchMax);
  ks.depth = SearchDepth(worker, model, pool.shape, batch);
  // A builder's ask goes beyond what the devices hold, within the bound
  // replay's bar holds at.
  const size_t depth = ahead ? std::max(ks.depth, std::min(ks.depth + ahead, kMaxSearchInFlight)) : ks.depth;
  // The pool is dry here: what is in flight is in the key's open units.
  const uint64_t in_flight = passes.open_screen_configs;
  if (!ks.ready && ProposalNow(in_flight, ks.proposed - std::min(ks.proposed, in_flight), depth, batch) == 0)
    return false;
  if (!ks.ready) {
    if (ks.started < 0) ks.started = now;
    const bool out_of_time = ks.budget_seconds > 0 && now - ks.started >= ks.budget_seconds;
    const size_t want = out_of_time ? 0 : batch;
    const OpSpec* spec = nullptr;
    for (const OpSpec& s : sweep.specs)
      if (s.name == pool.op) spec = &s;
    // What the proposal reads, by value: it may run on another thread.
    std::function<std::vector<Measurement>()> rows;
    if (key_rows_ && spec)
      rows = [fn = key_rows_, device = models_.at(model), spec = *spec, dtype = pool.dtype, shape = pool.shape] {
        return fn(device, spec, dtype, shape);
      };
    auto search = pool.search;
    auto compiled = sweep.proposed_by_kernel[KernelKey(model, pool)];
    ProposeWork work = [search, rows = std::move(rows), want, retry = sweep.submit.retry, id = sweep.id,
                        compiled]() -> std::function<void()> {
      std::shared_ptr<SearchBatch> out;
      try {
        out = std::make_shared<SearchBatch>(ProposeSearchBatch(*search, rows, want, retry, id,
                                                               compiled ? *compiled : std::vector<Config>{}));
      } catch (const std::exception& e) {  // the search ends, the coordinator goes on
        out = std::make_shared<SearchBatch>();
        out->warnings.push_back(std::string("the search stops: its proposal failed: ") + e.what());
      }
      return [search, out] {
        search->ready = std::move(*out);
        search->proposing = false;
      };
    };
    ks.proposing = true;
    if (proposer_) proposer_(std::move(work));
    else work()();
    if (!ks.ready) return false;  // back on a later request
  }
  SearchBatch got = std::move(*ks.ready);
  ks.ready.reset();
  // What a run before a restart stored counts against the budget as done
  // (once, at the first proposal).
  if (!ks.resumed) {
    ks.resumed = true;
    const uint64_t done = std::min(got.stored, ks.budget() - ks.proposed);
    ks.proposed += done;
    passes.unsliced -= done;
    sweep.passes.model[model].unsliced -= done;
    sweep.pairs_done += done;
  }
  for (const std::string& w : got.warnings)
    if (search_warning_) search_warning_(sweep.id, model + " " + pool.op + "/" + pool.dtype + " " +
                                                       pool.shape.Canonical() + ": " + w);
  if (got.configs.size() > ks.budget() - ks.proposed) got.configs.resize(ks.budget() - ks.proposed);
  const bool out_of_time = ks.budget_seconds > 0 && now - ks.started >= ks.budget_seconds;
  if (out_of_time) got.configs.clear();
  ks.proposed += got.configs.size();
  if (!got.configs.empty()) {  // copied, not changed: a proposal running meanwhile holds the last one
    auto& kernel = sweep.proposed_by_kernel[KernelKey(model, pool)];
    auto more = std::make_shared<std::vector<Config>>(kernel ? *kernel : std::vector<Config>{});
    more->insert(more->end(), got.configs.begin(), got.configs.end());
    kernel = std::move(more);
  }
  if (got.configs.empty()) {
    // The search is over: what its budget did not spend leaves the counts.
    ks.ended = true;
    const uint64_t unspent = ks.budget() - ks.proposed;
    passes.unsliced -= unspent;
    sweep.passes.model[model].unsliced -= unspent;
    sweep.pairs_total -= unspent;
  }
  pool.configs = std::make_shared<const std::vector<Config>>(std::move(got.configs));
  pool.next = 0;
  // A search that ended with nothing in flight may be the sweep's last work:
  // its end is stamped with the caller's wall time.
  if (ks.ended) MaybeFinish(sweep, now_unix);
  return true;
}

size_t Scheduler::SearchDepth(const std::string& worker, const std::string& model, const Shape& shape,
                              size_t batch) const {
  if (opts_.search_in_flight > 0) return std::max<size_t>(opts_.search_in_flight, batch);
  // Enough for every device of the model to hold its units, each compiling
  // ahead of its timing, were this key the only one: the devices' pace is
  // in the unit size (configs a unit takes to last target_unit_seconds).
  auto live = live_devices_.find(model);
  const size_t devices = live == live_devices_.end() ? 1 : std::max<size_t>(live->second, 1);
  const size_t want = devices * kUnitsHeldPerDevice * UnitSizeFor(worker, shape);
  return std::clamp<size_t>(want, 2 * batch, std::max(kMaxSearchInFlight, 2 * batch));
}

}  // namespace tune
