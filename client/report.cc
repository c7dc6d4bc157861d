#include "report.h"

#include "base/backend_kinds.h"
#include "report/compare.h"
#include "report/row_table.h"
#include "report/pipeline.h"

#include <set>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "publish/publish.h"
#include "base/text.h"

namespace tune {

std::string ProfileKey(const Measurement& m) {
  return m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape + '\0' + m.kernel_hash + '\0' + m.config_id;
}

std::map<std::string, KernelProfile> ProfilesOf(ResultReader& store, const std::vector<Measurement>& rows) {
  std::map<std::string, KernelProfile> out;
  for (const Measurement& m : rows) {
    if (!m.Valid()) continue;
    auto p = store.GetProfile(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash, m.config_id);
    if (p.ok()) out.emplace(ProfileKey(m), std::move(*p));
  }
  return out;
}

std::string DescribeProfile(const KernelProfile& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "; occupancy %.0f%%, DRAM %.1f MB in %.1f us", p.occupancy_pct, p.dram_bytes / 1e6,
                p.duration_us);
  std::string text = p.bottleneck + "-bound: " + p.why + buf;
  for (size_t i = 0; i < p.stalls.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%s %.1f", i ? ", " : "; stalls ", p.stalls[i].first.c_str(), p.stalls[i].second);
    text += buf;
  }
  return text + " (" + (p.tool == "sim" ? "SIMULATED" : p.tool) + ")";
}

std::string CoverageKey(const Measurement& m) {
  return m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape + '\0' + m.kernel_hash;
}

std::map<std::string, KeyCoverage> CoverageOf(ResultReader& store, const std::vector<Measurement>& rows) {
  std::map<std::string, KeyCoverage> out;
  std::set<std::string> asked;
  for (const Measurement& m : rows) {
    if (!asked.insert(CoverageKey(m)).second) continue;
    auto c = store.GetCoverage(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash);
    if (c.ok() && *c) out.emplace(CoverageKey(m), std::move(**c));
  }
  return out;
}

std::string DescribeCoverage(const KeyCoverage& c) {
  std::string text = std::string(CoverageStateName(c.state)) + ": " + std::to_string(c.evaluated) + " of " +
                     (c.legal_exact ? "" : "~") + std::to_string(c.legal) + " legal configs";
  if (!c.strategy.empty()) text += " by " + c.strategy;
  if (c.budget > 0) text += " (budget " + std::to_string(c.budget) + ")";
  return text;
}

std::string BaselineKey(const Measurement& m) { return m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape; }

std::map<std::string, Measurement> BaselinesOf(ResultReader& store, const std::vector<Measurement>& rows) {
  std::map<std::string, Measurement> out;
  std::set<std::string> asked;
  for (const Measurement& m : rows) {
    if (!asked.insert(BaselineKey(m)).second) continue;
    auto b = store.GetBaseline(m.gpu_model, m.op, m.dtype, m.shape);
    if (b.ok()) out.emplace(BaselineKey(m), std::move(*b));
  }
  return out;
}

double VsBaselineRow(const Measurement& m, const Measurement* baseline) {
  if (!baseline || !baseline->Valid() || !m.Valid()) return 0;
  return VsBaseline(baseline->median_us, m.median_us);
}

std::string WinnerKey(const Measurement& m) {
  return m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape + '\0' + m.kernel_hash + '\0' + m.config_id;
}

void RankRows(std::vector<Measurement>* rows, const std::function<bool(const Measurement&)>& is_winner) {
  std::stable_sort(rows->begin(), rows->end(), [&](const Measurement& a, const Measurement& b) {
    const bool wa = is_winner(a), wb = is_winner(b);
    if (wa != wb) return wa;
    if (a.Valid() != b.Valid()) return a.Valid();
    return a.Valid() && a.RanksAhead(b);
  });
}

