// Builder: a worker without devices (`tunefarm worker --compile-only --arch
// sm_90a[,sm_100a...]`), on a host without a GPU, that compiles for the
// fleet. Its key is on the coordinator's builder allow-list; its hello names
// the architectures it compiles for and its NVRTC version. It asks for work
// (BuildRequest), is handed configs the GPU workers will time next whose
// images the store lacks (BuildWork), compiles them with this host's NVRTC
// for the work's architecture on its compile pool (CompileConfig, the
// compile of the CUDA backend and of `--sim-compile nvrtc`; no device
// needed) and sends their cubins back (BuiltImages). The coordinator serves
// them to GPU workers on the builder key's word (coordinator/build_service.h);
// every device still checks a fetched kernel against the op's reference
// before timing it.
//
// Threads: the socket loop (Run) owns the link and never waits on a
// compile, so heartbeats keep flowing; compiles run on the CompilePool.
// Needs a build with the CUDA toolkit (Start says so otherwise).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tune/status.h"

namespace tune {

struct BuilderOptions {
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::string name;                   // default host:pid
  // The architectures it compiles for ("sm_90", "sm_90a", "sm_100a"):
  // ParseBuilderArchs of --arch. A builder of sm_90 or sm_90a compiles
  // both targets of compute capability 9.0 (the op says which).
  std::vector<std::string> archs;
  unsigned compile_threads = 0;       // 0 = one per usable core
  std::string cache_dir;              // cubin cache; default the worker's
  std::string curve_secret_key, coordinator_public_key;
  bool insecure_plaintext = false;
  std::string http_address = "127.0.0.1";
  int http_port = -1;                 // /metrics; off when < 0, 0 = an ephemeral port
  std::function<void()> alive;        // called on every turn of Run's loop; may be empty
};

// `items` (--arch sm_90a,sm_100a, split) as the architectures a builder
// compiles for, each once. Errors name the item: not sm_ and two or three
// digits with an optional "a", or of a compute capability no GPU model the
// farm knows has (base/known_gpus.h); none at all is an error too.
Result<std::vector<std::string>> ParseBuilderArchs(const std::vector<std::string>& items);

// What a builder did, for /metrics and tests.
struct BuilderStats {
  uint64_t works = 0;          // BuildWorks received
  uint64_t compiled = 0;       // configs compiled (NVRTC ran)
  uint64_t cached = 0;         // configs found in the cubin cache
  uint64_t failed = 0;         // configs that did not compile
  uint64_t images_sent = 0;    // cubins sent back
  uint64_t refused = 0;        // BuiltImages the coordinator refused
  double compile_seconds = 0;  // compiler time, summed over threads
};

class Builder {
 public:
  explicit Builder(BuilderOptions opts);
  ~Builder();

  // Checks the options (architectures, keys), starts the compile pool and
  // /metrics. Errors: built without the CUDA toolkit, no architecture, a
  // key file that does not load.
  Status Start();
  // Serves until *stop is true; reconnects with backoff when the
  // coordinator goes silent (work in hand from a lost link is dropped: the
  // coordinator hands it again, and the cubin cache keeps what compiled).
  Status Run(const std::atomic<bool>* stop);
  BuilderStats stats() const;
  // "http://address:port/" of /metrics; empty when HTTP is off.
  std::string http_url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
