// The launcher for deployments: the kernel a bundle's farm measured, launched
// on this process's GPU.
//
//   find_package(tunefarm REQUIRED)
//   target_link_libraries(app PRIVATE tunefarm::launcher)
//
//   auto bundle = tune::runtime::Bundle::Load("gemm.tfb", {"/etc/tunefarm/farm.pub"});
//   auto launcher = tune::launcher::Launcher::Open(*bundle, /*ordinal=*/0);
//   auto gemm = launcher->prepare("gemm", "f16");          // once
//   Status st = gemm->launch({M, N, K}, {a, b, c}, stream);  // per call; dims in gemm->dim_names() order
//   gemm->last().level                                      // which level answered
//
// What launch() does: the runtime's lookup for the device's GPU model (its
// fallback chain, runtime.h), then the cubin the farm measured for that
// answer and the device's architecture (loaded once), the geometry from the
// bundle's launch plan evaluated for the config and dims, and the launch.
// A repeated shape reuses all of it: one compare of the dims, the buffer
// pointers copied into the parameters, the launch.
//
// The launch replays a graph of the one kernel (cuGraphLaunch), which costs
// the driver about half of a cuLaunchKernel: a Kernel makes one for each of
// the first 4 stream handles it launches on, at the first launch there, and
// updates its arguments when they change. It launches the kernel itself into
// a stream being captured (so a captured graph holds the kernel), on further
// streams, on the per-thread default stream, and where the launcher's
// context is not current on the calling thread (as a kernel launch, it then
// fails where another context is current, and makes the launcher's current
// where none is). The kernel runs with the same arguments in the same stream
// order either way; a replay is also ordered behind the graph's previous
// replay, which differs only where a stream handle is reused after its
// stream was destroyed (the new stream's first launch waits for the old
// one's last). Graphs are made and destroyed with the thread's capture mode
// relaxed, so a capture in another thread is not disturbed.
// TUNEFARM_LAUNCH_GRAPHS=0 launches kernels only (as do drivers before CUDA
// 12).
//
// Levels: those of the runtime (exact, nearest_shape, family, default), or
// miss. A candidate of the chain is skipped, and the next level answers,
// when the bundle has no cubin of it for the device's architecture ("sm_90"
// or "sm_90a" for compute capability 9.0), no launch plan for its kernel
// hash, or the device cannot give what it needs (threads per block, shared
// memory, as the loaded function and the plan say). When nothing is left
// the answer is a miss: launch() returns kNotFound naming the device's
// architecture and those the bundle carries. The launcher does not compile:
// a deployment whose GPU architecture the farm never measured gets a miss.
//
// The Driver API is opened at run time (libcuda.so.1), as the farm does; the
// library builds and loads without CUDA, and Open() fails with one line where
// there is no driver or device. The launcher uses the device's primary
// context and makes it current on the calling thread.
//
// Ownership and threads: the Bundle must outlive the Launcher and the
// Launcher its Kernels. A Kernel caches its last launch and is not
// thread-safe: use one per thread (prepare() is cheap after the first; the
// modules are shared). Launcher::prepare may be called from several threads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tune/runtime.h"
#include "tune/status.h"

namespace tune::launcher {

struct Device {
  int ordinal = 0;
  std::string name;        // as the driver says ("NVIDIA H100 80GB HBM3")
  std::string model;       // as the farm keys it ("h100-80gb-hbm3")
  int cc_major = 0, cc_minor = 0;
  int64_t smem_optin = 0, max_threads = 0, num_sms = 0, l2_bytes = 0;
};

// What answered a launch.
struct Choice {
  runtime::Level level = runtime::Level::kMiss;
  const runtime::NamedInts* config = nullptr;  // nullptr for a miss
  const runtime::Entry* entry = nullptr;       // as runtime::Answer
  std::span<const runtime::Entry* const> candidates;  // as runtime::Answer
  std::string arch;                            // of the cubin launched
  int64_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, smem_bytes = 0;
  bool replayed = false;  // launched by replaying the kernel's graph (else cuLaunchKernel)
};

namespace detail {
struct Shared;
struct Prepared;
}  // namespace detail

class Kernel {
 public:
  Kernel(Kernel&&) noexcept;
  Kernel& operator=(Kernel&&) noexcept;
  ~Kernel();

  // The dims launch() takes, in order (the op's), and its buffer arguments.
  const std::vector<std::string>& dim_names() const;
  const std::vector<std::string>& buffer_names() const;
  // Each buffer's direction, as the op declares it: "in", "out" or "inout".
  const std::vector<std::string>& buffer_dirs() const;

  // Launches on `stream` (a CUstream; nullptr: the default stream). `buffers`
  // are device pointers, one per buffer_names() entry; scalar arguments come
  // from the launch plan, and tensor maps (kernels fed by the copy engine)
  // are encoded from the buffers they describe, again whenever one moves:
  // such a buffer must be non-null and 16-byte aligned. Errors (one line):
  // wrong counts, a miss, a geometry the device cannot run for these dims,
  // a buffer a tensor map cannot describe, the driver's error.
  Status launch(std::span<const int64_t> dims, std::span<const uint64_t> buffers, void* stream = nullptr);
  Status launch(std::initializer_list<int64_t> dims, std::initializer_list<uint64_t> buffers, void* stream = nullptr) {
    return launch(std::span<const int64_t>(dims.begin(), dims.size()),
                  std::span<const uint64_t>(buffers.begin(), buffers.size()), stream);
  }
  // What answered the last launch() (or, before any, a miss).
  const Choice& last() const;

 private:
  friend class Launcher;
  explicit Kernel(std::unique_ptr<detail::Prepared> p);
  std::unique_ptr<detail::Prepared> p_;
};

class Launcher {
 public:
  // Opens device `ordinal`. Refused with one line: no driver, no such device,
  // a driver call failing.
  static Result<Launcher> Open(const runtime::Bundle& bundle, int ordinal = 0);
  Launcher(Launcher&&) noexcept;
  Launcher& operator=(Launcher&&) noexcept;
  ~Launcher();

  const Device& device() const;
  // The device's architecture as cubins name it: "sm_90".
  std::string arch() const;

  // Resolves (op, dtype) for this device: the chain's candidates that can
  // run here, their modules loaded. kNotFound when the bundle knows neither
  // the op nor a default for it.
  Result<Kernel> prepare(std::string_view op, std::string_view dtype);

 private:
  explicit Launcher(std::shared_ptr<detail::Shared> s);
  std::shared_ptr<detail::Shared> s_;
};

}  // namespace tune::launcher
