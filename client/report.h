// Printers for people and scripts: tables, CSV, JSON. Measurement code never
// prints; these never measure.
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "opspec/op_definition.h"
#include "protocol/protocol.h"
#include "report/row_table.h"
#include "store/result_reader.h"
#include "base/types.h"

namespace tune {

// The profiles the store keeps of `rows` (ResultStore::GetProfile), by
// ProfileKey.
std::map<std::string, KernelProfile> ProfilesOf(ResultReader& store, const std::vector<Measurement>& rows);
std::string ProfileKey(const Measurement& m);
// "memory-bound: memory 92%, compute 15% of peak: ...; occupancy 87%,
// DRAM 134.2 MB in 45.1 us; stalls long_scoreboard 12.3, wait 2.1 (ncu 2025.3.1)".
std::string DescribeProfile(const KernelProfile& p);

// The coverage the store keeps of the keys of `rows` (ResultStore::
// GetCoverage), by CoverageKey.
std::map<std::string, KeyCoverage> CoverageOf(ResultReader& store, const std::vector<Measurement>& rows);
std::string CoverageKey(const Measurement& m);
// "searched: 300 of 3,156 legal configs by model/1 (budget 300)".
std::string DescribeCoverage(const KeyCoverage& c);

// The op's baseline timed on the keys of `rows` (ResultStore::GetBaseline),
// by BaselineKey (gpu_model, op, dtype, shape).
std::map<std::string, Measurement> BaselinesOf(ResultReader& store, const std::vector<Measurement>& rows);
std::string BaselineKey(const Measurement& m);
// VsBaseline of a row and its key's baseline row (0 when either has no
// valid figure).
double VsBaselineRow(const Measurement& m, const Measurement* baseline);

// What the store keeps beside the rows it prints.
struct RowNotes {
  std::map<std::string, KernelProfile> profiles;  // ProfilesOf
  std::map<std::string, KeyCoverage> coverage;    // CoverageOf
  std::map<std::string, Measurement> baselines;   // BaselinesOf: a line per key in tables, vs_baseline per row
  // Each key's winner as publish picks it (StableWinners: near-ties go to
  // the smallest config id), by WinnerKey: the row marked winner, so that
  // what a table stars is what the bundle ships.
  std::set<std::string> winners;
  // The op's default config (OpSpec::default_config of the newest package
  // in the store, as publish takes it) measured on each key of the rows,
  // by CoverageKey: a line "default X us, winner Y us = Z.ZZx" per key in
  // tables, "default_us" and "vs_default" on the winner in JSON and CSV.
  std::map<std::string, Measurement> defaults;
  // What picked the winners (Winners' objective): a table says so where it
  // is not time.
  Objective objective = Objective::kTime;
};
// The default's figure over the winner's (how much faster tuning made the
// key: > 1 when the winner beats the default); 0 when either has no valid
// figure.
double VsDefault(const Measurement& winner, const Measurement* def);
std::string WinnerKey(const Measurement& m);
// The group a row is ranked in and printed under: (gpu, op, dtype, shape),
// and hot apart from cold (L2Timing: rows timed hot never rank with cold).
std::string RowGroup(const Measurement& m);
// Orders one key's rows as its answers rank them: those `is_winner` names
// first, then the valid rows by Measurement::RanksAhead, then the rest.
void RankRows(std::vector<Measurement>* rows, const std::function<bool(const Measurement&)>& is_winner);
RowNotes NotesOf(ResultReader& store, const std::vector<Measurement>& rows, Objective objective = Objective::kTime);
// Keeps each key's `top` first rows as its answers rank them (RankRows:
// the winner `notes` names, then the fastest valid rows); 0 keeps every
// row. Returns how many rows it left out.
size_t KeepTopRows(std::vector<Measurement>* rows, uint32_t top, const RowNotes& notes);

// The rows as one report (RenderReport prints it in any RowFormat): for
// people, a section per (gpu, op, dtype, shape) with its notes (coverage,
// baseline, the default beside the winner, a near-tie) over its rows, sorted
// fastest first, the winner marked '*', a failure's class and why, a
// profile's bottleneck on a line under its row; for scripts, every row with
// those notes on it ("winner", nested "profile"/"coverage"/"baseline" in
// JSON, spread over flat columns in CSV).
RowReport MeasurementReport(std::vector<Measurement> rows, const std::map<std::string, OpSpec>& ops,
                            const RowNotes& notes = {});

// The bundle for people (its header, defaults, selectors, an entry per
// line) and its entries for scripts (CSV; JSON is the bundle's own
// document, BundleToJson).
RowReport BundleReport(const Bundle& b);

// A sweep's progress as `status --format json` writes it ("id", "state",
// counts, "failed_by_class", "waits", ...).
nlohmann::json ProgressJson(const SweepProgress& p);
// A status answer as `status --format json` writes it: "workers",
// "store_fault" and "sweeps" (each a ProgressJson).
nlohmann::json StatusJson(const SweepStatus& s);

}  // namespace tune
