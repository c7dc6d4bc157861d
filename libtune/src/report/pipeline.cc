#include "report/pipeline.h"

#include <algorithm>
#include <cstdio>

namespace tune {

double BusyFraction(double busy_seconds, double wall_seconds, double lanes) {
  return wall_seconds > 0 && lanes > 0 ? std::clamp(busy_seconds / (wall_seconds * lanes), 0.0, 1.0) : 0.0;
}

double DevicesBusy(const PipelineFigures& f) { return BusyFraction(f.measure_seconds, f.unit_seconds, 1); }

double CompileBusy(const PipelineFigures& f) {
  return BusyFraction(f.compile_seconds, f.wall_seconds, f.compile_threads);
}

nlohmann::ordered_json PipelineJson(const PipelineFigures& f, uint64_t in_flight, uint64_t in_flight_depth) {
  return {{"units", f.units},
          {"compiled", f.compiled},
          {"fetched", f.fetched},
          {"cached", f.cached},
          {"compile_seconds", f.compile_seconds},
          {"compile_threads", f.compile_threads},
          {"device_wait_seconds", f.device_wait_seconds},
          {"measure_seconds", f.measure_seconds},
          {"unit_seconds", f.unit_seconds},
          {"wall_seconds", f.wall_seconds},
          {"devices_busy", DevicesBusy(f)},
          {"compile_busy", CompileBusy(f)},
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
    if (f.compile_threads > 0 && f.wall_seconds > 0) {
      std::snprintf(buf, sizeof buf, "; compile pool busy %.0f%% of %u thread(s) over %.1f s", 100 * CompileBusy(f),
                    f.compile_threads, f.wall_seconds);
      line += buf;
    }
  }
  if (in_flight_depth > 0) {
    std::snprintf(buf, sizeof buf, "%sin flight %llu of %llu configs", line.empty() ? "" : "; ",
                  (unsigned long long)in_flight, (unsigned long long)in_flight_depth);
    line += buf;
  }
  return line;
}

}  // namespace tune
