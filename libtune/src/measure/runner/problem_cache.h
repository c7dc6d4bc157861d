// The problem cache (private to measure/runner): inputs and reference outputs
// of one (op package, dtype, shape, buffer sizes), built once and kept on the
// device while memory allows (least recently used goes first), and the
// placements of a kernel's buffers that timing rotates over.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "measure/runner/runner_device.h"
#include "opspec/config_space.h"
#include "opspec/op_definition.h"

namespace tune::runner {

class Checker;

// Every buffer a kernel gets is followed by this many guard bytes. Those of
// ArgData::dev, where the checked run happens, are filled with kGuardByte
// before it and compared after it: a kernel that writes past a buffer's end
// fails its check instead of passing on the allocation's slack. The spare
// placements carry a guard so that one moved into ArgData::dev has it.
constexpr size_t kGuardBytes = 64 << 10;
constexpr unsigned char kGuardByte = 0xA5;

struct ArgData {
  const ArgSpec* spec = nullptr;
  std::string dtype;        // resolved ("$dtype" -> the sweep's dtype)
  int64_t elems = 0;
  size_t bytes = 0;
  DevicePtr dev = 0;      // what the kernel gets (bytes, then kGuardBytes of guard)
  DevicePtr pristine = 0; // initial contents of in/inout buffers, restored before each check
  DevicePtr ref = 0;      // reference output (fp32) of out/inout buffers
  bool IsInput() const { return spec->dir == "in" || spec->dir == "inout"; }
  bool IsOutput() const { return spec->dir == "out" || spec->dir == "inout"; }
};

struct Problem {
  std::string key;
  std::vector<ArgData> args;
  size_t device_bytes = 0;
  // Further placements of the kernel's buffers (TimingPolicy::placements):
  // per placement, one pointer per arg (0 for scalars). Not counted in
  // device_bytes.
  std::vector<std::vector<DevicePtr>> spare;
  // [check] checker: the op's checker kernel, run after each checked run.
  Function checker = nullptr;
  // [check] default: whether the default config has run and its outputs
  // are ArgData::ref, and how that failed (every config's failure then).
  bool default_ran = false;
  Failure default_failure;
};

class ProblemCache {
 public:
  // `budget`: device bytes the cached problems may hold together.
  ProblemCache(RunnerDevice& device, Checker& checker, Toolchain& toolchain, std::string cache_dir, size_t budget)
      : dev_(device),
        api_(device.api()),
        checker_(checker),
        toolchain_(toolchain),
        cache_dir_(std::move(cache_dir)),
        budget_(budget) {}
  ProblemCache(const ProblemCache&) = delete;
  ProblemCache& operator=(const ProblemCache&) = delete;

  // The problem of (spec, dtype, shape) under `plan`, built (inputs drawn,
  // reference run) when not cached; `*built_now` says which. `digest` names the
  // op package `spec` was parsed from. The pointer stays valid until the next
  // Get.
  Failure Get(const OpSpec& spec, const std::string& digest, const std::string& dtype, const Shape& shape,
              const LaunchPlan& plan, Problem** out, bool* built_now);

  // Gives `p` `placements` placements of its kernel's buffers (as many as a
  // quarter of the budget holds): ArgData::dev and Problem::spare. With
  // `move` all of them are newly allocated (TimingPolicy::new_buffers).
  // Memory short: fewer placements, or the old ones.
  Failure PlaceBuffers(Problem* p, int placements, bool move);

 private:
  struct Reference {
    Image module = nullptr;
    Function function = nullptr;
    Failure failure;
  };

  Failure Build(const OpSpec& spec, const std::string& digest, const std::string& dtype, const Shape& shape,
                const LaunchPlan& plan, Problem* p);
  // The op's reference kernel for `dtype`, compiled and loaded once per
  // package; its failure is every later caller's too.
  Failure GetReference(const OpSpec& spec, const std::string& digest, const std::string& dtype, Reference** out);
  // Allocates one placement of `p`'s kernel buffers after a spacer, inputs
  // copied from their pristine values. Empty when memory is short.
  Failure NewPlacement(Problem* p, std::vector<DevicePtr>* set);
  void ReleaseBuffers(Problem* p);
  void EvictOldest();
  DeviceStatus Alloc(size_t bytes, DevicePtr* p);

  RunnerDevice& dev_;
  DeviceApi& api_;
  Checker& checker_;
  Toolchain& toolchain_;
  const std::string cache_dir_;
  const size_t budget_;
  std::map<std::string, Reference> references_;  // digest|dtype
  std::list<Problem> problems_;                  // front = most recent
  size_t bytes_ = 0;
  uint64_t moves_ = 0;  // NewPlacement calls, which pick the spacer sizes
};

}  // namespace tune::runner
