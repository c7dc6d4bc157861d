#include "base/profile.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace tune {
namespace {

// Rows of an RFC 4180 document (ncu quotes every field).
std::vector<std::vector<std::string>> CsvRows(const std::string& text, size_t max_rows) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false, in_field = false;
  for (size_t i = 0; i < text.size() && rows.size() <= max_rows; ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = in_field = true;
    } else if (c == ',') {
      rows.back().push_back(std::move(field));
      field.clear();
      in_field = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      rows.back().push_back(std::move(field));
      field.clear();
      in_field = false;
      rows.emplace_back();
    } else {
      field += c;
      in_field = true;
    }
  }
  if (in_field || !field.empty()) rows.back().push_back(std::move(field));
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

// A figure as ncu prints it ("1,234.5"); NaN when it is none ("n/a").
double Figure(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  if (s.empty()) return std::nan("");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return end && *end == '\0' ? v : std::nan("");
}

// The factor that takes a value in `unit` to the base unit of `base`
// ("byte/s" or "second"): SI prefixes, and ncu's short time units.
double Scale(const std::string& unit, const std::string& base) {
  static const std::map<std::string, double> kTime = {
      {"ns", 1e-9}, {"nsecond", 1e-9}, {"us", 1e-6}, {"usecond", 1e-6}, {"ms", 1e-3},
      {"msecond", 1e-3}, {"s", 1}, {"second", 1}};
  if (base == "second") {
    auto it = kTime.find(unit);
    return it == kTime.end() ? std::nan("") : it->second;
  }
  static const std::map<char, double> kPrefix = {{'K', 1e3}, {'k', 1e3}, {'M', 1e6}, {'G', 1e9}, {'T', 1e12}};
  if (unit == base) return 1;
  if (unit.size() == base.size() + 1 && unit.compare(1, std::string::npos, base) == 0) {
    auto it = kPrefix.find(unit[0]);
    if (it != kPrefix.end()) return it->second;
  }
  return std::nan("");
}

std::string Pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", v);
  return buf;
}

}  // namespace

void ClassifyBottleneck(KernelProfile* p) {
  const std::string figures = "memory " + Pct(p->memory_pct) + ", compute " + Pct(p->compute_pct) + " of peak";
  if (p->memory_pct >= kBoundPct && p->memory_pct >= p->compute_pct) {
    p->bottleneck = "memory";
    p->why = figures + ": memory is at >= " + Pct(kBoundPct) + " and ahead";
  } else if (p->compute_pct >= kBoundPct) {
    p->bottleneck = "compute";
    p->why = figures + ": compute is at >= " + Pct(kBoundPct) + " and ahead";
  } else {
    p->bottleneck = "latency";
    p->why = figures + ": neither reaches " + Pct(kBoundPct) + "; occupancy " + Pct(p->occupancy_pct) +
             (p->stalls.empty() ? std::string() : ", warps stall most on " + p->stalls.front().first);
  }
}

