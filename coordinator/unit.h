// Unit: a piece of a sweep's work as the scheduler keeps it: configs of one
// op and dtype on one shape for one GPU model, its pass, and its leases.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "protocol/protocol.h"
#include "base/types.h"

namespace tune {

enum class UnitState { kPending, kLeased, kDone, kFailed };

// What a unit is for: the screening of its configs, the refine pass of the
// contenders near a shape's best, or the confirm phase of the fastest.
enum class UnitKind { kScreen, kRefine, kConfirm };

struct Unit {
  uint64_t id = 0;
  std::string sweep_id, op, dtype, gpu_model;
  std::vector<Config> configs;
  // The one shape its configs are timed on: a sweep screens shape by shape
  // (Scheduler::CreateUnits).
  Shape shape;
  std::string shape_key;  // shape.Canonical(), the key of its paces
  UnitKind kind = UnitKind::kScreen;
  // kConfirm: `configs` are the fastest of `shape`, timed again together
  // for this long (WorkUnit::confirm_seconds).
  double confirm_seconds = 0;
  // kRefine: `configs` came near this best screening figure of `shape`
  // (WorkUnit::refine_best_us).
  double refine_best_us = 0;
  // kScreen: the stored rows its configs may reuse (WorkUnit::reusable).
  std::vector<StoredDigest> reusable;
  UnitState state = UnitState::kPending;
  uint32_t attempts = 0;
  std::map<std::string, double> holders;  // worker -> lease deadline
  std::map<std::string, double> started;  // worker -> when its lease began
  double last_progress = 0;               // last (first) lease or results batch
  uint32_t batches_queued = 0;            // arrived, not yet ingested
  uint64_t pairs_counted = 0;             // of its pairs, those counted in its sweep's pairs_done
  uint64_t reused = 0;                    // of its configs, those a worker reused (NoteReused's first report)
  // Why its last lease ended without its results (a refused batch, an
  // expired lease, a worker gone): what the sweep says when its leases run out.
  std::string lost_lease;
  bool leases_ran_out = false;  // failed so: counted in its sweep's units_failed
  uint64_t lost_pairs = 0;      // counted as failed then
  size_t Pairs() const { return configs.size(); }
};

}  // namespace tune
