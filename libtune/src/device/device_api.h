// The device layer: what the runner (measure/runner/) needs of a GPU and of
// the compiler that makes its images, as two interfaces with no vendor in
// them. measure/cuda/ implements both over the Driver API and NVRTC; a second
// vendor (HIP: hipMalloc, hipModuleLoadData, hipModuleLaunchKernel, hipEvent*,
// hiprtc) is one more folder implementing the same two classes
// (docs/architecture.md, "Adding a device vendor"). The tests drive the
// runner over a DeviceApi on host memory (tests/support/host_device.h).
//
// Handles (Image, Function, Stream, Event) are opaque pointers owned by the
// DeviceApi that made them; nullptr is "none" (a null Stream is the
// device's default stream). Device memory is a DevicePtr, an address in the
// device's space that host code never dereferences.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/tensor_map.h"
#include "base/types.h"
#include "opspec/op_definition.h"

namespace tune::device {

using DevicePtr = uint64_t;
using Image = struct ImageOpaque*;
using Function = struct FunctionOpaque*;
using Stream = struct StreamOpaque*;
using Event = struct EventOpaque*;

// How a device call failed, as far as the runner must tell: whether the
// device is still usable, and whether it ran out of something.
enum class DeviceError {
  kNone,
  kOutOfMemory,     // an allocation; cached data may be freed and the call tried again
  kOutOfResources,  // a launch asked for more registers or threads than there are
  kContextLost,     // sticky: nothing runs on this device until the process restarts
  kFailed,          // anything else (bad image, bad argument, a launch error)
};

// A device call's outcome: the class and one line naming the call.
struct DeviceStatus {
  DeviceError error = DeviceError::kNone;
  std::string message;
  bool ok() const { return error == DeviceError::kNone; }
};

inline DeviceStatus DeviceFailed(DeviceError e, std::string message) { return DeviceStatus{e, std::move(message)}; }

// What the driver says of a loaded kernel (0: not reported).
struct FunctionAttributes {
  int registers = 0;
  int64_t static_smem_bytes = 0;
  int64_t local_bytes = 0;
  int max_threads_per_block = 0;
};

// Clock readings around a timing loop; `valid` false where the device has
// no reader (its figures are then not flagged).
struct ClockReading {
  bool valid = false;
  int sm_clock_mhz = 0;
  bool throttled = false;  // power or thermal capping lowered the clocks
};

// The device's energy counter (joules since some fixed point; only
// differences mean anything) and the power limit it enforces now; `valid`
// false where the device has no reader. Read, never set: the farm does not
// change clocks or limits.
struct EnergyReading {
  bool valid = false;
  double joules = 0;
  double power_limit_w = 0;
};

// A vendor library timed as an op's [baseline] on the problem's buffers
// (opspec/op_definition.h BaselineSpec): C[M,N] = A[M,K] * B[N,K]^T.
class BaselineLibrary {
 public:
  virtual ~BaselineLibrary() = default;
  // "cublaslt 13.0.0": the library and its version, as rows record it.
  virtual std::string Version() const = 0;
  // Prepares the product for (dtype, M, N, K) within `workspace_bytes`.
  virtual Status Plan(const std::string& dtype, int64_t m, int64_t n, int64_t k, size_t workspace_bytes) = 0;
  // Enqueues the planned product on `stream`.
  virtual Status Run(DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr workspace, Stream stream) = 0;
};

// One device, opened by its implementation for one process (the runner's).
// Calls are not thread-safe; the runner makes them from one thread.
class DeviceApi {
 public:
  virtual ~DeviceApi() = default;

  // What the device is, as the farm keys and plans by it.
  virtual const DeviceInfo& Info() const = 0;
  // Threads one multiprocessor holds at once (occupancy's denominator).
  virtual int MaxThreadsPerMultiprocessor() const = 0;
  // Free and total device memory in bytes.
  virtual DeviceStatus MemoryInfo(size_t* free_bytes, size_t* total_bytes) = 0;

