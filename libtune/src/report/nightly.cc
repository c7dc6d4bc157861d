#include "report/nightly.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/text.h"
#include <sstream>

namespace tune {
namespace {

std::string KeyOf(const BundleEntry& e) {
  return e.op + '\0' + e.dtype + '\0' + e.gpu_model + '\0' + e.shape.Canonical();
}

std::string KeyText(const BundleEntry& e) {
  return e.op + "/" + e.dtype + " " + e.gpu_model + " " + e.shape.Canonical();
}

bool Simulated(const BundleEntry& e) {
  return e.backend == "sim" || e.gpu_model.rfind("sim-", 0) == 0;
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

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
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

std::string NightlyReportCsv(const NightlyReport& r) {
  std::ostringstream out;
  out << "op,dtype,gpu_model,shape,verdict,previous_us,current_us,delta_us,delta_rel,noise_us,winner_changed,"
         "kernel_changed,previous_config,current_config,simulated\n";
  for (const NightlyEntry& e : r.entries) {
    out << CsvField(e.op) << ',' << CsvField(e.dtype) << ',' << CsvField(e.gpu_model) << ',' << CsvField(e.shape) << ','
        << NightlyVerdictName(e.verdict) << ',' << Fmt("%.3f", e.previous.median_us) << ','
        << Fmt("%.3f", e.current.median_us) << ',' << Fmt("%.3f", e.delta_us) << ',' << Fmt("%.5f", e.delta_rel) << ','
        << Fmt("%.3f", e.noise_us) << ',' << int(e.winner_changed) << ',' << int(e.kernel_changed) << ','
        << CsvField(e.previous.config.Canonical()) << ',' << CsvField(e.current.config.Canonical()) << ','
        << int(e.simulated) << '\n';
  }
  for (const auto& [verdict, list] : {std::make_pair("added", &r.added), std::make_pair("removed", &r.removed)}) {
    for (const BundleEntry& e : *list) {
      const bool added = std::string(verdict) == "added";
      out << CsvField(e.op) << ',' << CsvField(e.dtype) << ',' << CsvField(e.gpu_model) << ','
          << CsvField(e.shape.Canonical()) << ',' << verdict << ',' << (added ? "" : Fmt("%.3f", e.median_us)) << ','
          << (added ? Fmt("%.3f", e.median_us) : "") << ",,,,,," << (added ? "" : CsvField(e.config.Canonical())) << ','
          << (added ? CsvField(e.config.Canonical()) : "") << ',' << int(Simulated(e)) << '\n';
    }
  }
  return out.str();
}

std::string NightlyReportTable(const NightlyReport& r) {
  std::ostringstream out;
  size_t unchanged = r.entries.size() - r.regressions - r.improvements;
  out << "nightly: '" << r.previous_name << "' (" << DateText(r.previous_created_unix) << ") -> '"
      << r.current_name << "' (" << DateText(r.current_created_unix) << ")\n"
      << "  " << r.regressions << " regression(s), " << r.improvements << " improvement(s), "
      << unchanged << " within noise, " << r.winners_changed << " winner change(s), " << r.added.size()
      << " added, " << r.removed.size() << " removed; noise floor "
      << Fmt("%.1f%%", 100 * r.noise_floor_rel) << " of the median\n";
  bool any_sim = false;
  for (const auto& e : r.entries) any_sim = any_sim || e.simulated;
  for (const auto& e : r.added) any_sim = any_sim || Simulated(e);
  for (const auto& e : r.removed) any_sim = any_sim || Simulated(e);
  if (any_sim) {
    out << "  SIMULATED: keys marked [SIMULATED] come from the sim backend's cost model, not hardware.\n";
  }

  auto key_text = [](const std::string& op, const std::string& dtype, const std::string& gpu,
                     const std::string& shape, bool sim) {
    return op + "/" + dtype + " " + gpu + " " + shape + (sim ? " [SIMULATED]" : "");
  };
  auto section = [&](const char* title, auto&& keep) {
    std::vector<const NightlyEntry*> rows;
    for (const auto& e : r.entries) {
      if (keep(e)) rows.push_back(&e);
    }
    if (rows.empty()) return;
    size_t key_w = 3;
    for (const auto* e : rows) {
      key_w = std::max(key_w, key_text(e->op, e->dtype, e->gpu_model, e->shape, e->simulated).size());
    }
    out << "\n" << title << "\n";
    char line[2048];
    std::snprintf(line, sizeof line, "  %-*s %12s %12s %9s %9s  %s\n", static_cast<int>(key_w), "key",
                  "previous_us", "current_us", "change", "noise", "winner");
    out << line;
    for (const auto* e : rows) {
      std::string winner = e->winner_changed ? e->previous.config.Canonical() + " -> " +
                                                   e->current.config.Canonical()
                                             : "same (" + e->current.config.Canonical() + ")";
      if (e->kernel_changed) winner += "; kernel changed";
      std::snprintf(line, sizeof line, "  %-*s %12.2f %12.2f %9s %9s  %s\n", static_cast<int>(key_w),
                    key_text(e->op, e->dtype, e->gpu_model, e->shape, e->simulated).c_str(),
                    e->previous.median_us, e->current.median_us,
                    Fmt("%+.1f%%", 100 * e->delta_rel).c_str(),
                    Fmt("%.1f%%", 100 * e->noise_us / e->previous.median_us).c_str(), winner.c_str());
      out << line;
    }
  };
  section("REGRESSIONS", [](const NightlyEntry& e) { return e.verdict == NightlyEntry::Verdict::kRegression; });
  section("improvements", [](const NightlyEntry& e) { return e.verdict == NightlyEntry::Verdict::kImprovement; });
  section("winner changed, latency within noise", [](const NightlyEntry& e) {
    return e.verdict == NightlyEntry::Verdict::kUnchanged && e.winner_changed;
  });
  auto list = [&](const char* title, const std::vector<BundleEntry>& entries) {
    if (entries.empty()) return;
    out << "\n" << title << "\n";
    for (const auto& e : entries) {
      out << "  " << key_text(e.op, e.dtype, e.gpu_model, e.shape.Canonical(), Simulated(e)) << "  "
          << e.config.Canonical() << Fmt("  %.2f us\n", e.median_us);
    }
  };
  list("added (only in the current bundle)", r.added);
  list("removed (only in the previous bundle)", r.removed);
  return out.str();
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