Result<KernelProfile> ParseNcuRawCsv(const std::string& csv) {
  const auto rows = CsvRows(csv, 3);
  if (rows.size() < 3) return Status::Error("ncu csv: expected a header, a units row and a launch, got " +
                                            std::to_string(rows.size()) + " row(s)");
  const auto& names = rows[0];
  const auto& units = rows[1];
  const auto& values = rows[2];
  auto column = [&](const std::string& name) -> long {
    auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() || size_t(it - names.begin()) >= values.size() ? -1 : long(it - names.begin());
  };
  KernelProfile p;
  struct Wanted {
    const char* metric;
    double* out;
  };
  const Wanted wanted[] = {
      {"sm__throughput.avg.pct_of_peak_sustained_elapsed", &p.compute_pct},
      {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", &p.memory_pct},
      {"sm__warps_active.avg.pct_of_peak_sustained_active", &p.occupancy_pct},
  };
  for (const auto& w : wanted) {
    const long c = column(w.metric);
    if (c < 0) return Status::Error(std::string("ncu csv: no metric ") + w.metric);
    *w.out = Figure(values[c]);
  }
  const long duration = column("gpu__time_duration.sum");
  if (duration < 0) return Status::Error("ncu csv: no metric gpu__time_duration.sum");
  const double seconds = Figure(values[duration]) * Scale(units[duration], "second");
  p.duration_us = seconds * 1e6;
  // DRAM bytes: the throughput over the launch's duration.
  const long dram = column("dram__bytes.sum.per_second");
  if (dram >= 0) p.dram_bytes = Figure(values[dram]) * Scale(units[dram], "byte/s") * seconds;
  static const std::string kStall = "smsp__average_warps_issue_stalled_", kPerIssue = "_per_issue_active.ratio";
  for (size_t c = 0; c < names.size() && c < values.size(); ++c) {
    const std::string& n = names[c];
    if (n.rfind(kStall, 0) != 0 || n.size() <= kStall.size() + kPerIssue.size() ||
        n.compare(n.size() - kPerIssue.size(), kPerIssue.size(), kPerIssue) != 0)
      continue;
    const std::string reason = n.substr(kStall.size(), n.size() - kStall.size() - kPerIssue.size());
    const double v = Figure(values[c]);
    // "selected" is the issuing warp itself, not a stall.
    if (reason != "selected" && std::isfinite(v) && v > 0) p.stalls.emplace_back(reason, v);
  }
  std::sort(p.stalls.begin(), p.stalls.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (p.stalls.size() > kTopStalls) p.stalls.resize(kTopStalls);
  for (double* v : {&p.compute_pct, &p.memory_pct, &p.occupancy_pct, &p.duration_us, &p.dram_bytes})
    if (!std::isfinite(*v)) *v = 0;
  ClassifyBottleneck(&p);
  return p;
}

Status CheckProfile(const KernelProfile& p) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::Error("profile " + field + ": " + why);
  };
  const std::pair<const char*, double> pcts[] = {
      {"compute_pct", p.compute_pct}, {"memory_pct", p.memory_pct}, {"occupancy_pct", p.occupancy_pct}};
  for (const auto& [name, v] : pcts)
    if (!std::isfinite(v) || v < 0 || v > 110) return bad(name, std::to_string(v) + " is no percentage");
  for (const auto& [name, v] : {std::pair<const char*, double>{"dram_bytes", p.dram_bytes}, {"duration_us", p.duration_us}})
    if (!std::isfinite(v) || v < 0 || v > 1e18) return bad(name, std::to_string(v) + " is out of range");
  if (p.bottleneck != "memory" && p.bottleneck != "compute" && p.bottleneck != "latency")
    return bad("bottleneck", "'" + p.bottleneck + "' is none of memory, compute, latency");
  if (p.stalls.size() > kTopStalls) return bad("stalls", "more than " + std::to_string(kTopStalls));
  for (const auto& [name, v] : p.stalls) {
    if (name.empty() || name.size() > 64 ||
        !std::all_of(name.begin(), name.end(), [](char c) { return std::islower(static_cast<unsigned char>(c)) || c == '_'; }))
      return bad("stalls", "'" + name + "' is no stall reason");
    if (!std::isfinite(v) || v < 0 || v > 1e9) return bad("stalls", std::to_string(v) + " is out of range");
  }
  if (p.report.size() > kMaxProfileReportBytes) return bad("report", "more than 16 MiB");
  // Printed to terminals: plain words only.
  if (p.tool.size() > 64 || !std::all_of(p.tool.begin(), p.tool.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == ' ' || c == '.' || c == '-' || c == '_';
      }))
    return bad("tool", "'" + p.tool.substr(0, 64) + "' is no tool name");
  if (p.why.size() > 512 || !std::all_of(p.why.begin(), p.why.end(), [](char c) {
        return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
      }))
    return bad("why", "is no line of text");
  return Status::OK();
}

}  // namespace tune
