#include "report/pipeline.h"

#include <algorithm>
#include <cstdio>

namespace tune {

double DevicesBusy(const PipelineFigures& f) {
  return f.unit_seconds > 0 ? std::clamp(f.measure_seconds / f.unit_seconds, 0.0, 1.0) : 0.0;
}

nlohmann::ordered_json PipelineJson(const PipelineFigures& f, uint64_t in_flight, uint64_t in_flight_depth) {
  return {{"units", f.units},
          {"compiled", f.compiled},
          {"fetched", f.fetched},
          {"cached", f.cached},
          {"compile_seconds", f.compile_seconds},
          {"device_wait_seconds", f.device_wait_seconds},
          {"measure_seconds", f.measure_seconds},
          {"unit_seconds", f.unit_seconds},
          {"devices_busy", DevicesBusy(f)},
          {"in_flight", in_flight},
          {"in_flight_depth", in_flight_depth}};
}

std::string PipelineLine(const PipelineFigures& f, uint64_t in_flight, uint64_t in_flight_depth) {
  std::string line;
  char buf[256];
  if (f.units > 0) {
    std::snprintf(buf, sizeof buf,
                  "devices busy %.0f%% of %.1f s on its %llu units (waited %.1f s for compiles); configs %llu "
                  "compiled (%.1f s), %llu fetched, %llu cached",
                  100 * DevicesBusy(f), f.unit_seconds, (unsigned long long)f.units, f.device_wait_seconds,
                  (unsigned long long)f.compiled, f.compile_seconds, (unsigned long long)f.fetched,
                  (unsigned long long)f.cached);
    line = buf;
  }
  if (in_flight_depth > 0) {
    std::snprintf(buf, sizeof buf, "%sin flight %llu of %llu configs", line.empty() ? "" : "; ",
                  (unsigned long long)in_flight, (unsigned long long)in_flight_depth);
    line += buf;
  }
  return line;
}

}  // namespace tune