RowNotes NotesOf(ResultReader& store, const std::vector<Measurement>& rows, Objective objective) {
  RowNotes notes{ProfilesOf(store, rows), CoverageOf(store, rows), BaselinesOf(store, rows), {}, {}, objective};
  std::set<std::string> keys;
  for (const Measurement& m : rows) {
    if (!keys.insert(m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape).second) continue;
    auto winners = Winners(store, ResultFilter{m.gpu_model, m.op, m.dtype, m.shape, ""}, {}, objective);
    if (winners.ok())
      for (const Measurement& w : *winners) notes.winners.insert(WinnerKey(w));
  }
  // Each key's default row, where the op's package is stored.
  std::map<std::string, OpSpec> ops;
  bool ops_read = false;
  for (const Measurement& m : rows) {
    if (notes.defaults.count(CoverageKey(m))) continue;
    if (!ops_read) {
      ops = OpsFromStore(store);
      ops_read = true;
    }
    auto spec = ops.find(m.op);
    if (spec == ops.end() || spec->second.default_config.params.empty()) continue;
    auto def = store.Get(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash, spec->second.default_config.Id());
    if (def) notes.defaults.emplace(CoverageKey(m), std::move(*def));
  }
  return notes;
}

double VsDefault(const Measurement& winner, const Measurement* def) {
  if (!def || !def->Valid() || !winner.Valid() || !(def->median_us > 0) || !(winner.median_us > 0)) return 0;
  return def->median_us / winner.median_us;
}

// "default 123.45 us, winner 100.00 us = 1.23x", or that the default has no
// figure.
std::string DescribeDefault(const Measurement& winner, const Measurement& def) {
  char buf[160];
  if (!def.Valid()) {
    std::snprintf(buf, sizeof buf, "default %s: %s", def.config.Canonical().c_str(), def.StatusName());
    return buf;
  }
  std::snprintf(buf, sizeof buf, "default %.2f us, winner %.2f us = %.2fx", def.median_us, winner.median_us,
                VsDefault(winner, &def));
  return buf;
}

// "vs cublaslt 13.0.0: 1.05x (123.45 us)", or why the baseline has no figure.
std::string DescribeBaseline(const Measurement& winner, const Measurement& b) {
  char buf[160];
  if (!b.Valid())
    return "vs " + b.baseline + ": not measured on " + b.worker + " (" + b.StatusName() + ": " + FirstLine(b.failure_message) + ")";
  const double ratio = VsBaselineRow(winner, &b);
  if (ratio > 0) std::snprintf(buf, sizeof buf, ": %.3fx (%.2f us)", ratio, b.median_us);
  else std::snprintf(buf, sizeof buf, ": %.2f us", b.median_us);
  return "vs " + b.baseline + buf + (IsSimulatedBackend(b.backend) ? " [SIMULATED]" : "");
}

std::string RowGroup(const Measurement& m) {
  std::string key = m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape;
  if (m.timing == L2Timing::kHot) key += std::string("\0hot", 4);
  return key;
}

namespace {

// A cell whose JSON value and shown text differ (a full reason beside its
// gist, a flag as true beside "1").
RowCell Cell(nlohmann::ordered_json value, std::string text) { return RowCell{std::move(value), std::move(text)}; }
RowCell FlagCell(bool on) { return Cell(on, on ? "1" : "0"); }

}  // namespace

