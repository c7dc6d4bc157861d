// A DeviceApi over host memory (device/device_api.h), for tests: the runner
// (measure/runner/) drives it exactly as it drives a GPU, so that its
// protocol, problem cache, checker and timing loop run in CI without one.
//
// Its kernels are C++ functions registered by name, written like reference
// kernels: each call runs the whole grid. An image is text, one
// "ENTRY=KERNEL" per line after the first line "host-image": the entry is
// the name the runner asks for (the op's kernel), the kernel a registered
// function, so that one op can be served by a correct kernel and by broken
// ones. Device memory is host memory (a DevicePtr is its address); copies
// and fills outside any allocation fail as a GPU's would. A kernel that
// returns kContextLost loses the device: every later call fails the same
// way, as a sticky CUDA error does.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "device/device_api.h"

namespace tune::testing {

// One launch as a host kernel sees it.
struct HostLaunch {
  int64_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  int64_t smem = 0;
  void** params = nullptr;
  // Parameter i as a T (the runner's slots hold pointers, i32, i64, f32).
  template <typename T>
  T Param(size_t i) const {
    T v;
    std::memcpy(&v, params[i], sizeof v);
    return v;
  }
  template <typename T>
  T* Buffer(size_t i) const {
    return reinterpret_cast<T*>(static_cast<uintptr_t>(Param<uint64_t>(i)));
  }
  int64_t Threads() const { return grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]; }
};

struct HostKernel {
  std::function<device::DeviceStatus(const HostLaunch&)> run;
  int max_threads_per_block = 1024;  // what Attributes reports
};

inline std::string HostImage(const std::map<std::string, std::string>& entries) {
  std::string image = "host-image\n";
  for (const auto& [entry, kernel] : entries) image += entry + "=" + kernel + "\n";
  return image;
}

class HostDevice final : public device::DeviceApi {
 public:
  explicit HostDevice(std::map<std::string, HostKernel> kernels) : kernels_(std::move(kernels)) {
    info_.name = "host memory (test device)";
    info_.model = "host-test";
    info_.backend = "host";
    info_.cc_major = 9;
    info_.num_sms = 4;
    info_.total_mem_bytes = int64_t(1) << 30;
    info_.l2_bytes = 1 << 20;
    info_.smem_per_block_optin = 228 << 10;
    info_.max_threads_per_block = 1024;
  }
  ~HostDevice() override {
    for (auto& [p, bytes] : allocations_) std::free(reinterpret_cast<void*>(p));
  }

  // How often each registered kernel ran, and the first parameter's values
  // (buffer addresses) each run saw.
  int Launches(const std::string& kernel) const { return launches_.count(kernel) ? launches_.at(kernel) : 0; }
  // Fills of at least `bytes` so far (the runner's L2 flush, without
  // builtin kernels, is a fill of its flush buffer).
  int FillsOfAtLeast(size_t bytes) const {
    return int(std::count_if(fill_bytes_.begin(), fill_bytes_.end(), [&](size_t b) { return b >= bytes; }));
  }
  const std::vector<uint64_t>& FirstParams(const std::string& kernel) { return first_params_[kernel]; }
  size_t LiveAllocations() const { return allocations_.size(); }

  const DeviceInfo& Info() const override { return info_; }
  int MaxThreadsPerMultiprocessor() const override { return 2048; }
  device::DeviceStatus MemoryInfo(size_t* free_bytes, size_t* total_bytes) override {
    *total_bytes = size_t(info_.total_mem_bytes);
    *free_bytes = *total_bytes - std::min(*total_bytes, allocated_);
    return Check();
  }

