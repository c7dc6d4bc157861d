// host_runner: a runner process over the host device (support/host_vadd.h),
// started by runner::RunnerClient in the tests as a CUDA backend starts
// RunnerMain: the generic backend side of the runner (process, limits,
// crashes, restarts) runs in CI without a GPU.
#include <unistd.h>

#include "measure/runner/runner.h"
#include "support/host_vadd.h"

int main() {
  const int out = tune::runner::FramesOut(STDOUT_FILENO);
  if (out < 0) return tune::runner::kExitProtocol;
  tune::runner::WatchParent();
  tune::testing::HostDevice device(tune::testing::VaddKernels());
  tune::testing::HostToolchain toolchain;
  tune::runner::Runner runner(device, toolchain, 0, STDIN_FILENO, out);
  return runner.Serve();
}
