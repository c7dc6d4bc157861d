// Env: what the farm asks of its host that a test may want to replace (the
// clocks, whole-file reads and writes), after LevelDB's Env. Code handed an
// Env* reads the host only through it; Env::Default() is the host itself.
// A test derives from Env and overrides what it fakes: every method's
// default is the host's.
#pragma once

#include <cstdint>
#include <string>

#include "tune/status.h"

namespace tune {

class Env {
 public:
  Env() = default;
  virtual ~Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  // The host. Never destroyed; thread-safe.
  static Env* Default();

  // Seconds on the monotonic clock (base/clock.h, NowSeconds): only
  // differences between readings mean anything. The host's is thread-safe;
  // a replacement shared between threads must be too.
  virtual double NowSeconds();
  // Seconds since the Unix epoch on the wall clock (base/clock.h,
  // NowUnixSeconds), for stamps that outlive the process (rows, leases,
  // status pages); may jump when the clock is set.
  virtual int64_t NowUnixSeconds();

  // The whole of `path` in *out. On failure *out is unspecified and the
  // error says why (the system's reason, or "read error") without naming
  // the path: the caller names the file as its user knows it.
  virtual Status ReadFile(const std::string& path, std::string* out);
  // Replaces `path` with `bytes` whole or not at all: a reader sees the old
  // file or the new one, never a torn one (a temporary file beside it,
  // flushed, renamed over it). Errors name the file that failed.
  virtual Status WriteFileAtomically(const std::string& path, const std::string& bytes);
};

}  // namespace tune
