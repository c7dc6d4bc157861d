// Sweep files: what a user (or the nightly job) submits.
//
//   [sweep]
//   name   = "nightly-gemm"
//   ops    = ["gemm"]
//   dtypes = ["f16"]
//   gpus   = ["*"]                      # every GPU model present, or a list
//   shapes = [ { M = 4096, N = 4096, K = 4096 } ]
//   configs_per_unit = 16               # optional
//   confirm_top = 4                     # optional: confirm phase, see SweepSubmit
//   confirm_seconds = 2.0               # optional, per shape (default 2)
//   confirm_timing = "auto"             # optional: or "burst", "sustained" (ConfirmTiming)
//   profile_top = 2                     # optional: profile the 2 fastest of each key (ncu)
//   priority = 80                       # optional: 0..100, higher leased first (default 50)
//   configs = [ { BM = 128, BN = 256, BK = 64 }, ... ]  # optional: measure just these
//   retime = true                       # optional: measure them again where stored (SweepSubmit::retime)
//   timing = "hot"                      # optional: "cold" or "hot" L2 for every op (ApplySweepTiming)
//   objective = "energy"                # optional: what searches and winners minimise: time (default) | energy | edp
//
// A shape applies to every op whose dims it names; each op needs at least one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/limits.h"
#include "opspec/op_definition.h"
#include "tune/status.h"
#include "base/types.h"
#include "search/strategy_table.h"

