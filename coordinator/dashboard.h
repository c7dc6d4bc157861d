// The coordinator's dashboard: the page HttpServer serves at `/` and the JSON
// documents it polls at /api/NAME (serve/http_server.h).
//
// The JSON documents the dashboard reads (fields it does not know are
// ignored; a missing field reads as 0 / empty):
//   sweeps:  {"now_unix": 1700000000,
//             "sweeps": [{"id", "name", "state": "running|done|failed",
//                         "pairs_done", "pairs_total", "pairs_failed",
//                         "failed_by_class": {"compile_error": 3, ..},
//                         "units_done", "units_total", "gpu_models": [..],
//                         "started_unix", "finished_unix", "error",
//                         "waiting_for": [..], "expanding": [..]}],
//             "store_fault": ""}
//   workers: {"workers": [{"name", "last_seen_seconds", "leases",
//                          "devices": [{"index", "name", "model", "backend",
//                                       "cc": "9.0", "num_sms",
//                                       "total_mem_bytes"}]}]}
//   best:    {"best": [{"op", "dtype", "shape", "gpu_model", "config",
//                       "config_id", "kernel_hash", "median_us", "stdev_us",
//                       "samples", "backend", "sweep_id"}]}
//   compare: {"groups": [{"op", "dtype", "shape",
//                         "gpus": [{"gpu_model", "median_us", "config",
//                                   "backend", "throughput", "unit":
//                                   "TFLOP/s|GB/s|", "roofline_share"}]}]}
//            (the newest kernel hash of each key; 0 = unknown figure)
// `backend` "sim" is shown as SIMULATED wherever its figures appear.
#pragma once

#include <string>
#include <vector>

namespace tune {

// The page from its three files (coordinator/assets/), style and script
// inline, with the marker where HttpServer inlines Chart.js. One page, no
// external resources: the coordinator often runs on a host without internet
// access, and a page that loads nothing from elsewhere also needs no CORS or
// CDN trust. Every string from the API goes in through textContent, never
// innerHTML, because sweep and worker names come from users and remote hosts.
std::string DashboardPage();

// The documents of the file comment, in the order the 404 answer lists them.
std::vector<std::string> DashboardDocuments();

}  // namespace tune
