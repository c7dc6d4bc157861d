// The C APIs' strings (tune/c.h, tune/farm_c.h): what they hand out is
// malloc'd, for the caller's tunefarm_free, and an error goes to `errptr`
// as LevelDB's c.h does it.
#pragma once

#include <cstdlib>
#include <cstring>
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

}  // namespace tune
