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

bool ParseOutputFormat(const std::string& text, OutputFormat* out) {
  if (text == "table") *out = OutputFormat::kTable;
  else if (text == "csv") *out = OutputFormat::kCsv;
  else if (text == "json") *out = OutputFormat::kJson;
  else return false;
  return true;
}

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

RowNotes NotesOf(ResultReader& store, const std::vector<Measurement>& rows) {
  RowNotes notes{ProfilesOf(store, rows), CoverageOf(store, rows), BaselinesOf(store, rows), {}, {}};
  std::set<std::string> keys;
  for (const Measurement& m : rows) {
    if (!keys.insert(m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape).second) continue;
    auto winners = Winners(store, ResultFilter{m.gpu_model, m.op, m.dtype, m.shape, ""});
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

void PrintMeasurements(FILE* out, std::vector<Measurement> rows, const std::map<std::string, OpSpec>& ops,
                       OutputFormat format, const RowNotes& notes) {
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
  auto group = [](const Measurement& m) {
    return m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape;
  };
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

  if (format == OutputFormat::kJson) {
    nlohmann::json arr = nlohmann::json::array();
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& m = rows[i];
      std::string unit;
      const double tp = throughput(m, &unit);
      nlohmann::json j = {{"gpu_model", m.gpu_model}, {"op", m.op}, {"dtype", m.dtype},
                          {"shape", m.shape}, {"config", m.config.Canonical()},
                          {"config_id", m.config_id}, {"kernel_hash", m.kernel_hash},
                          {"status", m.StatusName()},
                          {"check_passed", m.check_passed}, {"unchecked", m.unchecked}, {"median_us", m.median_us},
                          {"stdev_us", m.stdev_us}, {"ci95_us", m.ci95_us},
                          {"samples", m.samples}, {"sm_clock_mhz", m.sm_clock_mhz},
                          {"throttled", m.throttled}, {"confirmed", m.pass == Measurement::Pass::kConfirm},
                          {"refined", m.pass == Measurement::Pass::kRefine},
                          {"backend", m.backend},
                          {"winner", static_cast<bool>(winner[i])}};
      if (m.pass == Measurement::Pass::kConfirm) j["confirm_timing"] = ConfirmTimingName(m.confirm_timing);
      if (m.screen_us > 0) j["screen_us"] = m.screen_us;
      if (!m.proposer.empty()) j["proposer"] = m.proposer;
      if (const KeyCoverage* c = coverage_of(m)) j["coverage"] = CoverageJson(*c);
      if (const Measurement* b = baseline_of(m)) {
        j["baseline"] = {{"library", b->baseline}, {"status", b->StatusName()}, {"median_us", b->median_us},
                         {"ci95_us", b->ci95_us}, {"backend", b->backend}};
        if (!b->Valid()) j["baseline"]["reason"] = FirstLine(b->failure_message);
        if (const double r = VsBaselineRow(m, b); r > 0) j["vs_baseline"] = r;
      }
      if (const Measurement* d = winner[i] ? default_of(m) : nullptr; d && d->Valid()) {
        j["default_us"] = d->median_us;
        if (const double r = VsDefault(m, d); r > 0) j["vs_default"] = r;
      }
      if (tp > 0) j["throughput"] = {{"value", tp}, {"unit", unit}};
      if (!m.failure_message.empty()) j["reason"] = m.failure_message;
      if (const KernelProfile* p = profile_of(m)) {
        nlohmann::json stalls = nlohmann::json::array();
        for (const auto& [reason, cycles] : p->stalls) stalls.push_back({{"reason", reason}, {"cycles_per_issue", cycles}});
        j["profile"] = {{"bottleneck", p->bottleneck}, {"why", p->why}, {"compute_pct", p->compute_pct},
                        {"memory_pct", p->memory_pct}, {"occupancy_pct", p->occupancy_pct},
                        {"dram_bytes", p->dram_bytes}, {"duration_us", p->duration_us}, {"stalls", stalls},
                        {"tool", p->tool}, {"report_bytes", p->report.size()}};
      }
      arr.push_back(std::move(j));
    }
    std::fprintf(out, "%s\n", DumpJson(arr, 2).c_str());
    return;
  }
  if (format == OutputFormat::kCsv) {
    RowTable table;
    for (const char* name : {"gpu_model", "op", "dtype", "shape", "config", "config_id", "kernel_hash", "status",
                             "median_us", "stdev_us", "ci95_us", "samples", "throughput", "unit", "sm_clock_mhz",
                             "throttled", "backend", "winner", "reason", "confirmed", "confirm_timing", "refined",
                             "screen_us", "bottleneck", "compute_pct", "memory_pct", "proposer", "coverage",
                             "baseline", "baseline_us", "vs_baseline", "default_us", "vs_default"})
      table.columns.push_back({name});
    // An absent figure is an empty cell.
    auto figure = [](double v, const char* fmt, bool present) { return present ? NumberCell(v, fmt) : EmptyCell(); };
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& m = rows[i];
      std::string unit;
      const double tp = throughput(m, &unit);
      const KernelProfile* p = profile_of(m);
      const KeyCoverage* c = coverage_of(m);
      const Measurement* b = baseline_of(m);
      const double vs = VsBaselineRow(m, b);
      const Measurement* d = winner[i] ? default_of(m) : nullptr;
      if (d && !d->Valid()) d = nullptr;
      const double vsd = d ? VsDefault(m, d) : 0;
      const bool confirmed = m.pass == Measurement::Pass::kConfirm;
      table.rows.push_back(
          {TextCell(m.gpu_model), TextCell(m.op), TextCell(m.dtype), TextCell(m.shape), TextCell(m.config.Canonical()),
           TextCell(m.config_id), TextCell(m.kernel_hash), TextCell(m.StatusName()), NumberCell(m.median_us, "%.3f"),
           NumberCell(m.stdev_us, "%.3f"), NumberCell(m.ci95_us, "%.3f"), IntegerCell(m.samples),
           NumberCell(tp, "%.3f"), TextCell(unit), IntegerCell(m.sm_clock_mhz), IntegerCell(m.throttled),
           TextCell(m.backend), IntegerCell(winner[i]), TextCell(WhyFailed(m.failure_message)), IntegerCell(confirmed),
           TextCell(confirmed ? ConfirmTimingName(m.confirm_timing) : ""),
           IntegerCell(m.pass == Measurement::Pass::kRefine), NumberCell(m.screen_us, "%.3f"),
           TextCell(p ? p->bottleneck : ""), p ? NumberCell(p->compute_pct, "%f") : EmptyCell(),
           p ? NumberCell(p->memory_pct, "%f") : EmptyCell(), TextCell(m.proposer),
           TextCell(c ? CoverageStateName(c->state) : ""), TextCell(b ? b->baseline : ""),
           figure(b ? b->median_us : 0, "%.3f", b && b->Valid()), figure(vs, "%.4f", vs > 0),
           figure(d ? d->median_us : 0, "%.3f", d != nullptr), figure(vsd, "%.4f", vsd > 0)});
    }
    std::fputs(RenderRows(table, RowFormat::kCsv).c_str(), out);
    return;
  }
  std::string last;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& m = rows[i];
    if (group(m) != last) {
      last = group(m);
      std::fprintf(out, "\n%s  %s/%s  %s%s\n", m.gpu_model.c_str(), m.op.c_str(), m.dtype.c_str(),
                   m.shape.c_str(), IsSimulatedBackend(m.backend) ? "  [SIMULATED - not a hardware result]" : "");
      if (const KeyCoverage* c = coverage_of(m)) std::fprintf(out, "  %s\n", DescribeCoverage(*c).c_str());
      if (const Measurement* b = baseline_of(m)) std::fprintf(out, "  %s\n", DescribeBaseline(m, *b).c_str());
      if (const Measurement* d = default_of(m); d && winner[i])
        std::fprintf(out, "  %s\n", DescribeDefault(m, *d).c_str());
      // A starred row below a faster one: the near-tie rule's pick, said so.
      if (winner[i] && i + 1 < rows.size() && group(rows[i + 1]) == last && ranked(rows[i + 1]) &&
          rows[i + 1].median_us < m.median_us)
        std::fprintf(out, "  tie: * ties the fastest (%.2f us, %s) within %.0f%%: the smaller config id wins, as "
                     "publish ships it, so near-ties do not flip between runs\n",
                     rows[i + 1].median_us, rows[i + 1].config.Canonical().c_str(), 100 * kTieWithin);
      std::fprintf(out, "  %-1s %-48s %12s %9s %7s %12s  %s\n", "", "config", "median_us",
                   "ci95_%", "samples", "throughput", "status");
    }
    std::string unit;
    const double tp = throughput(m, &unit);
    char tpbuf[32] = "-";
    if (tp > 0) std::snprintf(tpbuf, sizeof tpbuf, "%.1f %s", tp, unit.c_str());
    // A config wider than its column has a line of its own, the figures
    // below it in their columns: the table stays aligned.
    std::string config = m.config.Canonical();
    if (config.size() > 48) {
      std::fprintf(out, "  %-1s %s\n", winner[i] && m.Valid() ? "*" : "", config.c_str());
      config.clear();
    }
    if (m.Valid()) {
      std::fprintf(out, "  %-1s %-48s %12.2f %9.2f %7u %12s  %s%s\n", winner[i] && !config.empty() ? "*" : "",
                   config.c_str(), m.median_us,
                   m.mean_us > 0 ? 100.0 * m.ci95_us / m.mean_us : 0.0, m.samples, tpbuf, m.StatusName(),
                   m.pass == Measurement::Pass::kConfirm
                       ? (std::string(", confirmed (") + ConfirmTimingName(m.confirm_timing) + ")").c_str()
                   : m.pass == Measurement::Pass::kRefine ? ", refined"
                                                          : "");
      if (const KernelProfile* p = profile_of(m)) std::fprintf(out, "      profile: %s\n", DescribeProfile(*p).c_str());
    } else {
      std::fprintf(out, "  %-1s %-48s %12s %9s %7s %12s  %s: %s\n", "", config.c_str(),
                   "-", "-", "-", "-", m.StatusName(),
                   WhyFailed(m.failure_message).c_str());
    }
  }
}

