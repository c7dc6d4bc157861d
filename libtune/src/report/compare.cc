// Architecture comparisons (report/compare.h). Long on purpose: one
// comparison and its four renderings (table, CSV, JSON, HTML), which share
// its labels, number formats and the simulated-figure warnings.
#include "report/compare.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "base/backend_kinds.h"
#include "base/html.h"
#include "base/json_text.h"
#include "base/known_gpus.h"
#include "opspec/op_definition.h"
#include "publish/publish.h"
#include "base/text.h"

// The page's style and chart script (report/assets/), embedded at build time.
namespace tune::assets {
extern const char kCompareCss[], kCompareChartsJs[];
}  // namespace tune::assets

namespace tune {

nlohmann::json CoverageJson(const KeyCoverage& c) {
  return {{"state", CoverageStateName(c.state)}, {"legal", c.legal},       {"legal_exact", c.legal_exact},
          {"evaluated", c.evaluated},           {"strategy", c.strategy}, {"budget", c.budget},
          {"seed", c.seed}};
}
namespace {

// ---------------------------------------------------------------------------
// Peak figures.

struct KnownPeak {
  const char* family;    // the model name starts with this, then '-' or its end
  const char* variant;   // and contains this ("" = any)
  double tflops, gbps;
  const char* source;
};

// Public datasheet figures: dense (no sparsity) fp16/bf16 tensor-core peak
// with fp32 accumulation, and memory bandwidth. First match wins, so
// variants come before their family's catch-all.
constexpr KnownPeak kKnownPeaks[] = {
    {"h100", "nvl", 835, 3900, "NVIDIA H100 NVL datasheet"},
    {"h100", "pcie", 756, 2000, "NVIDIA H100 PCIe datasheet"},
    {"h100", "", 989, 3350, "NVIDIA H100 SXM datasheet"},
    {"h200", "nvl", 835, 4800, "NVIDIA H200 NVL datasheet"},
    {"h200", "", 989, 4800, "NVIDIA H200 SXM datasheet"},
    {"a100", "40gb", 312, 1555, "NVIDIA A100 40GB datasheet"},
    {"a100", "pcie", 312, 1935, "NVIDIA A100 80GB PCIe datasheet"},
    {"a100", "", 312, 2039, "NVIDIA A100 80GB SXM datasheet"},
    {"l40s", "", 362, 864, "NVIDIA L40S datasheet"},
};

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// ---------------------------------------------------------------------------
// Gathering.

bool IsSimulatedName(const std::string& gpu_model) { return StartsWith(gpu_model, "sim-"); }

struct KeyOrder {
  // Shapes compare by their dims' values when they name the same dims, so
  // M=1024 sorts before M=4096 and before M=16384.
  bool operator()(const std::tuple<std::string, std::string, std::string>& a,
                  const std::tuple<std::string, std::string, std::string>& b) const {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
    if (std::get<1>(a) != std::get<1>(b)) return std::get<1>(a) < std::get<1>(b);
    NamedValues da, db;
    if (ParseNamedValues(std::get<2>(a), &da) && ParseNamedValues(std::get<2>(b), &db) &&
        da.size() == db.size()) {
      bool same_names = true;
      for (size_t i = 0; i < da.size(); ++i) same_names = same_names && da[i].first == db[i].first;
      if (same_names) {
        for (size_t i = 0; i < da.size(); ++i) {
          if (da[i].second != db[i].second) return da[i].second < db[i].second;
        }
        return false;
      }
    }
    return std::get<2>(a) < std::get<2>(b);
  }
};

double RooflineShare(const std::optional<PeakFigures>& peak, const std::string& dtype,
                     double throughput, const std::string& unit) {
  if (!peak || throughput <= 0) return 0;
  if (unit == "GB/s" && peak->gbps > 0) return throughput / peak->gbps;
  // A datasheet's compute peak is the fp16/bf16 tensor-core figure: an f32
  // kernel measured against it would look worse than it is.
  if (unit == "TFLOP/s" && peak->tflops > 0 && (peak->simulated || dtype == "f16" || dtype == "bf16")) {
    return throughput / peak->tflops;
  }
  return 0;
}

std::string JoinNames(const std::vector<std::string>& names) {
  return names.empty() ? "none" : Join(names, ", ");
}

// ---------------------------------------------------------------------------
// Formatting helpers shared by the printers.

std::string ModelLabel(const ComparedModel& m) {
  return m.simulated ? m.gpu_model + " [SIMULATED]" : m.gpu_model;
}

std::string KeyLabel(const ComparisonRow& r) { return r.op + "/" + r.dtype + " " + r.shape; }

std::string FailureLabel(const PortabilityCell& cell) {
  return cell.failure == FailureClass::kNone ? "check_not_passed" : FailureClassName(cell.failure);
}

std::string ThroughputText(const ModelWinner& w) {
  return w.throughput > 0 ? Fmt("%.1f ", w.throughput) + w.unit : "-";
}

// "1.05x" (the winner over its [baseline]), "not measured" where the
// baseline failed on the host, "-" where the op has none.
std::string BaselineText(const ModelWinner& w) {
  if (!w.baseline) return "-";
  if (w.vs_baseline > 0) return Fmt("%.3fx", w.vs_baseline);
  return "not measured";
}

std::string ShareText(const ModelWinner& w) {
  return w.roofline_share > 0 ? Fmt("%.1f%%", 100 * w.roofline_share) : "-";
}

std::string CellText(const PortabilityCell& cell) {
  switch (cell.state) {
    case PortabilityCell::State::kMeasured: return Fmt("%.2fx", cell.slowdown);
    case PortabilityCell::State::kFailed: return "failed: " + FailureLabel(cell);
    case PortabilityCell::State::kNotMeasured: return "not measured";
    case PortabilityCell::State::kNoWinner: return "-";
  }
  return "-";
}

std::string PeakText(const ComparedModel& m) {
  if (!m.peak) return "peak unknown (no roofline share)";
  return Fmt("peak %.0f TFLOP/s", m.peak->tflops) + Fmt(", %.0f GB/s", m.peak->gbps) + " (" +
         m.peak->source + ")";
}

constexpr char kSimulatedNote[] =
    "SIMULATED: models marked [SIMULATED] ran on the sim backend's cost model; their figures "
    "are not hardware results.";



// JSON placed inside a <script> element: a '<' can only sit inside a JSON
// string, where \u003c means the same and cannot close the element.
std::string JsonForScript(const nlohmann::json& j) {
  const std::string text = DumpJson(j);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

nlohmann::json NumberOrNull(double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

std::optional<PeakFigures> PeakFiguresFor(const std::string& gpu_model) {
  if (IsSimulatedName(gpu_model)) {
    // The rates the sim backend's cost model reaches; a "sim-" model it does
    // not know runs as its generic GPU.
    const SimGpu& sim = FindSimGpu(std::string_view(gpu_model).substr(4));
    PeakFigures f;
    f.tflops = sim.tflops;
    f.gbps = sim.gbps;
    f.simulated = true;
    f.source = std::string("sim backend cost model '") + sim.model + "', SIMULATED";
    return f;
  }
  for (const auto& p : kKnownPeaks) {
    const std::string family = p.family;
    if (!StartsWith(gpu_model, family)) continue;
    if (gpu_model.size() > family.size() && gpu_model[family.size()] != '-') continue;
    if (gpu_model.find(p.variant) == std::string::npos) continue;
    PeakFigures f;
    f.tflops = p.tflops;
    f.gbps = p.gbps;
    f.source = p.source;
    return f;
  }
  return std::nullopt;
}

const char* PortabilityStateName(PortabilityCell::State s) {
  switch (s) {
    case PortabilityCell::State::kMeasured: return "measured";
    case PortabilityCell::State::kFailed: return "failed";
    case PortabilityCell::State::kNotMeasured: return "not_measured";
    case PortabilityCell::State::kNoWinner: return "no_winner";
  }
  return "no_winner";
}

bool Comparison::AnySimulated() const {
  for (const auto& m : models) {
    if (m.simulated) return true;
  }
  return false;
}

Result<Comparison> CompareArchitectures(ResultReader& store, const CompareOptions& options) {
  {
    std::set<std::string> seen;
    for (const auto& m : options.gpu_models) {
      if (m.empty()) return Status::Error("compare: empty GPU model name");
      if (!seen.insert(m).second) return Status::Error("compare: GPU model '" + m + "' listed twice");
    }
  }
  auto best_rows = [&](const std::string& gpu_model) {
    ResultFilter f;
    f.gpu_model = gpu_model;
    f.op = options.op;
    f.dtype = options.dtype;
    f.shape = options.shape;
    return Winners(store, f);
  };
  // Models listed explicitly: one prefix scan each. Otherwise the whole best
  // family, which holds one row per key and kernel hash, not per config.
  std::vector<Measurement> best;
  for (const auto& gpu : options.gpu_models.empty() ? std::vector<std::string>{""} : options.gpu_models) {
    auto rows = best_rows(gpu);
    if (!rows.ok()) return rows.status();
    for (auto& m : *rows) best.push_back(std::move(m));
  }

  // Winners as BuildBundle picks them: a comparison shows what a bundle
  // published now would ship.
  using Key = std::tuple<std::string, std::string, std::string>;  // op, dtype, shape
  std::map<std::string, std::map<Key, const Measurement*>> pick;  // gpu -> key -> winner
  for (const auto& m : best) pick[m.gpu_model].emplace(Key{m.op, m.dtype, m.shape}, &m);
  for (const auto& m : options.gpu_models) {
    if (pick.count(m)) continue;
    // Only the requested models were scanned; name every model that does
    // match, so that a misspelt model is easy to fix.
    std::set<std::string> have;
    if (auto all = best_rows(""); all.ok()) {
      for (const auto& b : *all) {
        if (b.Valid()) have.insert(b.gpu_model);
      }
    }
    return Status::Error("compare: GPU model '" + m +
                         "' has no valid measurement matching the filter (models that do: " +
                         JoinNames(std::vector<std::string>(have.begin(), have.end())) + ")");
  }
  if (pick.empty()) return Status::Error("compare: no valid measurement matches the filter");
  std::vector<std::string> model_names = options.gpu_models;
  if (model_names.empty()) {
    for (const auto& [gpu, keys] : pick) model_names.push_back(gpu);
  }

  Comparison c;
  for (const auto& name : model_names) {
    ComparedModel cm;
    cm.gpu_model = name;
    cm.simulated = IsSimulatedName(name);
    for (const auto& [key, m] : pick[name]) {
      cm.simulated = cm.simulated || IsSimulatedBackend(m->backend);
      if (cm.device_name.empty()) cm.device_name = m->device_name;
    }
    cm.peak = PeakFiguresFor(name);
    c.models.push_back(std::move(cm));
  }

  std::set<Key, KeyOrder> keys;
  for (const auto& name : model_names) {
    for (const auto& [key, m] : pick[name]) keys.insert(key);
  }
  const auto ops = OpsFromStore(store);
  const size_t n = model_names.size();
  for (const auto& key : keys) {
    ComparisonRow row;
    std::tie(row.op, row.dtype, row.shape) = key;
    auto spec_it = ops.find(row.op);
    const OpSpec* spec = spec_it == ops.end() ? nullptr : &spec_it->second;
    row.winners.resize(n);
    for (size_t i = 0; i < n; ++i) {
      auto& keys_of_model = pick[model_names[i]];
      auto it = keys_of_model.find(key);
      if (it == keys_of_model.end()) continue;
      ModelWinner& w = row.winners[i];
      w.present = true;
      w.best = *it->second;
      w.throughput = Throughput(spec, w.best, &w.unit);
      if (w.throughput <= 0) w.unit.clear();
      w.roofline_share = RooflineShare(c.models[i].peak, row.dtype, w.throughput, w.unit);
      auto profile = store.GetProfile(w.best.gpu_model, w.best.op, w.best.dtype, w.best.shape, w.best.kernel_hash,
                                      w.best.config_id);
      if (profile.ok()) {
        profile->report.clear();  // reports print figures, not the file
        w.profile = std::move(*profile);
      }
      if (auto cov = store.GetCoverage(w.best.gpu_model, w.best.op, w.best.dtype, w.best.shape, w.best.kernel_hash);
          cov.ok())
        w.coverage = *cov;
      if (auto b = store.GetBaseline(w.best.gpu_model, w.best.op, w.best.dtype, w.best.shape); b.ok()) {
        w.baseline = std::move(*b);
        if (w.baseline->Valid()) w.vs_baseline = VsBaseline(w.baseline->median_us, w.best.median_us);
      }
    }
    if (row.winners[0].present) {
      for (auto& w : row.winners) {
        if (w.present) w.speedup = row.winners[0].best.median_us / w.best.median_us;
      }
    }
    row.portability.assign(n, std::vector<PortabilityCell>(n));
    for (size_t from = 0; from < n; ++from) {
      for (size_t on = 0; on < n; ++on) {
        const ModelWinner& a = row.winners[from];
        const ModelWinner& b = row.winners[on];
        PortabilityCell& cell = row.portability[from][on];
        if (!a.present || !b.present) continue;  // kNoWinner
        std::optional<Measurement> there;
        if (from == on) {
          there = b.best;
        } else {
          // B's winning kernel hash: B may run another toolchain, and an
          // older hash of B's would compare a different kernel.
          there = store.Get(b.best.gpu_model, row.op, row.dtype, row.shape, b.best.kernel_hash,
                            a.best.config_id);
        }
        if (!there) {
          cell.state = PortabilityCell::State::kNotMeasured;
        } else if (!there->Valid()) {
          cell.state = PortabilityCell::State::kFailed;
          cell.failure = there->failure;
          cell.failure_message = there->failure_message;
        } else {
          cell.state = PortabilityCell::State::kMeasured;
          cell.median_us = there->median_us;
          cell.slowdown = there->median_us / b.best.median_us;
        }
      }
    }
    c.rows.push_back(std::move(row));
  }
  return c;
}

// ---------------------------------------------------------------------------
// Table.

RowReport ComparisonReport(const Comparison& c) {
  RowReport report;
  if (c.models.empty()) {
    report.head.push_back("no models to compare");
    return report;
  }
  report.head.push_back("Architecture comparison, reference " + ModelLabel(c.models[0]) +
                        " (speedup = its median / the model's median)");
  if (c.AnySimulated()) report.head.push_back(kSimulatedNote);
  RowTable& models = report.sections.emplace_back().table;
  models.columns = {{"gpu_model"}, {"device"}, {"peak"}};
  for (const auto& m : c.models)
    models.rows.push_back({TextCell(ModelLabel(m)), TextCell(m.device_name.empty() ? "-" : m.device_name),
                           TextCell(PeakText(m))});
  auto figure = [](double v, const char* format) { return FigureCell(v, format, v > 0); };
  report.rows.columns = {{"kind"}, {"op"}, {"dtype"}, {"shape"}, {"gpu_model"}, {"on_gpu_model"}, {"simulated"},
                         {"config"}, {"config_id"}, {"kernel_hash"}, {"status"}, {"median_us"}, {"ci95_us"},
                         {"samples"}, {"throughput"}, {"unit"}, {"roofline_share"}, {"speedup"}, {"slowdown"},
                         {"bottleneck"}, {"baseline"}, {"baseline_us"}, {"vs_baseline"}};
  for (const auto& row : c.rows) {
    RowSection& key = report.sections.emplace_back();
    key.title = KeyLabel(row);
    key.table.columns = {{"gpu_model"}, {"config"}, {"median_us", true}, {"ci95_us", true}, {"throughput", true},
                         {"roofline", true}, {"speedup", true}, {"vs_baseline", true}};
    for (size_t i = 0; i < c.models.size(); ++i) {
      const ModelWinner& w = row.winners[i];
      const std::string label = ModelLabel(c.models[i]) + (i == 0 ? " (ref)" : "");
      if (!w.present) {
        key.table.rows.push_back({TextCell(label), TextCell("no valid result")});
        continue;
      }
      key.table.rows.push_back({TextCell(label), TextCell(w.best.config.Canonical()),
                                NumberCell(w.best.median_us, "%.2f"), NumberCell(w.best.ci95_us, "%.2f"),
                                TextCell(ThroughputText(w)), TextCell(ShareText(w)),
                                TextCell(w.speedup > 0 ? Fmt("%.2fx", w.speedup) : "-"), TextCell(BaselineText(w))});
      if (w.profile)
        key.table.under[key.table.rows.size() - 1].push_back(w.profile->bottleneck + "-bound: " + w.profile->why);
      report.rows.rows.push_back(
          {TextCell("winner"), TextCell(row.op), TextCell(row.dtype), TextCell(row.shape),
           TextCell(c.models[i].gpu_model), EmptyCell(), TextCell(c.models[i].simulated ? "SIMULATED" : ""),
           TextCell(w.best.config.Canonical()), TextCell(w.best.config_id), TextCell(w.best.kernel_hash),
           TextCell("ok"), NumberCell(w.best.median_us, "%.3f"), NumberCell(w.best.ci95_us, "%.3f"),
           IntegerCell(w.best.samples), figure(w.throughput, "%.3f"), TextCell(w.unit),
           figure(w.roofline_share, "%.4f"), figure(w.speedup, "%.4f"), EmptyCell(),
           TextCell(w.profile ? w.profile->bottleneck : ""), TextCell(w.baseline ? w.baseline->baseline : ""),
           w.baseline && w.baseline->Valid() ? NumberCell(w.baseline->median_us, "%.3f") : EmptyCell(),
           figure(w.vs_baseline, "%.4f")});
    }
    for (size_t from = 0; from < c.models.size(); ++from) {
      for (size_t on = 0; on < c.models.size(); ++on) {
        const PortabilityCell& cell = row.portability[from][on];
        if (from == on || cell.state == PortabilityCell::State::kNoWinner) continue;
        std::string status = "ok";
        if (cell.state == PortabilityCell::State::kFailed) status = FailureLabel(cell);
        if (cell.state == PortabilityCell::State::kNotMeasured) status = "not_measured";
        const bool sim = c.models[from].simulated || c.models[on].simulated;
        const ModelWinner& a = row.winners[from];
        report.rows.rows.push_back(
            {TextCell("portability"), TextCell(row.op), TextCell(row.dtype), TextCell(row.shape),
             TextCell(c.models[from].gpu_model), TextCell(c.models[on].gpu_model), TextCell(sim ? "SIMULATED" : ""),
             TextCell(a.best.config.Canonical()), TextCell(a.best.config_id),
             TextCell(row.winners[on].best.kernel_hash), TextCell(status), figure(cell.median_us, "%.3f"),
             EmptyCell(), EmptyCell(), EmptyCell(), EmptyCell(), EmptyCell(), EmptyCell(),
             figure(cell.slowdown, "%.4f")});
      }
    }
    if (c.models.size() < 2) continue;
    RowSection& matrix = report.sections.emplace_back();
    matrix.notes.push_back("portability: slowdown of each row's winner on each column's GPU vs that GPU's own best");
    matrix.table.columns.push_back({"winner of \\ on"});
    for (const auto& m : c.models) matrix.table.columns.push_back({ModelLabel(m)});
    for (size_t from = 0; from < c.models.size(); ++from) {
      std::vector<RowCell> cells = {TextCell(ModelLabel(c.models[from]))};
      for (const auto& cell : row.portability[from]) cells.push_back(TextCell(CellText(cell)));
      matrix.table.rows.push_back(std::move(cells));
    }
  }
  return report;
}

std::string ComparisonTable(const Comparison& c) { return RenderReport(ComparisonReport(c), RowFormat::kTable); }

std::string ComparisonCsv(const Comparison& c) { return RenderReport(ComparisonReport(c), RowFormat::kCsv); }

// ---------------------------------------------------------------------------
// JSON.

namespace {

nlohmann::json ModelJson(const ComparedModel& m) {
  nlohmann::json j = {{"gpu_model", m.gpu_model}, {"device_name", m.device_name},
                      {"simulated", m.simulated}};
  if (m.simulated) j["label"] = "SIMULATED";
  if (m.peak) {
    j["peak"] = {{"tflops", m.peak->tflops}, {"gbps", m.peak->gbps},
                 {"simulated", m.peak->simulated}, {"source", m.peak->source}};
  } else {
    j["peak"] = nullptr;
  }
  return j;
}

nlohmann::json ComparisonToJsonValue(const Comparison& c) {
  nlohmann::json j;
  j["reference_model"] = c.models.empty() ? "" : c.models[0].gpu_model;
  j["simulated"] = c.AnySimulated();
  if (c.AnySimulated()) j["note"] = kSimulatedNote;
  j["models"] = nlohmann::json::array();
  for (const auto& m : c.models) j["models"].push_back(ModelJson(m));
  j["rows"] = nlohmann::json::array();
  for (const auto& row : c.rows) {
    nlohmann::json r = {{"op", row.op}, {"dtype", row.dtype}, {"shape", row.shape}};
    r["winners"] = nlohmann::json::array();
    for (size_t i = 0; i < c.models.size(); ++i) {
      const ModelWinner& w = row.winners[i];
      nlohmann::json wj = {{"gpu_model", c.models[i].gpu_model}, {"present", w.present},
                           {"simulated", c.models[i].simulated}};
      if (w.present) {
        wj["config"] = w.best.config.Canonical();
        wj["config_id"] = w.best.config_id;
        wj["kernel_hash"] = w.best.kernel_hash;
        wj["median_us"] = w.best.median_us;
        wj["ci95_us"] = w.best.ci95_us;
        wj["samples"] = w.best.samples;
        wj["backend"] = w.best.backend;
        if (w.coverage) wj["coverage"] = CoverageJson(*w.coverage);
        wj["throughput"] = w.throughput > 0 ? nlohmann::json{{"value", w.throughput}, {"unit", w.unit}}
                                            : nlohmann::json(nullptr);
        wj["roofline_share"] = NumberOrNull(w.roofline_share);
        wj["speedup"] = NumberOrNull(w.speedup);
        if (w.baseline) {
          wj["baseline"] = {{"library", w.baseline->baseline}, {"status", w.baseline->StatusName()},
                            {"median_us", w.baseline->median_us}};
          wj["vs_baseline"] = NumberOrNull(w.vs_baseline);
        }
        if (w.profile)
          wj["profile"] = {{"bottleneck", w.profile->bottleneck}, {"why", w.profile->why},
                           {"compute_pct", w.profile->compute_pct}, {"memory_pct", w.profile->memory_pct},
                           {"occupancy_pct", w.profile->occupancy_pct}, {"tool", w.profile->tool}};
      }
      r["winners"].push_back(std::move(wj));
    }
    r["portability"] = nlohmann::json::array();
    for (size_t from = 0; from < c.models.size(); ++from) {
      for (size_t on = 0; on < c.models.size(); ++on) {
        const PortabilityCell& cell = row.portability[from][on];
        nlohmann::json pj = {{"winner_of", c.models[from].gpu_model},
                             {"measured_on", c.models[on].gpu_model},
                             {"state", PortabilityStateName(cell.state)},
                             {"simulated", c.models[from].simulated || c.models[on].simulated}};
        if (cell.state == PortabilityCell::State::kMeasured) {
          pj["median_us"] = cell.median_us;
          pj["slowdown"] = cell.slowdown;
        }
        if (cell.state == PortabilityCell::State::kFailed) {
          pj["failure"] = FailureLabel(cell);
          pj["reason"] = cell.failure_message;
        }
        r["portability"].push_back(std::move(pj));
      }
    }
    j["rows"].push_back(std::move(r));
  }
  return j;
}

}  // namespace

std::string ComparisonJson(const Comparison& c) { return DumpJson(ComparisonToJsonValue(c), 2) + "\n"; }

// ---------------------------------------------------------------------------
// HTML.

namespace {



std::string PortabilityStyle(const PortabilityCell& cell) {
  if (cell.state == PortabilityCell::State::kMeasured) {
    // Green at 1x, red from 1.5x on.
    const double t = std::clamp((cell.slowdown - 1.0) / 0.5, 0.0, 1.0);
    return Fmt(" style=\"background: hsl(%.0f, 70%%, 85%%)\"", 120 * (1 - t));
  }
  if (cell.state == PortabilityCell::State::kFailed) return " style=\"background: #f4b6b6\"";
  return "";
}

}  // namespace

std::string ComparisonHtml(const Comparison& c, const std::string& chart_js_path) {
  std::string tried;
  const std::string chart_js =
      ReadFirstFile(chart_js_path.empty() ? DefaultChartJsPaths() : std::vector<std::string>{chart_js_path}, &tried);
  const std::string ref = c.models.empty() ? "" : c.models[0].gpu_model;
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<title>tunefarm architecture comparison" << (c.AnySimulated() ? " (SIMULATED)" : "")
      << "</title>\n<style>\n" << assets::kCompareCss << "</style>\n</head>\n<body>\n"
      << "<h1>Architecture comparison</h1>\n";
  if (c.AnySimulated()) out << "<p class=\"simulated\">" << HtmlEscape(kSimulatedNote) << "</p>\n";
  out << "<p>Reference model: <code>" << HtmlEscape(ref) << "</code>. Each model's winner is its "
      << "fastest valid config of the newest kernel hash; speed-up is the reference's median over "
      << "the model's (above 1: faster than the reference).</p>\n";

  out << "<h2>Models</h2>\n<table>\n<tr><th class=\"text\">gpu_model</th><th class=\"text\">device</th>"
      << "<th>peak TFLOP/s</th><th>peak GB/s</th><th class=\"text\">peak source</th></tr>\n";
  for (const auto& m : c.models) {
    out << "<tr><td class=\"text\">" << HtmlEscape(m.gpu_model)
        << (m.simulated ? " <span class=\"tag\">SIMULATED</span>" : "") << "</td><td class=\"text\">"
        << HtmlEscape(m.device_name) << "</td>";
    if (m.peak) {
      out << "<td>" << Fmt("%.0f", m.peak->tflops) << "</td><td>" << Fmt("%.0f", m.peak->gbps)
          << "</td><td class=\"text\">" << HtmlEscape(m.peak->source) << "</td>";
    } else {
      out << "<td>-</td><td>-</td><td class=\"text\">unknown model: no roofline share</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n";

  out << "<h2>Charts</h2>\n";
  if (chart_js.empty()) {
    out << "<p class=\"note\" id=\"tf-charts-unavailable\">Charts unavailable: Chart.js was not "
        << "found (looked in " << HtmlEscape(tried) << "; Debian package libjs-chart.js). Every "
        << "figure is in the tables below.</p>\n";
  } else {
    for (const char* id : {"tf-chart-speedup", "tf-chart-share", "tf-chart-median"}) {
      out << "<div class=\"chart\"><canvas id=\"" << id << "\"></canvas></div>\n";
    }
  }

  for (const auto& row : c.rows) {
    out << "<h2>" << HtmlEscape(row.op + "/" + row.dtype) << " <code>" << HtmlEscape(row.shape)
        << "</code></h2>\n<table>\n<tr><th class=\"text\">gpu_model</th><th class=\"text\">config</th>"
        << "<th>median us</th><th>ci95 us</th><th>samples</th><th>throughput</th><th>roofline</th>"
        << "<th>speed-up</th><th>vs baseline</th><th class=\"text\">bound by</th></tr>\n";
    for (size_t i = 0; i < c.models.size(); ++i) {
      const ModelWinner& w = row.winners[i];
      out << "<tr><td class=\"text\">" << HtmlEscape(c.models[i].gpu_model)
          << (c.models[i].simulated ? " <span class=\"tag\">SIMULATED</span>" : "")
          << (i == 0 ? " (ref)" : "") << "</td>";
      if (!w.present) {
        out << "<td class=\"text\" colspan=\"9\">no valid result</td></tr>\n";
        continue;
      }
      out << "<td class=\"text\">" << HtmlEscape(w.best.config.Canonical()) << "</td><td>"
          << Fmt("%.2f", w.best.median_us) << "</td><td>" << Fmt("%.2f", w.best.ci95_us) << "</td><td>"
          << w.best.samples << "</td><td>" << HtmlEscape(ThroughputText(w)) << "</td><td>"
          << ShareText(w) << "</td><td>" << (w.speedup > 0 ? Fmt("%.2fx", w.speedup) : "-") << "</td><td"
          << (w.baseline ? " title=\"" + HtmlEscape(w.baseline->baseline + (w.baseline->Valid() ? Fmt(": %.2f us", w.baseline->median_us) : ": " + FirstLine(w.baseline->failure_message))) + "\"" : std::string())
          << ">" << HtmlEscape(BaselineText(w)) << "</td><td class=\"text\">"
          << (w.profile ? "<span title=\"" + HtmlEscape(w.profile->why) + "\">" + HtmlEscape(w.profile->bottleneck) +
                              "</span> <small>" + HtmlEscape(w.profile->why) + "</small>"
                        : std::string("-"))
          << "</td></tr>\n";
    }
    out << "</table>\n";
    if (c.models.size() < 2) continue;
    out << "<p>Portability: each row's winner measured on each column's GPU, as a slowdown against "
        << "that GPU's own best.</p>\n<table>\n<tr><th class=\"text\">winner of \\ on</th>";
    for (const auto& m : c.models) {
      out << "<th class=\"text\">" << HtmlEscape(ModelLabel(m)) << "</th>";
    }
    out << "</tr>\n";
    for (size_t from = 0; from < c.models.size(); ++from) {
      out << "<tr><td class=\"text\">" << HtmlEscape(ModelLabel(c.models[from])) << "</td>";
      for (const auto& cell : row.portability[from]) {
        std::string text = CellText(cell);
        if (cell.state == PortabilityCell::State::kMeasured) text += Fmt(" (%.2f us)", cell.median_us);
        out << "<td" << PortabilityStyle(cell);
        if (cell.state == PortabilityCell::State::kFailed && !cell.failure_message.empty()) {
          out << " title=\"" << HtmlEscape(cell.failure_message) << "\"";
        }
        out << ">" << HtmlEscape(text) << "</td>";
      }
      out << "</tr>\n";
    }
    out << "</table>\n";
  }

  if (!chart_js.empty()) {
    nlohmann::json data;
    data["reference"] = ref;
    data["models"] = nlohmann::json::array();
    for (const auto& m : c.models) {
      data["models"].push_back({{"label", ModelLabel(m)}, {"simulated", m.simulated}});
    }
    data["rows"] = nlohmann::json::array();
    for (const auto& row : c.rows) {
      nlohmann::json r = {{"key", KeyLabel(row)}};
      for (const auto& w : row.winners) {
        r["speedup"].push_back(NumberOrNull(w.speedup));
        r["share"].push_back(NumberOrNull(w.roofline_share));
        r["median"].push_back(w.present ? nlohmann::json(w.best.median_us) : nlohmann::json(nullptr));
      }
      data["rows"].push_back(std::move(r));
    }
    out << "<script type=\"application/json\" id=\"tf-data\">" << JsonForScript(data) << "</script>\n"
        << "<script>\n" << EscapeInlineScript(chart_js) << "\n</script>\n"
        << "<script>\n" << EscapeInlineScript(assets::kCompareChartsJs) << "</script>\n";
  }
  out << "</body>\n</html>\n";
  return out.str();
}

}  // namespace tune
