// Nsight Compute profiles of winners: the figures a sweep keeps beside a
// measurement (a sweep's profile_top), what they say the kernel is bound
// by, and how ncu's output is read.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tune/status.h"

namespace tune {

// What limits a kernel, from its profile (ClassifyBottleneck).
//   memory   its memory throughput is near its peak, and above its compute's;
//   compute  its SM throughput is near its peak, and above its memory's;
//   latency  neither is: warps wait (on memory latency, dependencies,
//            synchronisation; the top stall reasons say which), or the
//            grid is too small to fill the GPU.
inline constexpr double kBoundPct = 60;  // "near its peak", % of peak sustained

struct KernelProfile {
  // The measurement's key: (gpu_model, op, dtype, shape, kernel_hash, config_id).
  std::string gpu_model, op, dtype, shape, kernel_hash, config_id;
  double compute_pct = 0;    // SM throughput, % of peak (sm__throughput)
  double memory_pct = 0;     // memory throughput, % of peak (gpu__compute_memory_throughput)
  double occupancy_pct = 0;  // achieved occupancy, % of the SM's warps (sm__warps_active)
  double dram_bytes = 0;     // device memory bytes read and written
  double duration_us = 0;    // of the profiled launch (under the profiler's clocks)
  // The largest warp stall reasons, largest first, at most kTopStalls: name
  // ("long_scoreboard") and cycles per issued instruction.
  std::vector<std::pair<std::string, double>> stalls;
  std::string bottleneck;    // "memory" | "compute" | "latency" (ClassifyBottleneck)
  std::string why;           // the figures that decided it, for people
  std::string tool;          // "ncu 2025.3.1" | "sim" (the sim backend's cost model)
  std::string report;        // the profiler's report file (.ncu-rep); empty for sim
};
inline constexpr size_t kTopStalls = 3;
inline constexpr size_t kMaxProfileReportBytes = size_t(16) << 20;

// Sets p->bottleneck and p->why from its figures (the rule above).
void ClassifyBottleneck(KernelProfile* p);

// The figures of the first launch in `csv`, the output of
// `ncu --import R --csv --page raw` (a header row, a units row, a row per
// launch), classified. Errors name a missing metric.
Result<KernelProfile> ParseNcuRawCsv(const std::string& csv);

// OK when `p` may be stored: percentages in [0, 100] (occupancy and
// throughput may exceed 100 by rounding: up to 110), byte and time figures
// finite and >= 0, a known bottleneck class, at most kTopStalls stalls of
// plain names, a report of at most kMaxProfileReportBytes, a tool name of
// letters, digits, spaces and ".-_", a `why` of one line of printable text.
// Errors name the field.
Status CheckProfile(const KernelProfile& p);

}  // namespace tune
