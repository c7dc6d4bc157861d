// A shape dim's name and value as files from outside give them (misses
// files, per-device config file names) and sweep files write them.
#pragma once

#include <cctype>
#include <cstdint>
#include <string_view>

namespace tune {

// A bare TOML key that the op's expressions also read:
// [A-Za-z_][A-Za-z0-9_]*, at most 64 bytes. A '.' would make a dotted key
// (a table), a '-' no expression name.
inline bool IsDimName(std::string_view s) {
  if (s.empty() || s.size() > 64 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// A dim's largest value from outside (2^40).
inline constexpr int64_t kMaxDimValue = int64_t(1) << 40;

}  // namespace tune
