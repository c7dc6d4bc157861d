// Nightly regression check: last night's bundle against tonight's.
//
// Pure logic over two bundles (no store, no files, no clock), so the nightly
// job, tests and people inspecting two arbitrary bundles get the same
// verdict. The job that runs the sweep, publishes and keeps the history of
// bundles lives in the CLI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "tune/status.h"

namespace tune {

// One (op, dtype, GPU model, shape) present in both bundles.
struct NightlyEntry {
  enum class Verdict { kUnchanged, kRegression, kImprovement };

  std::string op, dtype, gpu_model, shape;  // shape canonical, "M=4096,N=4096,K=4096"
  BundleEntry previous, current;
  bool winner_changed = false;   // another config won (config ids differ)
  bool kernel_changed = false;   // the winner's kernel hash differs (source or toolchain)
  bool simulated = false;        // either side came from the sim backend
  double delta_us = 0;           // current median - previous median
  double delta_rel = 0;          // delta_us / previous median
  // What a change must exceed to count: the two ci95 half-widths combined
  // (sqrt of the sum of squares: independent errors of a difference), and
  // at least noise_floor_rel times the previous median.
  double noise_us = 0;
  Verdict verdict = Verdict::kUnchanged;
};
const char* NightlyVerdictName(NightlyEntry::Verdict v);  // "unchanged" | "regression" | "improvement"

struct NightlyReport {
  std::string previous_name, current_name;
  int64_t previous_created_unix = 0, current_created_unix = 0;
  double noise_floor_rel = 0;
  // Keys in both bundles, regressions first (largest relative slowdown
  // first), then improvements (largest speed-up first), then the rest in
  // (op, dtype, gpu_model, shape) order.
  std::vector<NightlyEntry> entries;
  std::vector<BundleEntry> added;     // only in the current bundle
  std::vector<BundleEntry> removed;   // only in the previous bundle
  size_t regressions = 0, improvements = 0, winners_changed = 0;

  bool HasRegressions() const { return regressions > 0; }
};

// Compares two bundles key by key. A key's current median is a regression
// when it exceeds the previous one by more than the entry's noise_us, an
// improvement when it is below by more than that. Fails when
// noise_floor_rel is negative or not finite, when a bundle holds a key twice,
// or when an entry's median is not a positive finite number; errors name the
// bundle and the key.
Result<NightlyReport> CompareBundles(const Bundle& previous, const Bundle& current,
                                     double noise_floor_rel = 0.02);

// Printers. Each returns the whole document.
// Table: a summary line, then regressions, improvements, winner changes
// within noise, added and removed keys; unchanged keys are counted, not
// listed. Simulated keys are labelled SIMULATED.
std::string NightlyReportTable(const NightlyReport& r);
// JSON object: previous, current, noise_floor_rel, summary counts, entries
// (every key in both), added, removed.
std::string NightlyReportJson(const NightlyReport& r);
// CSV: a header, then one row per key in both bundles (verdict, medians,
// change, noise, winner and kernel changes), then the added and removed keys
// (verdict "added" / "removed").
std::string NightlyReportCsv(const NightlyReport& r);
// Markdown: the table's summary and sections as headings over markdown
// tables, to paste into a pull request or an issue.
std::string NightlyReportMarkdown(const NightlyReport& r);

}  // namespace tune
