#include "serve/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace tune {
namespace {

std::string SanitiseName(const std::string& name, bool allow_colon) {
  std::string out = name.empty() ? "_" : name;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || (allow_colon && c == ':');
    if (!ok) c = '_';
  }
  if (out[0] >= '0' && out[0] <= '9') out.insert(out.begin(), '_');
  return out;
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void WriteSample(std::string& out, const std::string& name, const MetricLabels& labels,
                 const std::pair<std::string, std::string>* extra, const std::string& value) {
  out += name;
  if (!labels.empty() || extra) {
    out += '{';
    bool first = true;
    auto add = [&](const std::pair<std::string, std::string>& l) {
      if (!first) out += ',';
      first = false;
      out += SanitiseName(l.first, false);
      out += "=\"";
      out += EscapeLabelValue(l.second);
      out += '"';
    };
    for (const auto& l : labels) add(l);
    if (extra) add(*extra);
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

const char* TypeName(Metric::Type t) {
  switch (t) {
    case Metric::Type::kCounter: return "counter";
    case Metric::Type::kHistogram: return "histogram";
    case Metric::Type::kGauge: break;
  }
  return "gauge";
}

}  // namespace

Metric Metric::Gauge(std::string name, std::string help, double value, MetricLabels labels) {
  Metric m;
  m.name = std::move(name);
  m.help = std::move(help);
  m.value = value;
  m.labels = std::move(labels);
  return m;
}

Metric Metric::Counter(std::string name, std::string help, double value, MetricLabels labels) {
  Metric m = Gauge(std::move(name), std::move(help), value, std::move(labels));
  m.type = Type::kCounter;
  return m;
}

Metric Metric::FromHistogram(std::string name, std::string help, Histogram h, MetricLabels labels) {
  Metric m = Gauge(std::move(name), std::move(help), 0, std::move(labels));
  m.type = Type::kHistogram;
  m.histogram = std::move(h);
  return m;
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

std::vector<double> Histogram::SecondsBounds() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};
}

void Histogram::Observe(double value) {
  if (!std::isfinite(value) || value < 0) return;
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[i]++;
  sum_ += value;
  count_++;
}

std::string RenderMetrics(const std::vector<Metric>& metrics) {
  // The format wants every sample of a family right after its TYPE line, so
  // samples are grouped by name, families in order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Metric*>> families;
  for (const auto& m : metrics) {
    const std::string name = SanitiseName(m.name, true);
    auto [it, inserted] = families.try_emplace(name);
    if (inserted) order.push_back(name);
    it->second.push_back(&m);
  }
  std::string out;
  for (const auto& name : order) {
    const auto& samples = families[name];
    const Metric& first = *samples.front();
    if (!first.help.empty()) out += "# HELP " + name + " " + EscapeHelp(first.help) + "\n";
    out += "# TYPE " + name + " " + TypeName(first.type) + "\n";
    for (const Metric* m : samples) {
      if (first.type != Metric::Type::kHistogram) {
        WriteSample(out, name, m->labels, nullptr, FormatValue(m->value));
        continue;
      }
      const Histogram& h = m->histogram;
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= h.bounds().size(); ++i) {
        cumulative += h.counts()[i];
        const std::pair<std::string, std::string> le{
            "le", i < h.bounds().size() ? FormatValue(h.bounds()[i]) : "+Inf"};
        WriteSample(out, name + "_bucket", m->labels, &le, std::to_string(cumulative));
      }
      WriteSample(out, name + "_sum", m->labels, nullptr, FormatValue(m->histogram.sum()));
      WriteSample(out, name + "_count", m->labels, nullptr, std::to_string(m->histogram.count()));
    }
  }
  return out;
}

}  // namespace tune
