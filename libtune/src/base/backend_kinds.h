// The measurement backends by the name that devices, rows and bundles carry
// ("cuda", "sim"): one table, read wherever a backend's name is checked
// (the worker's --backend, the coordinator's door, the C API) or a figure's
// origin is told (SIMULATED labels in every printer). A new backend is one
// row here and its implementation under measure/ (docs/architecture.md,
// "Adding a device vendor").
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tune {

struct BackendKind {
  std::string_view name;
  // Its figures are a model's, never a hardware result: every printer
  // labels them SIMULATED.
  bool simulated = false;
  // The environment variable that restricts a program op to its device
  // ("CUDA_VISIBLE_DEVICES"); empty where there is none.
  std::string_view visible_devices_env;
  std::string_view help;
};

// Every backend, in the order help texts list them.
std::span<const BackendKind> BackendKinds();
// nullptr for a name no backend has.
const BackendKind* FindBackendKind(std::string_view name);
// True for a simulated backend's name (false for an unknown one).
bool IsSimulatedBackend(std::string_view name);
// "cuda, sim": for help texts and errors.
std::string BackendNamesText();

}  // namespace tune
