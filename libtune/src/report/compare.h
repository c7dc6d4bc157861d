// Comparing GPU architectures on the same config space.
//
// Every GPU model of a sweep measures the whole space, so for each
// (op, dtype, shape) the store holds, per model, its fastest valid config and
// also how every other model's winner ran on it. CompareArchitectures
// gathers that; the printers below render it for terminals, scripts and
// browsers. Comparing never measures and printing never reads the store.
//
// Simulated models (backend "sim", names "sim-*") are carried through and
// labelled SIMULATED in every output: their figures come from the sim
// backend's cost model, never from hardware.
#pragma once

#include "report/row_table.h"

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/result_reader.h"
#include "tune/status.h"
#include "base/types.h"

namespace tune {

// The roofline of one GPU model.
struct PeakFigures {
  double tflops = 0;        // dense fp16/bf16 tensor-core peak, TFLOP/s
  double gbps = 0;          // device memory bandwidth, GB/s
  bool simulated = false;   // the sim backend's cost model, not a datasheet
  std::string source;       // where the figures come from, for people
};

// Peak figures of a store model name, from a small table of public datasheet
// figures (H100 SXM/PCIe/NVL, H200 SXM/NVL, A100 40/80 GB SXM/PCIe, L40S);
// "sim-<model>" names get the sim backend's figures (simulated = true).
// nullopt for a model the table does not know: its share of the roofline is
// then not reported rather than guessed.
std::optional<PeakFigures> PeakFiguresFor(const std::string& gpu_model);

// A key's coverage as reports, `best` and the dashboard print it in JSON:
// {"state", "legal", "legal_exact", "evaluated", "strategy", "budget", "seed"}.
nlohmann::json CoverageJson(const KeyCoverage& c);

struct CompareOptions {
  std::string op, dtype, shape;  // empty = any; shape in canonical form "M=4096,N=4096,K=4096"
  // Models to compare, in this order; the first is the reference the
  // speed-ups are relative to. Empty = every model with a valid result
  // matching the filter, sorted by name.
  std::vector<std::string> gpu_models;
};

struct ComparedModel {
  std::string gpu_model;
  std::string device_name;           // as reported by its winners' devices
  bool simulated = false;            // any row from the sim backend, or a "sim-" name
  std::optional<PeakFigures> peak;   // PeakFiguresFor(gpu_model)
};

// One model's winner on one (op, dtype, shape).
struct ModelWinner {
  bool present = false;        // false: this model has no valid result on the key
  Measurement best;            // the newest kernel hash's winner, by the tie rule (StableWinners)
  double throughput = 0;       // 0 = unknown (the op's spec is not in the store)
  std::string unit;            // "TFLOP/s" | "GB/s" | ""
  // throughput / the model's peak in the same unit; 0 = unknown. Hardware
  // compute peaks are fp16/bf16 tensor-core figures, so a TFLOP/s share is
  // given only for those dtypes (a sim model's peak applies to every dtype).
  double roofline_share = 0;
  // Reference model's median / this median (> 1: faster than the
  // reference); 0 when either is missing.
  double speedup = 0;
  // The winner's profile (a sweep's profile_top), when the store has one:
  // printers show its bottleneck class and the figures that decided it.
  std::optional<KernelProfile> profile;
  // What the farm measured of the key (nullopt: no record kept).
  std::optional<KeyCoverage> coverage;
  // The op's [baseline] on this model and key (ResultStore::GetBaseline),
  // and the baseline's median / the winner's (> 1: the winner is faster
  // than the vendor library); 0 when either has no figure.
  std::optional<Measurement> baseline;
  double vs_baseline = 0;
};

// Model `from`'s winner as measured on model `on` (same op, dtype, shape,
// and `on`'s winning kernel hash).
struct PortabilityCell {
  enum class State {
    kMeasured,     // `on` ran it and it passed its check
    kFailed,       // `on` ran it and it failed (failure says how)
    kNotMeasured,  // no row: the config is illegal on `on` (pruned) or was never run
    kNoWinner,     // `from` or `on` has no winner on this key
  };
  State state = State::kNoWinner;
  double median_us = 0;   // on `on`; kMeasured only
  // median_us / `on`'s own best median, >= 1: what running `from`'s choice
  // on `on` costs. 1 on the diagonal. kMeasured only.
  double slowdown = 0;
  FailureClass failure = FailureClass::kNone;  // kFailed only
  std::string failure_message;
};
const char* PortabilityStateName(PortabilityCell::State s);  // "measured", "failed", ...

struct ComparisonRow {
  std::string op, dtype, shape;
  std::vector<ModelWinner> winners;                        // Comparison::models order
  std::vector<std::vector<PortabilityCell>> portability;  // [from][on], models order
};

struct Comparison {
  std::vector<ComparedModel> models;  // models[0] is the reference
  std::vector<ComparisonRow> rows;    // by op, dtype, then shape dims numerically
  bool AnySimulated() const;
};

// Reads the best rows (and, for the portability matrix, the rows of each
// winner on every other model) of the keys matching `options`. Works on a
// store opened read-only. Fails when nothing matches, or when a requested
// model has no valid result matching the filter (the error lists the models
// that do).
Result<Comparison> CompareArchitectures(ResultReader& store, const CompareOptions& options);

// Printers. Each returns the whole document.
//
// The comparison as a report (RenderReport: table, markdown, CSV; JSON is
// ComparisonJson's document): what the two below print.
RowReport ComparisonReport(const Comparison& c);
// Table: per key, one line per model (winner config, median, throughput,
// roofline share, speed-up vs the reference), then the portability matrix.
std::string ComparisonTable(const Comparison& c);
// CSV, long form, one header line:
//   kind,op,dtype,shape,gpu_model,on_gpu_model,simulated,config,config_id,
//   kernel_hash,status,median_us,ci95_us,samples,throughput,unit,
//   roofline_share,speedup,slowdown,bottleneck
// kind "winner": one row per (key, model) with a winner; on_gpu_model empty.
// kind "portability": one row per (key, from, on) off the diagonal;
// gpu_model is `from`, config its winner, median_us and slowdown on `on`,
// status "ok", a failure class or "not_measured".
// simulated is "SIMULATED" when a model of the row is simulated, else empty.
// Unknown figures are empty fields.
std::string ComparisonCsv(const Comparison& c);
// JSON object: reference_model, models (with peaks), rows (winners and
// portability). Unknown figures are null.
std::string ComparisonJson(const Comparison& c);

// A self-contained HTML page (no network access needed): the tables above
// plus bar charts of speed-up and roofline share per key, drawn by Chart.js
// inlined from `chart_js_path` (empty: the first of DefaultChartJsPaths(),
// base/html.h, that exists), read when called. Without a readable Chart.js the page still
// renders every table and says that charts are unavailable.
std::string ComparisonHtml(const Comparison& c, const std::string& chart_js_path = "");

}  // namespace tune
