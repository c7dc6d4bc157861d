// Worker: one per host. Says hello with its devices, requests work units,
// runs them on its backends (one device thread per GPU, a shared compile
// pool ahead of them) and streams results back.
//
// Threads: the socket thread owns the DEALER and never blocks on work: it
// sends heartbeats, forwards units to device threads and their results to
// the coordinator. Device threads talk to it over inproc sockets. Results
// stay buffered until the coordinator acknowledges them and are sent again
// after a reconnect, so nothing is lost when the link drops.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/limits.h"
#include "measure/backend.h"
#include "opspec/op_definition.h"
#include "tune/status.h"

namespace tune {

struct WorkerOptions {
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::string name;                          // default host:pid
  std::string backend = "auto";              // auto | cuda | sim
  std::vector<std::string> sim_models = {"h100"};  // sim: one device per entry
  std::string sim_faults;                    // see SimFaults::Parse
  // sim: how configs compile: "sim" (at once, no image) or "nvrtc" (for
  // real with this host's NVRTC, as on a GPU worker, cubin cache included:
  // needs a build with the CUDA toolkit).
  std::string sim_compile = "sim";
  // sim: measured medians to time the configs they hold at (SimOptions::truth); null = the cost model.
  std::shared_ptr<const SimTruth> sim_truth;
  std::vector<int> cuda_devices;             // empty = every device
  IncludeRoots include_roots;                // cuda: where ops' include roots are (--include-root)
  unsigned compile_threads = 0;              // 0 = one per core
  std::string cache_dir;                     // cubin cache (cuda); program ops unpack beside it
  // Bytes of the op packages unpacked under cache_dir (package_cache.h).
  uint64_t max_package_cache_bytes = kDefaultMaxWorkerPackageCacheBytes;
  std::string runner_exe;                    // cuda: binary with the `runner` command
  TimingPolicy timing;
  // CURVE: this worker's key pair and the coordinator's public key; both or
  // neither. Required for non-loopback endpoints unless insecure_plaintext.
  std::string curve_secret_key, coordinator_public_key;
  bool insecure_plaintext = false;
  // Run program ops (measure/program/program_backend.h): commands of whoever submits
  // sweeps, run as this worker's user. Off unless the operator allows it.
  bool allow_programs = false;
  // Files and folders programs may not touch (the key files are always
  // among them: --protect adds the worker's configuration folders), and
  // whether to run programs where they cannot be confined (no Landlock).
  std::vector<std::string> protected_paths;
  bool allow_unconfined_programs = false;
  // Each program in a namespace of its own (ProgramBackendOptions).
  bool program_namespace = true;
  // /metrics (and /healthz) for Prometheus on this address and port;
  // off when http_port < 0, 0 = an ephemeral port.
  std::string http_address = "127.0.0.1";
  int http_port = -1;
  size_t batch_size = 64;                    // results per message
  double batch_seconds = 0.5;                // or this old, whichever first
  bool verbose = false;                      // --verbose: the command logs at debug (unit lines)
  // Called by Run's socket loop on every turn (at least every 20 ms), as
  // CoordinatorOptions::alive. May be empty.
  std::function<void()> alive;
};

// What a worker spent its time on, for throughput reports.
struct WorkerStats {
  // Configs screened (compiled or failed to), by op, dtype and config id:
  // a config comes back in a unit for each shape, and counts once.
  std::set<std::string> screened;
  uint64_t measured = 0;              // (config, shape) results produced
  uint64_t measured_again = 0;        // of those, from refine and confirm units
  uint64_t compiled = 0, compile_cache_hits = 0;
  uint64_t fetched = 0;                // kernels taken from the coordinator's stored images, not compiled
  double compile_seconds = 0;         // summed over compile threads
  double compile_wait_seconds = 0;    // device threads waiting for a compile
  double measure_seconds = 0;         // device threads inside Measure (check + timing)
  uint64_t units = 0;                 // work units received
  uint64_t units_queued = 0;          // of those, received while their device was still busy
  uint64_t units_ahead = 0;           // of those, whose configs went to the compile pool while it timed
  // Threads of the compile pool (summed over workers): compile_seconds over
  // wall time times this is how busy the compilers were.
  unsigned compile_threads = 0;

  WorkerStats& operator+=(const WorkerStats& o) {
    screened.insert(o.screened.begin(), o.screened.end());
    measured += o.measured;
    measured_again += o.measured_again;
    compiled += o.compiled;
    compile_cache_hits += o.compile_cache_hits;
    fetched += o.fetched;
    compile_seconds += o.compile_seconds;
    compile_wait_seconds += o.compile_wait_seconds;
    measure_seconds += o.measure_seconds;
    units += o.units;
    units_queued += o.units_queued;
    units_ahead += o.units_ahead;
    compile_threads += o.compile_threads;
    return *this;
  }
};

// A worker's name unless --name says otherwise (host:pid), and its cubin
// cache unless --cache-dir says otherwise (under $XDG_CACHE_HOME or
// ~/.cache/tunefarm): a builder's too (builder.h).
std::string WorkerDefaultName();
std::string WorkerDefaultCacheDir();

class Worker {
 public:
  explicit Worker(WorkerOptions opts);
  ~Worker();

  // Creates the backends. Errors: no device for the chosen backend, bad sim
  // faults.
  Status Start();
  const std::vector<DeviceInfo>& devices() const;
  // Where Run() connects; set before Run().
  void set_endpoint(const std::string& endpoint);
  // Serves until *stop is true; reconnects with backoff when the coordinator
  // goes silent.
  Status Run(const std::atomic<bool>* stop);
  WorkerStats stats() const;
  // The Prometheus exposition served at /metrics (tunefarm_worker_*);
  // thread-safe.
  std::string Metrics() const;
  // "http://address:port/" of /metrics; empty when HTTP is off.
  std::string http_url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
