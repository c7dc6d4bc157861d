// Replay: strategies run against a stored exhaustive sweep, with no GPU (in
// the spirit of Kernel Tuner's simulation mode). The key's every legal
// config has a figure (or a failure); a strategy proposes in batches, each
// proposal is answered from the table, and what counts is how many
// evaluations it took to come within 1%, 2% and 5% of the exhaustive best.
//
// A seed runs the key's search as the farm does: a KeySearch
// (search/key_search.h), the object the coordinator's scheduler drives too.
//
// Proposals in flight (ReplayOptions::in_flight above the batch) replay the
// farm's pipeline: the key proposes a batch whenever ProposalNow
// (search/strategy.h) leaves room for one, before the batches proposed
// earlier are measured. The farm is modelled thus: each proposed batch is a
// unit; `in_flight / batch` devices each measure one unit at a time, taking
// waiting units in proposal order; the unit that finishes next is drawn
// uniformly among those being measured by a generator seeded with the
// seed, so a seed and the options give one finishing order. A finished
// unit's configs count as evaluations in their proposal order (what the farm
// has measured by then: results are counted as they arrive, not as they were
// proposed), the strategy observes them, and is asked again. With in_flight
// 0 or equal to the batch this is lock-step: one unit at a time, each batch
// proposed once the one before is measured.
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/types.h"
#include "search/strategy.h"
#include "tune/status.h"

namespace tune {

// One exhaustively measured key: every legal config with its figure
// (nullopt: the config failed).
struct GroundTruth {
  std::string key;  // "gpu_model op/dtype shape", for tables
  std::string gpu_model, op, dtype;
  Shape shape;
  std::vector<Config> configs;
  std::vector<std::optional<double>> us;
};

struct ReplayOptions {
  SearchOptions search;       // strategy, budget (0: the whole space; capped at it); seeds from 0
  // Warm start (MakeStrategy): what neighbour keys measured, and this key's
  // features in the same terms.
  std::vector<PriorTrial> priors;
  std::vector<float> key_features;
  uint32_t seeds = 20;
  uint32_t batch = 16;        // configs proposed at a time, as a farm's unit
  // Configs proposed and not yet measured, at most (0, or the batch:
  // lock-step); at least the batch. See the model above.
  uint32_t in_flight = 0;
  std::vector<double> within = {0.01, 0.02, 0.05};
  // Turns true on SIGINT or SIGTERM (null: never): Replay returns an error
  // saying so before its next batch.
  const std::atomic<bool>* stop = nullptr;
  // Called after each seed with the seeds done (null: not called): a model
  // strategy's seed can take seconds, a key's many minutes.
  std::function<void(uint32_t seeds_done)> on_seed;
};

// Evaluations a strategy needed to come within each `within` of the best,
// over seeds. A seed ends once it came within every `within` (later
// evaluations change no figure). A seed that never came within (budget
// spent, or the strategy ran dry with nothing in flight) counts as unreached: `reached` says how many did; median and p90
// are over every seed, with an unreached one taken as infinite (reported as
// 0 and `median_reached` false then).
struct ReplayFigure {
  double within = 0;
  uint32_t reached = 0;
  uint64_t median = 0, p90 = 0;
  bool median_reached = false, p90_reached = false;
};
struct ReplayResult {
  std::string key, strategy;  // the strategy as named and as it calls itself
  uint64_t legal = 0, valid = 0;
  double best_us = 0;
  std::vector<ReplayFigure> figures;  // one per ReplayOptions::within
  std::vector<std::string> warnings;  // the strategy's, once each
};

// Errors: a key with no valid figure, a space the configs do not make, a
// strategy that cannot be made (KeySearch::Create's errors), an in_flight
// below the batch, a strategy that breaks its contract (KeySearch::Propose's
// errors), a stop.
Result<ReplayResult> Replay(const GroundTruth& truth, const ReplayOptions& options);

}  // namespace tune