RowReport MeasurementReport(std::vector<Measurement> rows, const std::map<std::string, OpSpec>& ops,
                            const RowNotes& notes) {
  auto coverage_of = [&notes](const Measurement& m) -> const KeyCoverage* {
    auto it = notes.coverage.find(CoverageKey(m));
    return it == notes.coverage.end() ? nullptr : &it->second;
  };
  auto profile_of = [&notes](const Measurement& m) -> const KernelProfile* {
    auto it = notes.profiles.find(ProfileKey(m));
    return it == notes.profiles.end() ? nullptr : &it->second;
  };
  auto baseline_of = [&notes](const Measurement& m) -> const Measurement* {
    auto it = notes.baselines.find(BaselineKey(m));
    return it == notes.baselines.end() ? nullptr : &it->second;
  };
  auto default_of = [&notes](const Measurement& m) -> const Measurement* {
    auto it = notes.defaults.find(CoverageKey(m));
    return it == notes.defaults.end() ? nullptr : &it->second;
  };
  auto group = RowGroup;
  // Rows that can win, as the store picks them (a NaN figure would also
  // break the order).
  auto ranked = [](const Measurement& m) { return m.Valid() && std::isfinite(m.median_us); };
  std::sort(rows.begin(), rows.end(), [&](const Measurement& a, const Measurement& b) {
    const auto ga = group(a), gb = group(b);
    if (ga != gb) return ga < gb;
    if (ranked(a) != ranked(b)) return ranked(a);
    if (ranked(a)) return a.RanksAhead(b);  // the store's order of winners
    return a.config.Canonical() < b.config.Canonical();
  });
  // The winner leads its key's rows: publish's pick where the notes have
  // it, else the fastest.
  std::vector<bool> winner(rows.size(), false);
  for (size_t first = 0, i = 0; i <= rows.size(); ++i) {
    if (i < rows.size() && group(rows[i]) == group(rows[first])) continue;
    const auto begin = rows.begin() + first, end = rows.begin() + i;
    const auto pick = std::find_if(begin, end, [&](const Measurement& m) { return notes.winners.count(WinnerKey(m)); });
    if (pick != end) std::rotate(begin, pick, pick + 1);
    if (first < rows.size()) winner[first] = ranked(rows[first]);
    first = i;
  }
  auto throughput = [&](const Measurement& m, std::string* unit) {
    auto it = ops.find(m.op);
    return Throughput(it == ops.end() ? nullptr : &it->second, m, unit);
  };

  RowReport report;
  // For scripts: every row, the key's notes on each (nested in JSON, spread
  // over flat columns in CSV).
  using S = RowShown;
  report.rows.columns = {{"gpu_model"}, {"op"}, {"dtype"}, {"shape"}, {"config"}, {"config_id"}, {"kernel_hash"},
                         {"status"}, {"check_passed", false, false, S::kJsonOnly},
                         {"unchecked", false, false, S::kJsonOnly}, {"checked_against", false, true}, {"median_us"}, {"stdev_us"}, {"ci95_us"},
                         {"samples"}, {"throughput", false, false, S::kNotJson}, {"unit", false, false, S::kNotJson},
                         {"throughput", false, true, S::kJsonOnly}, {"sm_clock_mhz"}, {"throttled"},
                         {"energy_uj", false, true}, {"power_w", false, true}, {"power_limit_w", false, true}, {"backend"},
                         {"timing"}, {"winner"}, {"reason", false, true}, {"confirmed"}, {"confirm_timing", false, true},
                         {"refined"}, {"screen_us", false, true}, {"bottleneck", false, false, S::kNotJson},
                         {"compute_pct", false, false, S::kNotJson}, {"memory_pct", false, false, S::kNotJson},
                         {"profile", false, true, S::kJsonOnly}, {"proposer", false, true}, {"coverage", false, true},
                         {"baseline", false, true}, {"baseline_us", false, false, S::kNotJson},
                         {"vs_baseline", false, true}, {"default_us", false, true}, {"vs_default", false, true}};
  RowSection* section = nullptr;
  bool section_energy = false;  // the section's table has the energy columns
  std::set<std::string> against_default;  // groups with a row checked against the default config
  std::map<std::string, double> power_limit;  // groups with energy figures: the limit they were taken under
  for (const Measurement& m : rows) {
    if (m.Valid() && m.against_default) against_default.insert(group(m));
    if (m.Valid() && m.energy_uj > 0) power_limit[group(m)] = m.power_limit_w;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& m = rows[i];
    std::string unit;
    const double tp = throughput(m, &unit);
    const KernelProfile* p = profile_of(m);
    const KeyCoverage* c = coverage_of(m);
    const Measurement* b = baseline_of(m);
    const double vs = VsBaselineRow(m, b);
    const Measurement* d = winner[i] ? default_of(m) : nullptr;
    const bool d_valid = d && d->Valid();
    const double vsd = d_valid ? VsDefault(m, d) : 0;
    const bool confirmed = m.pass == Measurement::Pass::kConfirm;
    nlohmann::ordered_json baseline, profile;
    if (b) {
      baseline = {{"library", b->baseline}, {"status", b->StatusName()}, {"median_us", b->median_us},
                  {"ci95_us", b->ci95_us}, {"backend", b->backend}};
      if (!b->Valid()) baseline["reason"] = FirstLine(b->failure_message);
    }
    if (p) {
      nlohmann::ordered_json stalls = nlohmann::ordered_json::array();
      for (const auto& [reason, cycles] : p->stalls) stalls.push_back({{"reason", reason}, {"cycles_per_issue", cycles}});
      profile = {{"bottleneck", p->bottleneck}, {"why", p->why}, {"compute_pct", p->compute_pct},
                 {"memory_pct", p->memory_pct}, {"occupancy_pct", p->occupancy_pct}, {"dram_bytes", p->dram_bytes},
                 {"duration_us", p->duration_us}, {"stalls", stalls}, {"tool", p->tool},
                 {"report_bytes", p->report.size()}};
    }
    report.rows.rows.push_back(
        {TextCell(m.gpu_model), TextCell(m.op), TextCell(m.dtype), TextCell(m.shape), TextCell(m.config.Canonical()),
         TextCell(m.config_id), TextCell(m.kernel_hash), TextCell(m.StatusName()), FlagCell(m.check_passed),
         FlagCell(m.unchecked), m.Valid() ? TextCell(m.CheckedAgainst()) : EmptyCell(), NumberCell(m.median_us, "%.3f"), NumberCell(m.stdev_us, "%.3f"),
         NumberCell(m.ci95_us, "%.3f"), IntegerCell(m.samples), NumberCell(tp, "%.3f"), TextCell(unit),
         tp > 0 ? Cell({{"value", tp}, {"unit", unit}}, "") : EmptyCell(), IntegerCell(m.sm_clock_mhz),
         FlagCell(m.throttled), FigureCell(m.energy_uj, "%.3f", m.energy_uj > 0),
         FigureCell(m.power_w, "%.1f", m.power_w > 0), FigureCell(m.power_limit_w, "%.0f", m.power_limit_w > 0),
         TextCell(m.backend), TextCell(L2TimingName(m.timing)), FlagCell(winner[i]),
         m.failure_message.empty() ? EmptyCell() : Cell(m.failure_message, WhyFailed(m.failure_message)),
         FlagCell(confirmed), confirmed ? TextCell(ConfirmTimingName(m.confirm_timing)) : EmptyCell(),
         FlagCell(m.pass == Measurement::Pass::kRefine),
         Cell(m.screen_us > 0 ? nlohmann::ordered_json(m.screen_us) : nullptr, Fmt("%.3f", m.screen_us)),
         TextCell(p ? p->bottleneck : ""), FigureCell(p ? p->compute_pct : 0, "%f", p != nullptr),
         FigureCell(p ? p->memory_pct : 0, "%f", p != nullptr), Cell(profile, ""),
         m.proposer.empty() ? EmptyCell() : TextCell(m.proposer),
         c ? Cell(CoverageJson(*c), CoverageStateName(c->state)) : EmptyCell(),
         b ? Cell(baseline, b->baseline) : EmptyCell(), FigureCell(b ? b->median_us : 0, "%.3f", b && b->Valid()),
         FigureCell(vs, "%.4f", vs > 0), FigureCell(d ? d->median_us : 0, "%.3f", d_valid),
         FigureCell(vsd, "%.4f", vsd > 0)});

    // For people: a section per key, its notes above its rows.
    if (i == 0 || group(m) != group(rows[i - 1])) {
      RowSection s;
      s.title = m.gpu_model + "  " + m.op + "/" + m.dtype + "  " + m.shape +
                (m.timing == L2Timing::kHot ? "  [hot L2]" : "") +
                (IsSimulatedBackend(m.backend) ? "  [SIMULATED - not a hardware result]" : "");
      if (c) s.notes.push_back(DescribeCoverage(*c));
      if (b) s.notes.push_back(DescribeBaseline(m, *b));
      if (d) s.notes.push_back(DescribeDefault(m, *d));
      if (against_default.count(group(m)))
        s.notes.push_back("checked against the default config's outputs (the op has no reference: [check] default)");
      if (notes.objective != Objective::kTime)
        s.notes.push_back(notes.objective == Objective::kEnergy
                              ? "* the winner by energy per call (objective energy) among rows with energy"
                              : "* the winner by energy x time (objective edp) among rows with energy");
      // A starred row below a faster one: the near-tie rule's pick, said so.
      else if (winner[i] && i + 1 < rows.size() && group(rows[i + 1]) == group(m) && ranked(rows[i + 1]) &&
               rows[i + 1].median_us < m.median_us)
        s.notes.push_back(Fmt("tie: * ties the fastest (%.2f us, %s) within %.0f%%: the smaller config id wins, as "
                              "publish ships it, so near-ties do not flip between runs",
                              rows[i + 1].median_us, rows[i + 1].config.Canonical().c_str(), 100 * kTieWithin));
      s.table.columns = {{""}, {"config"}, {"median_us", true}, {"ci95_%", true}, {"samples", true},
                         {"throughput", true}, {"status"}};
      const auto limit = power_limit.find(group(m));
      section_energy = limit != power_limit.end();
      if (section_energy) {
        s.table.columns.insert(s.table.columns.end() - 1, {{"energy_uj", true}, {"power_w", true}});
        if (limit->second > 0) s.notes.push_back(Fmt("energy under a power limit of %.0f W", limit->second));
      }
      report.sections.push_back(std::move(s));
      section = &report.sections.back();
    }
    const std::string star = winner[i] ? "*" : "";
    if (m.Valid()) {
      const std::string pass = confirmed ? std::string(", confirmed (") + ConfirmTimingName(m.confirm_timing) + ")"
                               : m.pass == Measurement::Pass::kRefine ? ", refined"
                                                                      : "";
      section->table.rows.push_back({TextCell(star), TextCell(m.config.Canonical()), NumberCell(m.median_us, "%.2f"),
                                     NumberCell(m.mean_us > 0 ? 100.0 * m.ci95_us / m.mean_us : 0.0, "%.2f"),
                                     IntegerCell(m.samples), TextCell(tp > 0 ? Fmt("%.1f %s", tp, unit.c_str()) : "-"),
                                     TextCell(m.StatusName() + pass)});
      if (section_energy) {
        auto& row = section->table.rows.back();
        row.insert(row.end() - 1, {m.energy_uj > 0 ? NumberCell(m.energy_uj, "%.2f") : TextCell("-"),
                                   m.power_w > 0 ? NumberCell(m.power_w, "%.0f") : TextCell("-")});
      }
      if (p) section->table.under[section->table.rows.size() - 1].push_back("profile: " + DescribeProfile(*p));
    } else {
      section->table.rows.push_back({TextCell(""), TextCell(m.config.Canonical()), TextCell("-"), TextCell("-"),
                                     TextCell("-"), TextCell("-"),
                                     TextCell(std::string(m.StatusName()) + ": " + WhyFailed(m.failure_message))});
      auto& row = section->table.rows.back();
      if (section_energy) row.insert(row.end() - 1, {TextCell("-"), TextCell("-")});
    }
  }
  return report;
}

