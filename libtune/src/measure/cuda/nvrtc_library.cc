#include "measure/cuda/nvrtc_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "base/shared_library.h"

namespace tune::cuda {
namespace {

struct Loaded {
  Nvrtc nvrtc;
  Status status;
};

Status Open(Nvrtc* n) {
  const char* sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
  std::vector<std::string> names(std::begin(sonames), std::end(sonames));
  std::vector<std::filesystem::path> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.emplace_back(std::filesystem::path(home) / "lib64");
  dirs.emplace_back("/usr/local/cuda/lib64");
  for (const auto& d : dirs)
    for (const char* s : sonames) names.push_back((d / s).string());
  auto lib = OpenSharedLibrary("NVRTC (the CUDA toolkit's runtime compiler)", LibraryNames("TUNEFARM_NVRTC", names));
  if (!lib.ok()) return lib.status();
#define TUNE_NVRTC_LOAD(name) \
  if (!lib->Resolve(n->name, #name)) return Status::Unavailable("NVRTC lacks " #name " (a toolkit older than 11.2)");
  TUNE_NVRTC_FUNCTIONS(TUNE_NVRTC_LOAD)
#undef TUNE_NVRTC_LOAD
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(n->nvrtcVersion), &info) && info.dli_fname) n->path = info.dli_fname;
  return Status::OK();
}

}  // namespace

Result<const Nvrtc*> LoadNvrtc() {
  // Never destroyed: compile threads may still call through it at exit.
  static Loaded* loaded = [] {
    auto* l = new Loaded();
    l->status = Open(&l->nvrtc);
    return l;
  }();
  if (!loaded->status.ok()) return loaded->status;
  return &loaded->nvrtc;
}

}  // namespace tune::cuda
