// A farm in one process: the local workers (the GPUs of this host, or sim
// devices when asked for) and a coordinator on a private Unix socket. What
// `tunefarm tune` and `tunefarm nightly` run (a sweep to its end), and what
// Python's Farm.local serves (sweeps submitted over that endpoint); the same
// parts as a farm of many hosts, so that a local tune is measured, checked
// and stored exactly as a farm's.
//
// Private: the coordinator listens on ipc://<folder>/coordinator, <folder> a
// fresh mkdtemp folder (mode 0700) under $XDG_RUNTIME_DIR or /tmp, removed by
// Stop. Only this user's processes can connect (another user's connect(2)
// fails with EACCES); there is no TCP port and no HTTP port. A loopback port
// would let any local user submit program ops that run as this user, or pose
// as workers whose cubins the farm signs.
//
// Thread safety: one thread drives a LocalFarm; it runs the coordinator and
// each worker on threads of its own.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coordinator.h"
#include "protocol/protocol.h"
#include "store/result_store.h"
#include "tune/status.h"
#include "worker.h"

namespace tune {

struct LocalFarmOptions {
  WorkerOptions worker;      // backend "auto": CUDA (an error without a GPU: no silent sim)
  unsigned sim_workers = 1;  // workers when simulated (each with its devices)
  std::string store;         // the result store's folder
  // The coordinator's bound on an op's raw config points
  // (SchedulerOptions::max_raw_configs, `tune --max-raw-configs`).
  uint64_t max_raw_configs = SchedulerOptions{}.max_raw_configs;
  uint32_t search_in_flight = 0;  // SchedulerOptions::search_in_flight (`tune --in-flight`)
};

class LocalFarm {
 public:
  // Waits for a submitted sweep to end; `endpoint` is the coordinator's.
  using WaitFn = std::function<Result<SweepProgress>(const std::string& endpoint, const std::string& sweep_id)>;

  // Starts the workers' devices and the coordinator (not their loops).
  // Errors: no device, the store, the socket's folder, the coordinator's socket.
  static Result<std::unique_ptr<LocalFarm>> Start(const LocalFarmOptions& opts);
  // Stops the loops (Stop).
  ~LocalFarm();
  LocalFarm(const LocalFarm&) = delete;
  LocalFarm& operator=(const LocalFarm&) = delete;

  // Submits `sweep`, starts the loops (after the sweep, so that the
  // workers' first requests find work rather than a NoWork and its retry
  // delay), and waits with `wait`. Its final progress, or an error: the
  // sweep refused, the wait failed. Once per farm.
  Result<SweepProgress> Run(const SweepSubmit& sweep, const WaitFn& wait);
  // Starts the loops and returns: clients submit to endpoint(). Once per
  // farm, instead of Run.
  void Serve();
  // The coordinator's endpoint: "ipc://<private folder>/coordinator"
  // (plaintext; this user's processes only).
  std::string endpoint() const { return coordinator_->bound_endpoint(); }
  // Ends the coordinator's and workers' loops, joins their threads and
  // removes the socket's folder.
  void Stop();

  // A local farm has this host's devices only: a GPU model `sweep` names
  // that none of them is would be waited for forever (a coordinator waits
  // for a named model's devices to join). Keeps the models here of those
  // named and returns a line naming the rest ("" when none is missing); an
  // error when none named is here.
  Result<std::string> KeepModelsHere(SweepSubmit* sweep) const;

  bool simulated() const { return simulated_; }
  std::vector<DeviceInfo> devices() const;
  std::set<std::string> models() const;
  WorkerStats stats() const;
  // The coordinator's store (thread-safe: reads while the farm runs see
  // what was stored so far).
  ResultStore& store() { return *coordinator_->store(); }

 private:
  LocalFarm() = default;
  void StartWorkers(const std::string& endpoint);

  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Coordinator> coordinator_;
  bool simulated_ = false;
  std::string socket_folder_;  // the coordinator socket's private folder; empty once removed
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace tune
