#include "report/nightly.h"
#include "base/backend_kinds.h"
#include "report/row_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/text.h"

namespace tune {
namespace {

std::string KeyOf(const BundleEntry& e) {
  return e.op + '\0' + e.dtype + '\0' + e.gpu_model + '\0' + e.shape.Canonical();
}

std::string KeyText(const BundleEntry& e) {
  return e.op + "/" + e.dtype + " " + e.gpu_model + " " + e.shape.Canonical();
}

bool Simulated(const BundleEntry& e) {
  return IsSimulatedBackend(e.backend) || e.gpu_model.rfind("sim-", 0) == 0;
}

Result<std::map<std::string, const BundleEntry*>> Index(const Bundle& b, const char* which) {
  std::map<std::string, const BundleEntry*> out;
  for (const auto& e : b.entries) {
    const std::string where = std::string(which) + " bundle '" + b.name + "', " + KeyText(e);
    if (!std::isfinite(e.median_us) || e.median_us <= 0) {
      return Status::Error("nightly: " + where + ": median " + std::to_string(e.median_us) +
                           " us is not a positive number");
    }
    if (!std::isfinite(e.ci95_us) || e.ci95_us < 0) {
      return Status::Error("nightly: " + where + ": ci95 " + std::to_string(e.ci95_us) +
                           " us is not a non-negative number");
    }
    if (!out.emplace(KeyOf(e), &e).second) return Status::Error("nightly: " + where + ": key appears twice");
  }
  return out;
}


std::string DateText(int64_t unix_time) {
  if (unix_time <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

nlohmann::json EntryJson(const BundleEntry& e) {
  return {{"config", e.config.Canonical()}, {"config_id", e.config_id},
          {"kernel_hash", e.kernel_hash},   {"median_us", e.median_us},
          {"ci95_us", e.ci95_us},           {"samples", e.samples},
          {"backend", e.backend}};
}

nlohmann::json KeyJson(const BundleEntry& e) {
  nlohmann::json j = {{"op", e.op}, {"dtype", e.dtype}, {"gpu_model", e.gpu_model},
                      {"shape", e.shape.Canonical()}, {"simulated", Simulated(e)}};
  return j;
}

}  // namespace

const char* NightlyVerdictName(NightlyEntry::Verdict v) {
  switch (v) {
    case NightlyEntry::Verdict::kUnchanged: return "unchanged";
    case NightlyEntry::Verdict::kRegression: return "regression";
    case NightlyEntry::Verdict::kImprovement: return "improvement";
  }
  return "unchanged";
}

Result<NightlyReport> CompareBundles(const Bundle& previous, const Bundle& current,
                                     double noise_floor_rel) {
  if (!std::isfinite(noise_floor_rel) || noise_floor_rel < 0) {
    return Status::Error("nightly: noise floor " + std::to_string(noise_floor_rel) +
                         " must be a non-negative fraction of the median");
  }
  auto prev = Index(previous, "previous");
  if (!prev.ok()) return prev.status();
  auto cur = Index(current, "current");
  if (!cur.ok()) return cur.status();

  NightlyReport r;
  r.previous_name = previous.name;
  r.current_name = current.name;
  r.previous_created_unix = previous.created_unix;
  r.current_created_unix = current.created_unix;
  r.noise_floor_rel = noise_floor_rel;
  for (const auto& [key, p] : *prev) {
    auto it = cur->find(key);
    if (it == cur->end()) {
      r.removed.push_back(*p);
      continue;
    }
    const BundleEntry* c = it->second;
    NightlyEntry e;
    e.op = p->op;
    e.dtype = p->dtype;
    e.gpu_model = p->gpu_model;
    e.shape = p->shape.Canonical();
    e.previous = *p;
    e.current = *c;
    e.winner_changed = p->config_id != c->config_id;
    e.kernel_changed = p->kernel_hash != c->kernel_hash;
    e.simulated = Simulated(*p) || Simulated(*c);
    e.delta_us = c->median_us - p->median_us;
    e.delta_rel = e.delta_us / p->median_us;
    e.noise_us = std::max(std::hypot(p->ci95_us, c->ci95_us), noise_floor_rel * p->median_us);
    if (e.delta_us > e.noise_us) {
      e.verdict = NightlyEntry::Verdict::kRegression;
      ++r.regressions;
    } else if (-e.delta_us > e.noise_us) {
      e.verdict = NightlyEntry::Verdict::kImprovement;
      ++r.improvements;
    }
    if (e.winner_changed) ++r.winners_changed;
    r.entries.push_back(std::move(e));
  }
  for (const auto& [key, c] : *cur) {
    if (!prev->count(key)) r.added.push_back(*c);
  }
  // The map walk left entries in key order; a stable sort keeps that order
  // within each verdict.
  auto rank = [](const NightlyEntry& e) {
    switch (e.verdict) {
      case NightlyEntry::Verdict::kRegression: return 0;
      case NightlyEntry::Verdict::kImprovement: return 1;
      case NightlyEntry::Verdict::kUnchanged: return 2;
    }
    return 2;
  };
  std::stable_sort(r.entries.begin(), r.entries.end(), [&](const NightlyEntry& a, const NightlyEntry& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (a.verdict == NightlyEntry::Verdict::kRegression) return a.delta_rel > b.delta_rel;
    if (a.verdict == NightlyEntry::Verdict::kImprovement) return a.delta_rel < b.delta_rel;
    return false;
  });
  return r;
}

namespace {

std::string KeyLabel(const std::string& op, const std::string& dtype, const std::string& gpu, const std::string& shape,
                    bool sim) {
  return op + "/" + dtype + " " + gpu + " " + shape + (sim ? " [SIMULATED]" : "");
}

// The keys in both bundles that `keep` selects, as people read them.
template <typename Keep>
RowTable ChangedRows(const NightlyReport& r, Keep&& keep) {
  RowTable t;
  t.columns = {{"key"}, {"previous_us", true}, {"current_us", true}, {"change", true}, {"noise", true}, {"winner"}};
  for (const NightlyEntry& e : r.entries) {
    if (!keep(e)) continue;
    std::string winner = e.winner_changed ? e.previous.config.Canonical() + " -> " + e.current.config.Canonical()
                                          : "same (" + e.current.config.Canonical() + ")";
    if (e.kernel_changed) winner += "; kernel changed";
    t.rows.push_back({TextCell(KeyLabel(e.op, e.dtype, e.gpu_model, e.shape, e.simulated)),
                      NumberCell(e.previous.median_us, "%.2f"), NumberCell(e.current.median_us, "%.2f"),
                      NumberCell(100 * e.delta_rel, "%+.1f%%"),
                      NumberCell(100 * e.noise_us / e.previous.median_us, "%.1f%%"), TextCell(winner)});
  }
  return t;
}

RowTable OneSidedRows(const std::vector<BundleEntry>& entries) {
  RowTable t;
  t.columns = {{"key"}, {"config"}, {"median_us", true}};
  for (const BundleEntry& e : entries)
    t.rows.push_back({TextCell(KeyLabel(e.op, e.dtype, e.gpu_model, e.shape.Canonical(), Simulated(e))),
                      TextCell(e.config.Canonical()), NumberCell(e.median_us, "%.2f")});
  return t;
}

// Every key: in both bundles (with its verdict), then added and removed.
RowTable AllRows(const NightlyReport& r) {
  RowTable t;
  for (const char* c : {"op", "dtype", "gpu_model", "shape", "verdict", "previous_us", "current_us", "delta_us",
                        "delta_rel", "noise_us", "winner_changed", "kernel_changed", "previous_config",
                        "current_config", "simulated"})
    t.columns.push_back({c});
  for (const NightlyEntry& e : r.entries) {
    t.rows.push_back({TextCell(e.op), TextCell(e.dtype), TextCell(e.gpu_model), TextCell(e.shape),
                      TextCell(NightlyVerdictName(e.verdict)), NumberCell(e.previous.median_us, "%.3f"),
                      NumberCell(e.current.median_us, "%.3f"), NumberCell(e.delta_us, "%.3f"),
                      NumberCell(e.delta_rel, "%.5f"), NumberCell(e.noise_us, "%.3f"), IntegerCell(e.winner_changed),
                      IntegerCell(e.kernel_changed), TextCell(e.previous.config.Canonical()),
                      TextCell(e.current.config.Canonical()), IntegerCell(e.simulated)});
  }
  for (const auto& [verdict, list] : {std::make_pair("added", &r.added), std::make_pair("removed", &r.removed)}) {
    const bool added = std::string(verdict) == "added";
    for (const BundleEntry& e : *list) {
      const RowCell median = NumberCell(e.median_us, "%.3f"), config = TextCell(e.config.Canonical());
      t.rows.push_back({TextCell(e.op), TextCell(e.dtype), TextCell(e.gpu_model), TextCell(e.shape.Canonical()),
                        TextCell(verdict), added ? EmptyCell() : median, added ? median : EmptyCell(), EmptyCell(),
                        EmptyCell(), EmptyCell(), EmptyCell(), EmptyCell(), added ? EmptyCell() : config,
                        added ? config : EmptyCell(), IntegerCell(Simulated(e))});
    }
  }
  return t;
}

// The summary and the sections, for text (`md` false: indented tables
// under titles) or markdown (headings over markdown tables), over every
// key's row for CSV and JSON.
RowReport NightlyRows(const NightlyReport& r, bool md) {
  RowReport report;
  const char* quote = md ? "`" : "'";
  const std::string gap = md ? "" : "  ";
  auto paragraph = [&](const std::string& line) {
    if (md) report.head.push_back("");
    report.head.push_back(gap + line);
  };
  const size_t unchanged = r.entries.size() - r.regressions - r.improvements;
  report.head.push_back(std::string(md ? "**nightly**: " : "nightly: ") + quote + r.previous_name + quote + " (" +
                        DateText(r.previous_created_unix) + ") -> " + quote + r.current_name + quote + " (" +
                        DateText(r.current_created_unix) + ")");
  paragraph(std::to_string(r.regressions) + " regression(s), " + std::to_string(r.improvements) +
            " improvement(s), " + std::to_string(unchanged) + " within noise, " + std::to_string(r.winners_changed) +
            " winner change(s), " + std::to_string(r.added.size()) + " added, " + std::to_string(r.removed.size()) +
            " removed; noise floor " + Fmt("%.1f%%", 100 * r.noise_floor_rel) + " of the median");
  bool any_sim = false;
  for (const auto& e : r.entries) any_sim = any_sim || e.simulated;
  for (const auto& e : r.added) any_sim = any_sim || Simulated(e);
  for (const auto& e : r.removed) any_sim = any_sim || Simulated(e);
  if (any_sim) paragraph("SIMULATED: keys marked [SIMULATED] come from the sim backend's cost model, not hardware.");
  auto section = [&](const std::string& title, RowTable rows) {
    if (!rows.rows.empty()) report.sections.push_back({title, {}, std::move(rows)});
  };
  using V = NightlyEntry::Verdict;
  section("REGRESSIONS", ChangedRows(r, [](const NightlyEntry& e) { return e.verdict == V::kRegression; }));
  section("improvements", ChangedRows(r, [](const NightlyEntry& e) { return e.verdict == V::kImprovement; }));
  section("winner changed, latency within noise",
          ChangedRows(r, [](const NightlyEntry& e) { return e.verdict == V::kUnchanged && e.winner_changed; }));
  section("added (only in the current bundle)", OneSidedRows(r.added));
  section("removed (only in the previous bundle)", OneSidedRows(r.removed));
  report.rows = AllRows(r);
  return report;
}

}  // namespace

std::string NightlyReportCsv(const NightlyReport& r) { return RenderReport(NightlyRows(r, false), RowFormat::kCsv); }

std::string NightlyReportTable(const NightlyReport& r) { return RenderReport(NightlyRows(r, false), RowFormat::kTable); }

std::string NightlyReportMarkdown(const NightlyReport& r) {
  return RenderReport(NightlyRows(r, true), RowFormat::kMarkdown);
}

std::string NightlyReportJson(const NightlyReport& r) {
  nlohmann::json j;
  j["previous"] = {{"name", r.previous_name}, {"created_unix", r.previous_created_unix}};
  j["current"] = {{"name", r.current_name}, {"created_unix", r.current_created_unix}};
  j["noise_floor_rel"] = r.noise_floor_rel;
  j["summary"] = {{"keys_compared", r.entries.size()}, {"regressions", r.regressions},
                  {"improvements", r.improvements}, {"winners_changed", r.winners_changed},
                  {"added", r.added.size()}, {"removed", r.removed.size()}};
  bool any_sim = false;
  j["entries"] = nlohmann::json::array();
  for (const auto& e : r.entries) {
    nlohmann::json ej = KeyJson(e.previous);
    ej["simulated"] = e.simulated;
    if (e.simulated) ej["label"] = "SIMULATED";
    ej["verdict"] = NightlyVerdictName(e.verdict);
    ej["winner_changed"] = e.winner_changed;
    ej["kernel_changed"] = e.kernel_changed;
    ej["delta_us"] = e.delta_us;
    ej["delta_rel"] = e.delta_rel;
    ej["noise_us"] = e.noise_us;
    ej["previous"] = EntryJson(e.previous);
    ej["current"] = EntryJson(e.current);
    any_sim = any_sim || e.simulated;
    j["entries"].push_back(std::move(ej));
  }
  for (const auto& [name, entries] :
       {std::pair<const char*, const std::vector<BundleEntry>*>{"added", &r.added}, {"removed", &r.removed}}) {
    j[name] = nlohmann::json::array();
    for (const auto& e : *entries) {
      nlohmann::json ej = KeyJson(e);
      if (Simulated(e)) ej["label"] = "SIMULATED";
      any_sim = any_sim || Simulated(e);
      ej["entry"] = EntryJson(e);
      j[name].push_back(std::move(ej));
    }
  }
  j["simulated"] = any_sim;
  return DumpJson(j, 2) + "\n";
}

}  // namespace tune
