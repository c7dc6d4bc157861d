// The Prometheus text exposition the coordinator serves at /metrics: samples
// as plain structs, and their rendering.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tune {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// One Prometheus sample. Samples that share a name form one family; its HELP
// and TYPE lines are written once, from the first sample of the family.
struct Metric {
  enum class Type { kGauge, kCounter, kSummary };
  std::string name;  // characters outside [a-zA-Z0-9_:] become '_'
  std::string help;
  Type type = Type::kGauge;
  MetricLabels labels;  // names sanitised like `name`, values escaped on output
  double value = 0;     // gauge and counter
  // Summary only: written as name{quantile="q"} v, name_sum and name_count.
  std::vector<std::pair<double, double>> quantiles;  // (q in 0..1, value)
  double sum = 0;
  uint64_t count = 0;

  static Metric Gauge(std::string name, std::string help, double value, MetricLabels labels = {});
  // By convention a counter's name ends in "_total".
  static Metric Counter(std::string name, std::string help, double value,
                        MetricLabels labels = {});
  static Metric Summary(std::string name, std::string help,
                        std::vector<std::pair<double, double>> quantiles, double sum,
                        uint64_t count, MetricLabels labels = {});
};

// Prometheus text exposition format 0.0.4. Families keep the order of their
// first sample; NaN and infinities are written as NaN, +Inf, -Inf.
std::string RenderMetrics(const std::vector<Metric>& metrics);

}  // namespace tune
