// The op packages a worker's backends unpack on its disk
// (measure/package_dir.h UnpackedPackage: <root>/<PackageDigest>, for
// NVRTC's include folders and for program ops, whose builds live inside),
// kept under a byte bound: past it the least recently used folders are
// removed. A sweep brings its packages, so without a bound every package
// any sweep ever sent stays on every worker.
//
// Never removed: the package of a unit that is queued (planned) or
// running (Pin), and each device's last one (a program op's serve process
// may still run in it). Recency is this process's order of use; folders
// it has not used (another worker's of the same cache, an earlier run's)
// are older than all of those, by their modification time, which Touch
// sets, and are left alone while younger than `grace_seconds` (another
// worker process of the host may be using one). A package removed here
// and used again is unpacked again at the same path by Touch, since the
// program backend remembers where each package's folder is.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "opspec/op_definition.h"
#include "tune/status.h"

namespace tune {

class PackageCache {
 public:
  // How long a folder this process has not used is left alone after its
  // last use by any process.
  static constexpr double kDefaultGraceSeconds = 600;

  // `roots`: the folders packages are unpacked under (absent ones are
  // skipped); `max_bytes`: the bound on the bytes of all their packages.
  PackageCache(std::vector<std::string> roots, uint64_t max_bytes, double grace_seconds);

  // A unit of package `digest` is queued or running; Unpin when it ended.
  // A unit pinned twice needs one Unpin.
  void Pin(uint64_t unit_id, const std::string& digest);
  void Unpin(uint64_t unit_id);

  // Op `name`'s `package` (of digest `digest`) is about to be used by
  // device `slot`: it becomes the most recently used, and is unpacked
  // again where this cache removed it. Errors: the unpack's.
  Status Touch(size_t slot, const std::string& name, const OpPackage& package, const std::string& digest);

  struct Eviction {
    uint64_t bytes_before = 0, bytes_after = 0;
    std::vector<std::string> removed;  // folders, least recently used first
  };
  // Removes least recently used folders until the packages fit the bound
  // (or only those it may not remove are left).
  Eviction Evict();

 private:
  const std::vector<std::string> roots_;
  const uint64_t max_bytes_;
  const double grace_seconds_;
  std::mutex mu_;
  uint64_t clock_ = 0;                            // uses, in order
  std::map<std::string, uint64_t> used_;          // digest -> its last use
  std::map<uint64_t, std::string> pinned_;        // unit -> digest
  std::map<size_t, std::string> last_of_slot_;    // device -> its last digest
  std::set<std::pair<std::string, std::string>> evicted_;  // (root, digest) removed here
};

}  // namespace tune
