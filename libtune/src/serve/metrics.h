// The Prometheus text exposition the farm's processes serve at /metrics:
// samples as plain structs, latency histograms, and their rendering.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tune {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Observations counted into fixed buckets, as a Prometheus histogram keeps
// them. Not thread-safe: the owner guards it (and copies it out to render).
class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, ascending (a +Inf bucket is implied).
  explicit Histogram(std::vector<double> bounds = {});
  // Bounds for durations from milliseconds to an hour, in seconds.
  static std::vector<double> SecondsBounds();

  // A non-finite or negative value is dropped: a clock step must not poison
  // the sum.
  void Observe(double value);

  const std::vector<double>& bounds() const { return bounds_; }
  // counts()[i]: observations <= bounds()[i]; not cumulative.
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // one per bound, plus the +Inf bucket
  double sum_ = 0;
  uint64_t count_ = 0;
};

// One Prometheus sample. Samples that share a name form one family; its HELP
// and TYPE lines are written once, from the first sample of the family.
struct Metric {
  enum class Type { kGauge, kCounter, kHistogram };
  std::string name;  // characters outside [a-zA-Z0-9_:] become '_'
  std::string help;
  Type type = Type::kGauge;
  MetricLabels labels;  // names sanitised like `name`, values escaped on output
  double value = 0;     // gauge and counter
  Histogram histogram;  // histogram: name_bucket{le=..}, name_sum, name_count

  static Metric Gauge(std::string name, std::string help, double value, MetricLabels labels = {});
  // By convention a counter's name ends in "_total".
  static Metric Counter(std::string name, std::string help, double value,
                        MetricLabels labels = {});
  // By convention a histogram of durations is named ..._seconds.
  static Metric FromHistogram(std::string name, std::string help, Histogram h,
                          MetricLabels labels = {});
};

// Prometheus text exposition format 0.0.4. Families keep the order of their
// first sample; NaN and infinities are written as NaN, +Inf, -Inf.
std::string RenderMetrics(const std::vector<Metric>& metrics);

}  // namespace tune