  // Memory. Alloc of 0 bytes allocates 1. Free of 0 does nothing.
  virtual DeviceStatus Alloc(size_t bytes, DevicePtr* out) = 0;
  virtual void Free(DevicePtr p) = 0;
  virtual DeviceStatus CopyToDevice(DevicePtr dst, const void* src, size_t bytes) = 0;
  virtual DeviceStatus CopyToHost(void* dst, DevicePtr src, size_t bytes) = 0;
  virtual DeviceStatus CopyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) = 0;
  // Sets `bytes` bytes to `value`; with a stream, queued on it.
  virtual DeviceStatus Fill(DevicePtr dst, uint8_t value, size_t bytes, Stream stream = nullptr) = 0;

  // Images (what Toolchain::Compile makes) and their kernels.
  virtual DeviceStatus LoadImage(const std::string& image, Image* out) = 0;
  virtual void UnloadImage(Image image) = 0;
  virtual DeviceStatus GetFunction(Image image, const std::string& name, Function* out) = 0;
  virtual FunctionAttributes Attributes(Function f) = 0;
  // Lets `f` use more dynamic shared memory than the default limit.
  virtual DeviceStatus SetMaxDynamicSmem(Function f, int64_t bytes) = 0;
  // Blocks of `threads` threads and `smem` dynamic bytes one multiprocessor runs at once.
  virtual DeviceStatus Occupancy(Function f, int threads, int64_t smem, int* blocks) = 0;
  // Queues `f` on `stream` with `params` (one pointer per kernel parameter,
  // each at a ParamSlot). The geometry is checked by the caller
  // (runner/runner_device.h).
  virtual DeviceStatus Launch(Function f, const int64_t grid[3], const int64_t block[3], int64_t smem, Stream stream,
                              void** params) = 0;

  // Streams, events, waiting.
  virtual DeviceStatus CreateStream(Stream* out) = 0;
  virtual DeviceStatus CreateEvent(Event* out) = 0;
  virtual DeviceStatus Record(Event e, Stream stream) = 0;
  // Milliseconds between two recorded events, both complete.
  virtual DeviceStatus ElapsedMs(Event start, Event stop, float* ms) = 0;
  virtual DeviceStatus SynchronizeStream(Stream stream) = 0;
  // Waits for everything queued on the device.
  virtual DeviceStatus Synchronize() = 0;

  // Optional parts; a device without them says so in the message.
  // Encodes a tensor map (base/tensor_map.h) for the buffer at `address`
  // into the 128 bytes at `map` (128-byte aligned).
  virtual DeviceStatus EncodeTensorMap(const TensorMapLayout& layout, DevicePtr address, void* map) = 0;
  virtual Result<std::unique_ptr<BaselineLibrary>> OpenBaseline(const std::string& library) = 0;
  virtual ClockReading Clocks() = 0;
  virtual EnergyReading Energy() { return {}; }
};

// A compiled program the runner loads, or why there is none.
struct CompiledImage {
  std::string image;
  std::string error;  // one line; empty when compiled
  std::string log;    // the compiler's log, when it has one
  bool ok() const { return error.empty(); }
};

// The compiler of a device's images. The runner compiles only what it owns:
// the op's reference (or checker) kernel and its builtin kernels (fill,
// compare, L2 flush: measure/runner/checker.h); configs arrive compiled.
class Toolchain {
 public:
  virtual ~Toolchain() = default;
  // "nvrtc 13.0": the compiler and its version.
  virtual std::string Version() const = 0;
  // The architectures it compiles for ("sm_90", "sm_90a", ...).
  virtual std::vector<std::string> Targets() const = 0;
  // The include roots ops name (`--include-root NAME=PATH`), set once at
  // start-up before any compile.
  virtual void SetIncludeRoots(IncludeRoots roots) = 0;
  // The op's reference kernel for `dtype` on `device`; `cache_dir` (empty:
  // none) keeps images between processes. A failure is a CompiledKernel
  // with failure set, never a call error.
  virtual CompiledImage CompileReference(const OpSpec& spec, const std::string& dtype, const DeviceInfo& device,
                                         const std::string& cache_dir) = 0;
  // The runner's builtin kernels for `dtype`: an image with the functions
  // tunefarm_fill, tunefarm_compare, tunefarm_flush_l2 and tunefarm_hold
  // (any may be missing; the runner then does that work on the host, or a
  // hot batch unheld). A failure means
  // all of it on the host.
  virtual CompiledImage CompileBuiltins(const std::string& dtype, const DeviceInfo& device,
                                        const std::string& cache_dir) = 0;
};

}  // namespace tune::device
