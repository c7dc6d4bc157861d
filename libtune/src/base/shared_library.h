// Vendor libraries opened at run time (dlopen) rather than linked: the CUDA
// driver, NVRTC, NVML, cuBLASLt. Linking them would stop every binary from
// starting on a host without them (a coordinator's, a client's, CI); opened
// here, only the call that needs one fails, with one line naming what was
// tried. One home for the rule, used by the CUDA backend (measure/cuda/) and
// the deployment launcher alike, so that both open the driver by the same
// name and report its absence the same way.
//
// Thread safety: free functions; the handles they return are the loader's
// (dlopen counts references), never closed by tunefarm: threads may still
// call through them at exit.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tune/status.h"

namespace tune {

// The CUDA driver's library, as the driver installs it.
inline constexpr const char* kCudaDriverLibrary = "libcuda.so.1";

struct SharedLibrary {
  void* handle = nullptr;
  std::string name;  // the name (or path) that opened

  // `name`'s address in the library, else nullptr.
  void* Symbol(const char* name) const;
  // Sets *fn to `name`'s address; false when the library lacks it.
  template <class Fn>
  bool Resolve(Fn*& fn, const char* name) const {
    fn = reinterpret_cast<Fn*>(Symbol(name));
    return fn != nullptr;
  }
};

// Opens the first of `names` (sonames, searched as the loader searches, or
// paths) that loads. `what` names the library for people ("cuBLASLt").
// Unavailable: "<what> is not on this host (tried <names>): <loader's error>".
Result<SharedLibrary> OpenSharedLibrary(std::string_view what, const std::vector<std::string>& names);

// `names`, or only the value of the environment variable `override_var`
// where it is set and not empty (TUNEFARM_NVRTC, TUNEFARM_CUBLASLT).
std::vector<std::string> LibraryNames(const char* override_var, std::vector<std::string> names);

}  // namespace tune
