// Publishing: from the store's measurements to a bundle for deployments.
#pragma once

#include <functional>

#include <map>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "opspec/op_definition.h"
#include "store/result_reader.h"

namespace tune {

// The op specs the store has seen (ResultStore::ForEachOp): the most
// recently submitted package of each op name. Unparseable ones are skipped.
std::map<std::string, OpSpec> OpsFromStore(ResultReader& store);

// The rows of `rows` that a bundle published now would draw on: per (GPU
// model, op, dtype, shape), those of the newest kernel hash, the hash of the
// key's most recent row (on a tie, the smaller hash). A changed kernel
// supersedes older results without deleting them. The one home of this rule:
// publish, compare and the CLI's tables all go through it. Order is kept.
std::vector<Measurement> NewestKernelOnly(std::vector<Measurement> rows);

// Winners that a rerun keeps. Each row of `best` (a key's fastest, as the
// store picks it) gives way to the row of its key and kernel, of the same
// rank (checked, pass: a confirmed figure is only tied with confirmed
// ones), that wins the tie rule among the configs within kTieWithin of its
// median: of those measured to a relative 95% CI of at most kTiePrecise
// (or with no CI), the smallest config id. So near-ties do not flip between
// runs or device counts; a config really faster (by more than kTieWithin)
// still wins. Overlapping CIs make no tie: on small kernels, CIs of 2-3%
// tied configs 3% apart, and each run published another of them. Keys
// whose rows cannot be read keep their row.
inline constexpr double kTiePrecise = 0.05;
// Rows a ranking takes part in (PublishOptions::rank); empty: every row.
using RankFilter = std::function<bool(const Measurement& row)>;
std::vector<Measurement> StableWinners(ResultReader& store, std::vector<Measurement> best, const RankFilter& rank = {});

// The one rule that names a key's winner, behind every answer the farm
// gives (best, results --best, compare, publish and so the bundle, the
// dashboard's /api/best, Python): per key matching `filter`, the store's
// fastest valid row of the newest kernel (NewestKernelOnly), given way to
// the near-tie rule's winner (StableWinners). With `rank`, only the rows it
// keeps take part (a key none of whose valid rows it keeps has no winner).
// Under another `objective` than time, each key's winner is then its row of
// least energy (or EDP) among those of that kernel and rank (checked, pass)
// with energy measured, near-ties within kTieWithin going to the smallest
// config id as above; a key with no energy figure keeps its time winner.
Result<std::vector<Measurement>> Winners(ResultReader& store, const ResultFilter& filter, const RankFilter& rank = {},
                                         Objective objective = Objective::kTime);

// Per (op, dtype, GPU model, shape) matching `filter`: the fastest valid
// config of the newest kernel hash, with the op's default config measured on
// the same key beside it (when the sweep measured it). The default is one of
// the candidates, so a bundle never ships a config slower than the default.
// Fails when nothing matches.
//
// With each (op, kernel hash) of the entries the bundle gets the op's launch
// plan (BundleLaunchPlan), compiled from the spec of that kernel hash and
// checked on every entry against the farm's own evaluation (PlanLaunch); an
// op whose launch cannot be expressed, or disagrees, ships without one. Per
// (op, dtype, GPU model) it gets a ModelDefault (bundle/bundle.h says which
// config). Unless `options.kernels` is false it carries the cubin of every
// entry and model default that has one in the store. `notes`, when given,
// receives a line for each such gap (no plan, cubins missing).
struct PublishOptions {
  bool kernels = true;
  // A cubin ships only when it is not one worker's word alone: two workers
  // or more sent it and none another image (KernelImage::Corroborated), or
  // `recompile` (when set) makes the same bytes of the config here. It
  // returns the cubin NVRTC makes of (spec, dtype, config, arch), or an
  // error when it cannot make the one of `kernel_hash` (another NVRTC
  // version, an op changed since). An image that another worker contradicts
  // never ships. Entries whose cubin does not ship are config-only, and
  // `notes` says how many and why.
  std::function<Result<std::string>(const OpSpec& spec, const std::string& dtype, const Config& config,
                                    const std::string& arch, const std::string& kernel_hash)>
      recompile;
  // > 0: an entry whose winner is slower than its [baseline] by more than
  // this ratio (baseline median / winner median below it) stays out, and
  // `notes` names it: a deployment then falls back (nearest shape, default)
  // or calls the vendor library itself. Entries without a baseline figure
  // stay.
  double min_vs_baseline = 0;
  // When set, only the keys whose winner it keeps ship (`publish --sweep`:
  // the keys one sweep measured, each with its winner over every row of
  // the key); the rest are left out before anything is planned, defaulted
  // or recompiled.
  std::function<bool(const Measurement& winner)> keep;
  // When set, only the rows it keeps rank for a key's winner (nightly on a
  // farm: a key measured again tonight ranks tonight's rows, so that a
  // config not timed again cannot win on an older night's figure).
  RankFilter rank;
  // What picks each key's winner (Winners).
  Objective objective = Objective::kTime;
};
Result<Bundle> BuildBundle(ResultReader& store, const ResultFilter& filter, const std::string& name,
                           const PublishOptions& options = {}, std::vector<std::string>* notes = nullptr);

// The launch plan of `spec` (its kernel at `kernel_hash`): programs over its
// params, dims and kLaunchDeviceVars. Errors name the field whose expression
// the launch language lacks.
Result<BundleLaunchPlan> MakeLaunchPlan(const OpSpec& spec, const std::string& kernel_hash);

// Throughput of a measurement for reports: TFLOP/s when the op counts flops
// and does at least 50 per byte, else GB/s; `unit` receives "TFLOP/s" or
// "GB/s". 0 when unknown.
double Throughput(const OpSpec* spec, const Measurement& m, std::string* unit);

}  // namespace tune
