// A sweep's pipeline figures (protocol/protocol.h PipelineFigures) as `status`
// prints them and as `status --format json` and the dashboard give them:
// one home for their names and for what "busy" means.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "protocol/protocol.h"

namespace tune {

// Of the time its devices held its units (first config taken to last row
// sent), the fraction they spent checking and timing: the rest they waited
// for compiles or sent rows. 0 before any unit reported.
double DevicesBusy(const PipelineFigures& f);

// Of the thread-seconds its compile pools had over the sweep's wall time
// (threads summed over its workers, first lease to last unit's end or now),
// the fraction spent compiling its configs: low while devices wait means
// too few configs are known ahead, high means too few cores. 0 before any
// unit reported its worker's threads.
double CompileBusy(const PipelineFigures& f);

// busy_seconds over wall_seconds x lanes, within [0, 1] (0 without either):
// the one rule behind both fractions, also `tune`'s over its workers' counters.
double BusyFraction(double busy_seconds, double wall_seconds, double lanes);

// {units, compiled, fetched, cached, compile_seconds, compile_threads,
//  device_wait_seconds, measure_seconds, unit_seconds, wall_seconds,
//  devices_busy, compile_busy}, plus in_flight and
// in_flight_depth (a sweep's searched keys' configs, summed).
nlohmann::ordered_json PipelineJson(const PipelineFigures& f, uint64_t in_flight, uint64_t in_flight_depth);

// "devices busy 45% of 120.3 s on its 12 units (waited 30.1 s for compiles);
// configs 40 compiled (96.2 s), 12 fetched, 3 cached; compile pool busy 80%
// of 16 threads over 140.0 s; in flight 48 of 64 configs", or
// "" when no unit reported and nothing is in flight.
std::string PipelineLine(const PipelineFigures& f, uint64_t in_flight, uint64_t in_flight_depth);

}  // namespace tune
