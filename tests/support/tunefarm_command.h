// The tunefarm binary run as a user runs it, for the system tests: its exit
// code and what it printed (stdout and stderr together).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace tune::testing {

struct CommandRun {
  int exit_code = -1;
  std::string output;
};

// `tunefarm args...`, its output logged under `dir`; at most 300 s.
inline CommandRun Tunefarm(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), TUNEFARM_BINARY);
  const std::string log = dir.path() + "/run-" + std::to_string(std::rand()) + ".log";
  Child c(args, log);
  CommandRun r;
  r.exit_code = c.Wait(300);
  r.output = ReadFile(log);
  return r;
}

}  // namespace tune::testing