size_t KeepTopRows(std::vector<Measurement>* rows, uint32_t top, const RowNotes& notes) {
  if (top == 0) return 0;
  std::map<std::string, std::vector<Measurement>> keys;
  for (Measurement& m : *rows) keys[RowGroup(m)].push_back(std::move(m));
  rows->clear();
  size_t left_out = 0;
  for (auto& [key, of] : keys) {
    RankRows(&of, [&](const Measurement& m) { return notes.winners.count(WinnerKey(m)) > 0; });
    left_out += of.size() > top ? of.size() - top : 0;
    of.resize(std::min<size_t>(of.size(), top));
    for (Measurement& m : of) rows->push_back(std::move(m));
  }
  return left_out;
}

nlohmann::json ProgressJson(const SweepProgress& p) {
  return {{"id", p.sweep_id},          {"name", p.name},
          {"state", p.state},          {"units_total", p.units_total},
          {"units_done", p.units_done}, {"pairs_total", p.pairs_total},
          {"pairs_done", p.pairs_done}, {"pairs_failed", p.pairs_failed},
          {"failed_by_class", p.failed_by_class}, {"gpu_models", p.gpu_models},
          {"error", ToValidUtf8(p.error)}, {"waiting_for", p.waiting_for},
          {"expanding", p.expanding},  {"waits", p.waits},
          {"skipped", p.skipped},      {"priority", p.priority},
          {"pipeline", PipelineJson(p.pipeline, p.in_flight, p.in_flight_depth)},
          {"started_unix", p.started_unix},
          {"finished_unix", p.finished_unix}};
}