  device::DeviceStatus Alloc(size_t bytes, device::DevicePtr* out) override {
    *out = 0;
    if (auto st = Check(); !st.ok()) return st;
    bytes = std::max<size_t>(bytes, 1);
    if (allocated_ + bytes > size_t(info_.total_mem_bytes))
      return device::DeviceFailed(device::DeviceError::kOutOfMemory, "host device: out of memory");
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!p) return device::DeviceFailed(device::DeviceError::kOutOfMemory, "host device: out of memory");
    *out = reinterpret_cast<uintptr_t>(p);
    allocations_[*out] = bytes;
    allocated_ += bytes;
    return {};
  }
  void Free(device::DevicePtr p) override {
    auto it = allocations_.find(p);
    if (it == allocations_.end()) return;
    allocated_ -= it->second;
    std::free(reinterpret_cast<void*>(p));
    allocations_.erase(it);
  }
  device::DeviceStatus CopyToDevice(device::DevicePtr dst, const void* src, size_t bytes) override {
    if (auto st = Within(dst, bytes, "copy to device"); !st.ok()) return st;
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return {};
  }
  device::DeviceStatus CopyToHost(void* dst, device::DevicePtr src, size_t bytes) override {
    if (auto st = Within(src, bytes, "copy to host"); !st.ok()) return st;
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return {};
  }
  device::DeviceStatus CopyOnDevice(device::DevicePtr dst, device::DevicePtr src, size_t bytes) override {
    if (auto st = Within(dst, bytes, "copy on device"); !st.ok()) return st;
    if (auto st = Within(src, bytes, "copy on device"); !st.ok()) return st;
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    return {};
  }
  device::DeviceStatus Fill(device::DevicePtr dst, uint8_t value, size_t bytes, device::Stream) override {
    if (auto st = Within(dst, bytes, "fill"); !st.ok()) return st;
    fill_bytes_.push_back(bytes);
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
    return {};
  }

  device::DeviceStatus LoadImage(const std::string& image, device::Image* out) override {
    *out = nullptr;
    if (auto st = Check(); !st.ok()) return st;
    std::istringstream lines(image);
    std::string line;
    if (!std::getline(lines, line) || line != "host-image")
      return device::DeviceFailed(device::DeviceError::kFailed, "host device: not a host image");
    auto entries = std::make_unique<std::map<std::string, std::string>>();
    while (std::getline(lines, line)) {
      const size_t eq = line.find('=');
      if (eq == std::string::npos || !kernels_.count(line.substr(eq + 1)))
        return device::DeviceFailed(device::DeviceError::kFailed, "host device: no kernel for '" + line + "'");
      (*entries)[line.substr(0, eq)] = line.substr(eq + 1);
    }
    images_.push_back(std::move(entries));
    *out = reinterpret_cast<device::Image>(images_.back().get());
    return {};
  }
  void UnloadImage(device::Image) override {}  // images live as long as the device
  device::DeviceStatus GetFunction(device::Image image, const std::string& name, device::Function* out) override {
    *out = nullptr;
    const auto* entries = reinterpret_cast<const std::map<std::string, std::string>*>(image);
    auto it = entries->find(name);
    if (it == entries->end())
      return device::DeviceFailed(device::DeviceError::kFailed, "host device: no function " + name + " in the image");
    *out = reinterpret_cast<device::Function>(const_cast<std::string*>(&it->second));
    return {};
  }
  device::FunctionAttributes Attributes(device::Function f) override {
    device::FunctionAttributes a;
    a.registers = 32;
    a.max_threads_per_block = kernels_.at(Name(f)).max_threads_per_block;
    return a;
  }
  device::DeviceStatus SetMaxDynamicSmem(device::Function, int64_t) override { return Check(); }
  device::DeviceStatus Occupancy(device::Function, int threads, int64_t, int* blocks) override {
    *blocks = std::max(1, 2048 / std::max(1, threads));
    return Check();
  }
  device::DeviceStatus Launch(device::Function f, const int64_t grid[3], const int64_t block[3], int64_t smem,
                              device::Stream, void** params) override {
    if (auto st = Check(); !st.ok()) return st;
    const std::string& name = Name(f);
    HostLaunch l;
    std::copy(grid, grid + 3, l.grid);
    std::copy(block, block + 3, l.block);
    l.smem = smem;
    l.params = params;
    ++launches_[name];
    joules_ += kJoulesPerLaunch;
    first_params_[name].push_back(l.Param<uint64_t>(0));
    device::DeviceStatus st = kernels_.at(name).run(l);
    if (st.error == device::DeviceError::kContextLost) lost_ = st.message;
    return st;
  }

  device::DeviceStatus CreateStream(device::Stream* out) override {
    *out = reinterpret_cast<device::Stream>(uintptr_t{1});
    return Check();
  }
  device::DeviceStatus CreateEvent(device::Event* out) override {
    events_.push_back(std::make_unique<double>(0));
    *out = reinterpret_cast<device::Event>(events_.back().get());
    return Check();
  }
  // Launches run when queued, so an event's time is the time it is recorded.
  device::DeviceStatus Record(device::Event e, device::Stream) override {
    *reinterpret_cast<double*>(e) = NowSeconds();
    return Check();
  }
  device::DeviceStatus ElapsedMs(device::Event start, device::Event stop, float* ms) override {
    *ms = float((*reinterpret_cast<double*>(stop) - *reinterpret_cast<double*>(start)) * 1e3);
    return Check();
  }
  device::DeviceStatus SynchronizeStream(device::Stream) override { return Check(); }
  device::DeviceStatus Synchronize() override { return Check(); }

  device::DeviceStatus EncodeTensorMap(const TensorMapLayout&, device::DevicePtr, void*) override {
    return device::DeviceFailed(device::DeviceError::kFailed, "host device: no tensor maps");
  }
  Result<std::unique_ptr<device::BaselineLibrary>> OpenBaseline(const std::string& library) override {
    return Status::Error("baseline " + library + ": the host device has no baseline library");
  }
  device::ClockReading Clocks() override { return {}; }
  // An energy counter that every launch advances by kJoulesPerLaunch, under
  // a limit of kPowerLimitW; none until a test turns it on.
  static constexpr double kJoulesPerLaunch = 1e-3, kPowerLimitW = 300;
  bool energy_counter = false;
  device::EnergyReading Energy() override {
    if (!energy_counter) return {};
    return device::EnergyReading{true, joules_, kPowerLimitW};
  }

 private:
  static const std::string& Name(device::Function f) { return *reinterpret_cast<const std::string*>(f); }
  device::DeviceStatus Check() const {
    if (lost_.empty()) return {};
    return device::DeviceFailed(device::DeviceError::kContextLost, "host device lost: " + lost_);
  }
  // [p, p + bytes) inside one allocation.
  device::DeviceStatus Within(device::DevicePtr p, size_t bytes, const char* what) const {
    if (auto st = Check(); !st.ok()) return st;
    auto it = allocations_.upper_bound(p);
    if (it != allocations_.begin()) {
      --it;
      if (p >= it->first && p + bytes <= it->first + it->second) return {};
    }
    return device::DeviceFailed(device::DeviceError::kFailed, std::string("host device: ") + what + " outside any allocation");
  }

  std::map<std::string, HostKernel> kernels_;
  DeviceInfo info_;
  std::map<device::DevicePtr, size_t> allocations_;
  size_t allocated_ = 0;
  std::vector<std::unique_ptr<std::map<std::string, std::string>>> images_;
  std::vector<std::unique_ptr<double>> events_;
  double joules_ = 0;
  std::map<std::string, int> launches_;
  std::vector<size_t> fill_bytes_;
  std::map<std::string, std::vector<uint64_t>> first_params_;
  std::string lost_;
};

// Compiles an op's reference to a host image of the registered kernel of
// its name; has no builtin kernels, so the runner fills and compares on the
// host.
class HostToolchain final : public device::Toolchain {
 public:
  std::string Version() const override { return "host 1"; }
  std::vector<std::string> Targets() const override { return {"host"}; }
  void SetIncludeRoots(IncludeRoots) override {}
  device::CompiledImage CompileReference(const OpSpec& spec, const std::string&, const DeviceInfo&,
                                         const std::string&) override {
    const std::string& k = spec.check.reference_kernel;
    return device::CompiledImage{HostImage({{k, k}}), "", ""};
  }
  device::CompiledImage CompileBuiltins(const std::string& dtype, const DeviceInfo&, const std::string&) override {
    ++builtin_compiles;
    return device::CompiledImage{"", "the host device has no builtin kernels (" + dtype + ")", ""};
  }
  int builtin_compiles = 0;
};

}  // namespace tune::testing
