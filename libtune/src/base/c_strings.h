// The C APIs' strings and errors (tune/c.h, tune/farm_c.h): what they hand
// out is malloc'd, for the caller's tunefarm_free, an error goes to
// `errptr` as LevelDB's c.h does it, and no exception crosses them.
#pragma once

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace tune {

// A malloc'd copy of `s`, NUL-terminated (nullptr when out of memory).
inline char* CopyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

// Stores a copy of `message` in *errptr, freeing what was there.
inline void SetError(char** errptr, const std::string& message) {
  if (!errptr) return;
  std::free(*errptr);
  *errptr = CopyString(message);
}

// Runs `fn`, turning an exception into an error: none may cross the API.
template <typename T, typename Fn>
T Guard(char** errptr, T failed, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    SetError(errptr, std::string("tunefarm: ") + e.what());
  } catch (...) {
    SetError(errptr, "tunefarm: unknown error");
  }
  return failed;
}

}  // namespace tune
