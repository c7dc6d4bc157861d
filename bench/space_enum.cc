// Enumerates and prunes a synthetic gemm-like space of 10^6 raw points, the
// size EnumerateConfigs promises to handle well under a second.
//
//   bench_space_enum [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "opspec/config_space.h"

namespace {

const char* kSpec = R"toml(
[op]
name    = "bench_gemm"
source  = "k.cu"
kernel  = "k"
dims    = ["M", "N", "K"]
dtypes  = ["f16", "bf16"]
default = { BM = 128, BN = 128, BK = 32, WM = 2, WN = 2, STAGES = 3 }

[params]
BM     = [16, 32, 48, 64, 80, 96, 128, 160, 192, 256]
BN     = [16, 32, 48, 64, 80, 96, 128, 160, 192, 256]
BK     = [8, 16, 24, 32, 40, 48, 56, 64, 96, 128]
WM     = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16]
WN     = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16]
STAGES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]

[constraints]
rules = [
  "(BM*BK + BK*BN) * STAGES * dsize <= smem_optin",
  "WM*WN*32 <= max_threads",
  "BM % (WM*16) == 0",
  "BN % (WN*8) == 0",
]

[launch]
grid  = ["cdiv(N, BN)", "cdiv(M, BM)", "1"]
block = ["WM*WN*32", "1", "1"]
smem  = "(BM*BK + BK*BN) * STAGES * dsize"

[[args]]
name = "C"
dir = "out"
dtype = "$dtype"
shape = ["M", "N"]

[check]
reference = "k.cu:k_ref"
grid  = ["cdiv(N, 16)", "cdiv(M, 16)", "1"]
block = ["16", "16", "1"]
)toml";

double Seconds(const std::chrono::steady_clock::time_point& since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Run(const char* label, const tune::OpSpec& spec, const tune::DeviceInfo& device, int repeats) {
  double best = 1e300;
  tune::SpaceStats stats;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto configs = tune::EnumerateConfigs(spec, device, "f16", &stats);
    const double s = Seconds(t0);
    if (!configs.ok()) {
      std::fprintf(stderr, "%s\n", configs.status().message().c_str());
      return 1;
    }
    if (s < best) best = s;
  }
  std::printf("%-10s raw=%llu legal=%llu seconds=%.4f (best of %d) raw_points_per_s=%.3g\n", label,
              static_cast<unsigned long long>(stats.raw), static_cast<unsigned long long>(stats.legal), best,
              repeats, static_cast<double>(stats.raw) / best);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  auto spec = tune::ParseOpSpec(tune::OpPackage{{"op.toml", kSpec}, {"k.cu", ""}}, "bench");
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().message().c_str());
    return 1;
  }
  tune::DeviceInfo h100;
  h100.cc_major = 9;
  h100.num_sms = 132;
  h100.l2_bytes = 50 << 20;
  h100.smem_per_block_optin = 232448;
  h100.max_threads_per_block = 1024;

  int rc = Run("pruned", spec.value(), h100, repeats);
  // Worst case for the odometer: no rule prunes, every point is a Config.
  tune::OpSpec open = spec.value();
  open.constraints = {"smem_optin > 0"};
  rc |= Run("all-legal", open, h100, repeats);
  // No subtree skipping: a rule over the innermost axis that never holds is
  // evaluated at every raw point, and no Config is built.
  tune::OpSpec dense = spec.value();
  dense.constraints = {"STAGES * 0 == 1"};
  rc |= Run("none-legal", dense, h100, repeats);
  return rc;
}
