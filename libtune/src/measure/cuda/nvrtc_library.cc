#include "measure/cuda/nvrtc_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace tune::cuda {
namespace {

struct Loaded {
  Nvrtc nvrtc;
  Status status;
};

Status Open(Nvrtc* n) {
  std::vector<std::string> names;
  if (const char* forced = std::getenv("TUNEFARM_NVRTC"); forced && *forced) {
    names.push_back(forced);
  } else {
    const char* sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
    for (const char* s : sonames) names.push_back(s);
    std::vector<std::filesystem::path> dirs;
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.emplace_back(std::filesystem::path(home) / "lib64");
    dirs.emplace_back("/usr/local/cuda/lib64");
    for (const auto& d : dirs)
      for (const char* s : sonames) names.push_back((d / s).string());
  }
  void* lib = nullptr;
  std::string why;
  for (const std::string& name : names) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* e = dlerror();
    why = e ? e : name + ": not found";
  }
  if (!lib) {
    return Status::Unavailable("NVRTC (the CUDA toolkit's runtime compiler) is not on this host: tried " +
                               names.front() + (names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "") +
                               "; " + why);
  }
#define TUNE_NVRTC_LOAD(name)                                                                  \
  n->name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));                           \
  if (!n->name) return Status::Unavailable("NVRTC lacks " #name " (a toolkit older than 11.2)");
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
