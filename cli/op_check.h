// `tunefarm op check DIR`: what a new op will do in the farm, known before a
// GPU runs it.
#pragma once

#include <string>
#include <vector>

namespace tune {

struct OpCheckArgs {
  std::string dir;
  std::vector<std::string> archs = {"sm_90"};  // compile for these
  std::vector<std::string> gpus;               // count legal configs on these known models (default: all)
  std::vector<std::string> shapes;             // "M=128,N=4096,K=4096": legal configs at each (shape rules)
  bool all = false;                            // compile every legal config, not a sample
  int sample = 8;                              // configs compiled per dtype and arch
  std::vector<std::string> include_roots;      // NAME=PATH, as a worker's --include-root
  // A running coordinator: count legal configs on its live GPU models too.
  std::string coordinator, curve_key, coordinator_key;
  std::string format = "table";                // table | json (one document with the same facts)
};

// Parses the op; counts its legal configs on each known GPU model, naming the
// rules that prune them (and the one that empties a space); compiles the
// reference and a sample of configs for each dtype and architecture with
// NVRTC, printing whole compile logs. Exit 0 when all of it passed, 1 when
// anything failed.
int RunOpCheck(const OpCheckArgs& args);

}  // namespace tune
