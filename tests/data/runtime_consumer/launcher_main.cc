// launcher_consumer BUNDLE PUBKEY OP DTYPE: opens device 0 for the bundle and
// prepares (OP, DTYPE); prints the device and the kernel's dims, or the
// one-line error (no driver or device is an answer, not a crash).
#include <tune/launcher.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  auto bundle = tune::runtime::Bundle::Load(argv[1], {argv[2]});
  if (!bundle.ok()) {
    std::printf("%s\n", bundle.status().message().c_str());
    return 1;
  }
  auto launcher = tune::launcher::Launcher::Open(*bundle, 0);
  if (!launcher.ok()) {
    std::printf("%s\n", launcher.status().message().c_str());
    return 1;
  }
  auto kernel = launcher->prepare(argv[3], argv[4]);
  if (!kernel.ok()) {
    std::printf("%s\n", kernel.status().message().c_str());
    return 1;
  }
  std::printf("device %s: %zu dims\n", launcher->device().model.c_str(), kernel->dim_names().size());
  return 0;
}
