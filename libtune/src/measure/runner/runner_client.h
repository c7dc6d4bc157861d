// RunnerClient: a backend's side of one runner process, the same for every
// vendor. It starts the runner (RunnerProcess), checks its hello, sends each
// op package and image once per runner, enforces the start-up and per-config
// wall-clock limits from outside, and turns a runner that dies, hangs or
// talks nonsense into a failed Measurement, starting the next runner at once.
// What a backend adds is its toolchain (the images) and the program that
// serves the runner's device (RunnerMain for CUDA; a test program over host
// memory in CI).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "measure/backend.h"
#include "measure/runner/runner_process.h"
#include "measure/runner/runner_protocol.h"
#include "tune/status.h"

namespace tune::runner {

struct RunnerClientOptions {
  // The runner is started as `exe args...`; that program serves one device
  // (runner::Runner) on its stdin and stdout.
  std::string exe;
  std::vector<std::string> args;
  // How messages name the device ("GPU 0"), and the name its hello must
  // report (empty: any).
  std::string device_label;
  std::string device_name;
  // Sent with the runner's init: its compile cache and the include roots of
  // the ops it compiles references for.
  std::string cache_dir;
  IncludeRoots include_roots;
  // Wall-clock limit for a runner to say hello and for it to build a problem
  // (inputs + reference); a config's own is TimingPolicy::timeout_seconds.
  double startup_timeout_seconds = 120.0;
  // How long a runner may take to exit once its channel closes.
  double exit_wait_seconds = 2.0;
};

// Counters for worker metrics and tests.
struct RunnerStats {
  int spawns = 0;    // runner processes started
  int crashes = 0;   // runners that died or reported a sticky error
  int timeouts = 0;  // runners killed for exceeding a wall-clock limit
  int pid = 0;       // current runner process, 0 when none
};

// One measurement's images: the config's (empty for a baseline) and, under
// [check] default, the default config's. Each travels only when the runner
// lacks its key.
struct RunnerImages {
  const std::string* image = nullptr;
  const std::string* default_image = nullptr;
};

// Not thread-safe: one per device, driven by its backend's measuring thread.
class RunnerClient {
 public:
  explicit RunnerClient(RunnerClientOptions opts) : opts_(std::move(opts)) {}

  // A runner that said hello, started if needed. Errors name the device and
  // how the runner ended.
  Status EnsureReady();

  // Runs `req` (its images filled from `images` where this runner lacks
  // them) and copies the outcome into `m`, whose key fields the caller set.
  // Every failure is a Measurement with failure set: kCrash (no runner, a
  // runner that died, lost the protocol or reported a sticky error: the
  // next one is started), kTimeout (no answer within the limit: killed), or
  // what the runner reported. `fresh` starts a new runner first
  // (TimingPolicy::new_runner).
  Measurement Measure(const OpSpec& spec, MeasureRequest req, RunnerImages images, bool fresh, Measurement m);

  RunnerStats stats() const;

 private:
  // Starts a runner and sends its init; the hello is read by EnsureReady.
  Status Spawn();
  // The runner is gone or must go: count why and start the next one now, so
  // that its start-up overlaps whatever the backend does next.
  void Replace(bool killed);
  std::string Named(const std::string& what) const { return "runner for " + opts_.device_label + " " + what; }

  RunnerClientOptions opts_;
  std::unique_ptr<RunnerProcess> runner_;
  bool ready_ = false;
  // What the runner now running holds: op packages, the last image, the
  // default images.
  std::set<std::string> packages_sent_;
  std::string image_sent_;
  std::set<std::string> default_images_sent_;
  RunnerStats stats_;
};

}  // namespace tune::runner
