#include "base/backend_kinds.h"

namespace tune {
namespace {

constexpr BackendKind kBackendKinds[] = {
    {"cuda", false, "CUDA_VISIBLE_DEVICES", "NVIDIA GPUs: NVRTC compiles, Driver API runner (measure/cuda)"},
    {"sim", true, "", "a simulated GPU: a timing model, for tests and scale studies (measure/sim_backend.cc)"},
};

}  // namespace

std::span<const BackendKind> BackendKinds() { return kBackendKinds; }

const BackendKind* FindBackendKind(std::string_view name) {
  for (const BackendKind& k : kBackendKinds)
    if (k.name == name) return &k;
  return nullptr;
}

bool IsSimulatedBackend(std::string_view name) {
  const BackendKind* k = FindBackendKind(name);
  return k && k->simulated;
}

std::string BackendNamesText() {
  std::string out;
  for (const BackendKind& k : kBackendKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

}  // namespace tune
