#include "base/shared_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace tune {

void* SharedLibrary::Symbol(const char* symbol) const { return handle ? dlsym(handle, symbol) : nullptr; }

Result<SharedLibrary> OpenSharedLibrary(std::string_view what, const std::vector<std::string>& names) {
  std::string why;
  for (const std::string& name : names) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return SharedLibrary{handle, name};
    const char* e = dlerror();
    why = e ? e : name + ": not found";
  }
  // A long list of candidates (every soname in every toolkit folder) is
  // named by its first and a count, so that the line stays one line.
  std::string tried;
  if (names.size() <= 4) {
    for (const std::string& name : names) tried += (tried.empty() ? "" : ", ") + name;
  } else {
    tried = names.front() + " and " + std::to_string(names.size() - 1) + " more";
  }
  return Status::Unavailable(std::string(what) + " is not on this host (tried " + tried + ")" +
                             (why.empty() ? "" : ": " + why));
}

std::vector<std::string> LibraryNames(const char* override_var, std::vector<std::string> names) {
  if (const char* forced = std::getenv(override_var); forced && *forced) return {forced};
  return names;
}

}  // namespace tune