namespace tune {

// A sweep: what a client submits and the coordinator runs.
struct SweepSubmit {
  std::string name;
  std::vector<std::string> ops;
  std::vector<OpPackage> op_packages;  // one per op, same order
  std::vector<std::string> dtypes;
  std::vector<Shape> shapes;           // dims named as in the op specs
  std::vector<std::string> gpu_models; // "*" = every model present
  uint32_t configs_per_unit = 0;       // 0 = coordinator chooses
  // Confirm phase: once every config of a model is measured, the
  // confirm_top fastest of each (op, dtype, shape) are timed again together,
  // interleaved round-robin for confirm_seconds, so that they are ranked
  // under the same clock states and the winner's figure averages over them
  // rather than over one short stretch. 0 = none.
  uint32_t confirm_top = 0;
  double confirm_seconds = 0;
  // A message without the field (an older client) asks for kSustained, what
  // confirm phases did before; sweep files and `tune` default to kAuto.
  ConfirmTiming confirm_timing = ConfirmTiming::kSustained;
  // Refine pass: screening units time every config only to rank it; once
  // every config of an (op, dtype) is screened on a model, those within
  // TimingPolicy::refine_within of each shape's best are timed again as its
  // contenders (to the CI target, with the refine window). Which configs get
  // the expensive timing then depends on the final best alone, not on the
  // order the configs ran in or on how many devices ran them. A message
  // without the field (an older client) asks for one pass, where contenders
  // are judged against the best so far; sweep files and `tune` default to
  // the refine pass.
  bool refine_pass = false;
  // Profile phase: in each key's confirm unit, the profile_top fastest are
  // profiled with Nsight Compute where the worker has it (the sim backend's
  // profiles are simulated); their figures and bottleneck class are stored
  // beside the rows. Needs a confirm phase: a sweep file that names
  // profile_top alone gets confirm_top = profile_top. 0 = none.
  uint32_t profile_top = 0;
  // Search (search/strategy.h): which configs of each (GPU model, op,
  // dtype, shape) to measure, a name of the registry's table
  // (search/strategy_table.h). A message without the field (an older
  // client) asks for kStrategyForOldClients, what sweeps did before; sweep
  // files and `tune` default to kDefaultStrategy (auto: the whole space up
  // to kAutoExhaustiveUpTo legal configs, a search above). `budget`:
  // evaluations per key for a searching strategy (0: kDefaultSearchBudget);
  // `budget_seconds`: how long a key may keep asking for new configs (0: no
  // bound). Both bound searches only: a key measured whole measures its
  // whole space.
  std::string strategy = kStrategyForOldClients;
  uint64_t seed = 0;
  uint64_t budget = 0;
  double budget_seconds = 0;
  // Failure classes ("timeout", "crash", ...: FailureClassName) whose stored
  // rows are measured again: a stored failure of one of them counts as not
  // measured, and the new row of its key replaces it. Empty: a stored
  // failure is a result, never measured again.
  std::vector<std::string> retry;
  // Which running sweep's work is leased first (base/limits.h
  // kMinSweepPriority..kMaxSweepPriority, higher first): on each GPU model
  // the scheduler leases the units of the highest-priority sweep with work
  // for it (retries, refine and confirm units, fresh units, then tail
  // duplicates), and those of lower ones only when it has none; sweeps of
  // equal priority go in submission order. A message without the field (an
  // older client) has kDefaultSweepPriority.
  uint32_t priority = kDefaultSweepPriority;
  // An explicit config list (what a Triton user's `configs=[...]` is): the
  // sweep measures exactly these configs of its one op on every shape and
  // GPU model, instead of the op's space; its keys' strategy is "listed"
  // (each config once, as exhaustive over the list), and a searching
  // strategy does not apply. Each config names every param of the op with
  // a value from its [params] list, none twice (CheckListedSweep); one that
  // breaks a constraint of the op on a GPU model fails the sweep there,
  // naming its index. Empty: the op's space. A message without the field
  // (an older client) has none.
  std::vector<Config> configs;
  // A retime (what `tunefarm retime` and a farm's nightly submit): the
  // config list is measured again on every key even where the store has
  // rows of it, and each new row replaces its key's row of another sweep,
  // whatever pass took that one (within the retime, the usual pass rule).
  // So the store's figures, the winners and a bundle published after it
  // are tonight's. Needs a config list (CheckListedSweep). A message
  // without the field (an older client) is no retime.
  bool retime = false;
  // What its searches observe and its winners minimise (ObjectiveName):
  // "time", "energy" or "edp". Not time: every unit measures energy
  // (WorkUnit::energy_seconds, kSweepEnergySeconds unless the worker's own
  // window is longer). A message without the field (an older client) is
  // time.
  std::string objective = "time";
};
// The energy window of a sweep whose objective needs energy.
inline constexpr double kSweepEnergySeconds = 0.2;
// The strategies' names, as sweep files, `tune` and scripts use them: the
// registry's table (search/strategy_table.h) in its order, then auto.
const std::vector<std::string>& StrategyNames();
// OK when `name` is one of StrategyNames(); the error names `field` and the
// known names.
Status CheckStrategyName(const std::string& name, const std::string& field);
// OK when the submit's search fields are in range (a known strategy, a
// budget of at most kMaxSearchBudget, budget_seconds finite in [0, a week],
// a known objective);
// errors name the field, prefixed by `where`.
Status CheckSearchFields(const SweepSubmit& s, const std::string& where);
// OK when `priority` is in kMinSweepPriority..kMaxSweepPriority; the error
// names `field` (a file and key, a flag, a message's field), the value and
// the range.
Status CheckSweepPriority(int64_t priority, const std::string& field);
// OK when every name of `retry` is a failure class (not "skipped", which is
// a verdict, not a failure); the error names `field` and the classes.
Status CheckRetryClasses(const std::vector<std::string>& retry, const std::string& field);
// OK when `s`'s config list (SweepSubmit::configs; none is OK unless it is a
// retime, which re-measures chosen configs) fits it: one
// op, no searching strategy (auto and exhaustive measure the list whole),
// at most kMaxListedConfigs configs, each naming every param of the op and
// no other, with a value from the param's [params] list, and no config
// twice. Puts each config's params in the op's axis order. Errors are one
// line naming `field` and the config's index: "<field>[2]: no value for
// param 'BN'".
Status CheckListedSweep(SweepSubmit* s, const std::string& field);
inline constexpr size_t kMaxListedConfigs = 100'000;
inline constexpr uint64_t kMaxSearchBudget = 1'000'000;      // evaluations per key
inline constexpr uint64_t kDefaultSearchBudget = 300;        // evaluations per key
inline constexpr double kMaxBudgetSeconds = 7 * 24 * 3600.0;
inline constexpr uint32_t kMaxConfirmTop = 64;
inline constexpr ConfirmTiming kDefaultConfirmTiming = ConfirmTiming::kAuto;
inline constexpr double kDefaultConfirmSeconds = 2.0;  // where a sweep names confirm_top alone
// Reads `path` and the op folders it names from `ops_dir` (ops_dir/<op>/).
// Errors name the file and field.
Result<SweepSubmit> LoadSweepFile(const std::string& path, const std::string& ops_dir);

// Builds a submit from parts (used by `tunefarm tune --op ... --shape ...`).
// `shapes` are "M=4096,N=4096,K=4096" strings.
Result<SweepSubmit> MakeSweep(const std::string& name, const std::vector<std::string>& ops,
                              const std::vector<std::string>& dtypes,
                              const std::vector<std::string>& shapes,
                              const std::vector<std::string>& gpus, const std::string& ops_dir);

// A sweep's `timing` ("cold" | "hot", base/types.h L2Timing): set in each of
// its op packages (WithTiming), overriding the op's own; "" leaves each op
// its own. Errors name `field` and the value ("'warm' is not cold or hot").
Status ApplySweepTiming(SweepSubmit* s, const std::string& timing, const std::string& field);

// The shapes of `submit` that name exactly the dims of `spec`, reordered to
// the spec's dims order.
std::vector<Shape> ShapesForOp(const SweepSubmit& submit, const OpSpec& spec);

}  // namespace tune