size_t KeepTopRows(std::vector<Measurement>* rows, uint32_t top, const RowNotes& notes) {
  if (top == 0) return 0;
  std::map<std::string, std::vector<Measurement>> keys;
  for (Measurement& m : *rows) keys[m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape].push_back(std::move(m));
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

std::string MeasurementsText(std::vector<Measurement> rows, const std::map<std::string, OpSpec>& ops,
                             OutputFormat format, const RowNotes& notes) {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (!f) return "";
  PrintMeasurements(f, std::move(rows), ops, format, notes);
  std::fclose(f);
  std::string out(text, size);
  std::free(text);
  return out;
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

void PrintBundle(FILE* out, const Bundle& b) {
  std::fprintf(out, "bundle '%s' (format %u, tunefarm %s, %zu entries)\n", b.name.c_str(),
               b.format_version, b.farm_version.c_str(), b.entries.size());
  size_t kernel_bytes = 0;
  for (const KernelImage& k : b.kernels) kernel_bytes += k.image.size();
  std::fprintf(out, "  %zu launch plans, %zu cubins (%.1f KiB)%s\n", b.launch_plans.size(), b.kernels.size(),
               kernel_bytes / 1024.0, b.kernels.empty() ? ": config-only" : "");
  for (const auto& [op, cfg] : b.defaults) {
    std::fprintf(out, "  default %-12s %s\n", op.c_str(), cfg.Canonical().c_str());
  }
  for (const BundleSelector& s : b.selectors) {
    std::fprintf(out, "  predicts %-11s %s on %s: %zu configs, %zu leaves\n", s.op.c_str(), s.dtype.c_str(),
                 s.gpu_model.c_str(), s.entries.size(), SelectorLeaves(s.nodes));
  }
  for (const ModelDefault& d : b.model_defaults) {
    std::fprintf(out, "  default %-12s %s on %s: %s\n", d.op.c_str(), d.dtype.c_str(), d.gpu_model.c_str(),
                 d.config.Canonical().c_str());
  }
  // The entries through the row printer: a long config widens its column
  // instead of breaking the alignment.
  RowTable table;
  table.columns = {{"gpu_model"}, {"op"}, {"dtype"}, {"shape"}, {"config"}, {"median_us", true},
                   {"default_us/x", true}, {"vs_baseline", true}, {"backend"}, {"coverage"}};
  for (const auto& e : b.entries) {
    char def[48] = "-", vs[32] = "-";
    // The default's figure and what the winner gains on it: "123.45/1.23x".
    if (e.default_median_us > 0)
      std::snprintf(def, sizeof def, e.median_us > 0 ? "%.2f/%.2fx" : "%.2f", e.default_median_us,
                    e.median_us > 0 ? e.default_median_us / e.median_us : 0.0);
    if (const double r = VsBaseline(e.baseline_median_us, e.median_us); r > 0) std::snprintf(vs, sizeof vs, "%.3fx", r);
    std::string coverage = e.coverage.state.empty() ? "-" : e.coverage.state;
    if (!e.coverage.state.empty())
      coverage += " " + std::to_string(e.coverage.evaluated) + "/" + std::to_string(e.coverage.legal);
    table.rows.push_back({TextCell(e.gpu_model), TextCell(e.op), TextCell(e.dtype), TextCell(e.shape.Canonical()),
                          TextCell(e.config.Canonical()), NumberCell(e.median_us, "%.2f"), TextCell(def),
                          TextCell(vs), TextCell(IsSimulatedBackend(e.backend) ? "sim (simulated)" : e.backend),
                          TextCell(coverage)});
  }
  std::fputs(RenderRows(table, RowFormat::kTable, "  ").c_str(), out);
}

}  // namespace tune
