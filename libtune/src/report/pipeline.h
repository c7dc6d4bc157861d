// A sweep's pipeline figures (codec/protocol.h PipelineFigures) as `status`
// prints them and as `status --format json` and the dashboard give them:
// one home for their names and for what "busy" means.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "codec/protocol.h"

namespace tune {

// Of the time its devices held its units (first config taken to last row
// sent), the fraction they spent checking and timing: the rest they waited
// for compiles or sent rows. 0 before any unit reported.
double DevicesBusy(const PipelineFigures& f);

// {units, compiled, fetched, cached, compile_seconds, device_wait_seconds,
//  measure_seconds, unit_seconds, devices_busy}, plus in_flight and
// in_flight_depth (a sweep's searched keys' configs, summed).
nlohmann::ordered_json PipelineJson(const PipelineFigures& f, uint64_t in_flight, uint64_t in_flight_depth);

// "devices busy 45% of 120.3 s on its 12 units (waited 30.1 s for compiles);
// configs 40 compiled (96.2 s), 12 fetched, 3 cached; in flight 48/64", or
// "" when no unit reported and nothing is in flight.
std::string PipelineLine(const PipelineFigures& f, uint64_t in_flight, uint64_t in_flight_depth);

}  // namespace tune