nlohmann::json StatusJson(const SweepStatus& s) {
  nlohmann::json j = {{"workers", s.workers}, {"store_fault", s.store_fault}, {"sweeps", nlohmann::json::array()}};
  for (const auto& p : s.sweeps) j["sweeps"].push_back(ProgressJson(p));
  return j;
}

RowReport BundleReport(const Bundle& b) {
  RowReport report;
  auto& head = report.head;
  head.push_back(Fmt("bundle '%s' (format %u, tunefarm %s, %zu entries)", b.name.c_str(), b.format_version,
                     b.farm_version.c_str(), b.entries.size()));
  size_t kernel_bytes = 0;
  for (const KernelImage& k : b.kernels) kernel_bytes += k.image.size();
  head.push_back(Fmt("  %zu launch plans, %zu cubins (%.1f KiB)%s", b.launch_plans.size(), b.kernels.size(),
                     kernel_bytes / 1024.0, b.kernels.empty() ? ": config-only" : ""));
  for (const auto& [op, cfg] : b.defaults) head.push_back(Fmt("  default %-12s %s", op.c_str(), cfg.Canonical().c_str()));
  for (const BundleSelector& s : b.selectors)
    head.push_back(Fmt("  predicts %-11s %s on %s: %zu configs, %zu leaves", s.op.c_str(), s.dtype.c_str(),
                       s.gpu_model.c_str(), s.entries.size(), SelectorLeaves(s.nodes)));
  for (const ModelDefault& d : b.model_defaults)
    head.push_back(Fmt("  default %-12s %s on %s: %s", d.op.c_str(), d.dtype.c_str(), d.gpu_model.c_str(),
                       d.config.Canonical().c_str()));
  // Energy columns only where a winner has energy measured.
  const bool energy = std::any_of(b.entries.begin(), b.entries.end(), [](const BundleEntry& e) { return e.energy_uj > 0; });
  RowTable& table = report.sections.emplace_back().table;
  table.columns = {{"gpu_model"}, {"op"}, {"dtype"}, {"shape"}, {"config"}, {"median_us", true},
                   {"default_us/x", true}, {"vs_baseline", true}, {"backend"}, {"coverage"}, {"checked"}};
  report.rows.columns = {{"gpu_model"}, {"op"}, {"dtype"}, {"shape"}, {"config"}, {"config_id"}, {"kernel_hash"},
                         {"arch"}, {"median_us"}, {"default_us"}, {"samples"}, {"backend"}, {"checked_against"},
                         {"objective"}};
  if (energy) {
    table.columns.push_back({"energy_uj", true});
    for (const char* c : {"energy_uj", "power_w", "power_limit_w"}) report.rows.columns.push_back({c});
  }
  for (const auto& e : b.entries) {
    // The default's figure and what the winner gains on it: "123.45/1.23x".
    std::string def = "-", vs = "-";
    if (e.default_median_us > 0)
      def = e.median_us > 0 ? Fmt("%.2f/%.2fx", e.default_median_us, e.default_median_us / e.median_us)
                            : Fmt("%.2f", e.default_median_us);
    if (const double r = VsBaseline(e.baseline_median_us, e.median_us); r > 0) vs = Fmt("%.3fx", r);
    std::string coverage = e.coverage.state.empty() ? "-" : e.coverage.state;
    if (!e.coverage.state.empty())
      coverage += " " + std::to_string(e.coverage.evaluated) + "/" + std::to_string(e.coverage.legal);
    table.rows.push_back({TextCell(e.gpu_model), TextCell(e.op), TextCell(e.dtype), TextCell(e.shape.Canonical()),
                          TextCell(e.config.Canonical()), NumberCell(e.median_us, "%.2f"), TextCell(def),
                          TextCell(vs), TextCell(IsSimulatedBackend(e.backend) ? "sim (simulated)" : e.backend),
                          TextCell(coverage), TextCell(e.checked_against.empty() ? "-" : e.checked_against)});
    report.rows.rows.push_back({TextCell(e.gpu_model), TextCell(e.op), TextCell(e.dtype),
                                TextCell(e.shape.Canonical()), TextCell(e.config.Canonical()), TextCell(e.config_id),
                                TextCell(e.kernel_hash), TextCell(e.arch), NumberCell(e.median_us, "%.3f"),
                                NumberCell(e.default_median_us, "%.3f"), IntegerCell(e.samples), TextCell(e.backend),
                                TextCell(e.checked_against), TextCell(e.objective.empty() ? "time" : e.objective)});
    if (energy) {
      table.rows.back().push_back(e.energy_uj > 0 ? NumberCell(e.energy_uj, "%.2f") : TextCell("-"));
      for (double v : {e.energy_uj, e.power_w, e.power_limit_w}) report.rows.rows.back().push_back(NumberCell(v, "%.3f"));
    }
  }
  return report;
}

}  // namespace tune
