// vadd on the host device (support/host_device.h): y = x + r over N f32
// elements, its op spec, and kernels that serve it correctly and in every
// broken way the runner must tell apart. The runner tests serve it on a
// thread; host_runner serves it as a runner process.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "opspec/op_definition.h"
#include "support/host_device.h"

namespace tune::testing {

// y = x + r over N f32 elements, one thread per element.
inline constexpr char kVaddOpToml[] = R"toml(
[op]
name    = "vadd"
source  = "vadd.cu"
kernel  = "vadd"
dims    = ["N"]
dtypes  = ["f32"]
default = { BLOCK = 128 }

[params]
BLOCK = [64, 128, 256]

[launch]
grid  = ["cdiv(N, BLOCK)", "1", "1"]
block = ["BLOCK", "1", "1"]
smem  = "0"

[[args]]
name  = "x"
dir   = "in"
dtype = "$dtype"
shape = ["N"]
init  = "normal(0,2)"

[[args]]
name  = "r"
dir   = "in"
dtype = "$dtype"
shape = ["N"]
init  = "uniform(-1,1)"

[[args]]
name  = "y"
dir   = "out"
dtype = "$dtype"
shape = ["N"]

[[args]]
name   = "N"
scalar = "i32"
value  = "N"

[check]
reference = "reference.cu:vadd_ref"
grid  = ["cdiv(N, 256)", "1", "1"]
block = ["256", "1", "1"]
atol = 1e-5
rtol = 1e-5
max_mismatch = 0.0
)toml";

// Every thread of the grid adds one element; `mutate(i, y)` may spoil it.
inline HostKernel Vadd(std::function<void(int64_t, float*, int32_t)> mutate = nullptr, int max_threads = 1024) {
  HostKernel k;
  k.max_threads_per_block = max_threads;
  k.run = [mutate](const HostLaunch& l) -> device::DeviceStatus {
    const float* x = l.Buffer<float>(0);
    const float* r = l.Buffer<float>(1);
    float* y = l.Buffer<float>(2);
    const int32_t n = l.Param<int32_t>(3);
    for (int64_t i = 0; i < std::min<int64_t>(l.Threads(), n); ++i) y[i] = x[i] + r[i];
    if (mutate) mutate(0, y, n);
    return {};
  };
  return k;
}

inline std::map<std::string, HostKernel> VaddKernels() {
  std::map<std::string, HostKernel> k;
  k["vadd_ref"] = Vadd();
  k["vadd"] = Vadd();
  k["vadd_wrong"] = Vadd([](int64_t, float* y, int32_t n) { y[n - 1] += 1.0f; });
  k["vadd_overrun"] = Vadd([](int64_t, float* y, int32_t n) { y[n + 3] = 1.0f; });  // into the guard
  k["vadd_nan"] = Vadd([](int64_t, float* y, int32_t n) { y[n / 2] = std::nanf(""); });
  k["vadd_small"] = Vadd(nullptr, 64);  // takes at most 64 threads a block
  k["vadd_default"] = Vadd();            // the default config's image under [check] default
  k["vadd_default_nan"] = k["vadd_nan"];
  k["vadd_crash"].run = [](const HostLaunch&) {
    return device::DeviceFailed(device::DeviceError::kContextLost, "illegal address (planted)");
  };
  // What only a runner process can survive: a kernel that takes the process
  // down, and one that never returns.
  k["vadd_abort"].run = [](const HostLaunch&) -> device::DeviceStatus { std::abort(); };
  k["vadd_hang"].run = [](const HostLaunch&) -> device::DeviceStatus {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  };
  return k;
}

inline OpPackage VaddPackage() {
  return {{"op.toml", kVaddOpToml}, {"vadd.cu", "// host kernels serve this op\n"},
          {"reference.cu", "// host kernels serve this op\n"}};
}

}  // namespace tune::testing
