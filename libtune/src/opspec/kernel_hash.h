// Op hashes (opspec/op_definition.h, OpHash) computed once where they are asked
// for often: per config of a sweep, per batch of results, per row of a
// bundle.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/target.h"
#include "base/types.h"
#include "opspec/op_definition.h"

namespace tune {

// The op hashes of one sweep's specs, each (op, toolchain) hashed once.
// Knows a spec by its name: one memo serves a set of specs of distinct
// names (a sweep's); a spec changed under a name it has seen keeps its old
// hash. Not thread-safe.
class OpHashMemo {
 public:
  // OpHash(spec, toolchain).
  const std::string& Of(const OpSpec& spec, const std::string& toolchain);
  // OpHash(spec, device).
  const std::string& Of(const OpSpec& spec, const DeviceInfo& device) { return Of(spec, TargetOf(device).toolchain); }

 private:
  std::map<std::pair<std::string, std::string>, std::string> hashes_;  // (op, toolchain)
};

// Which spec a stored row was measured with, among several versions of its
// op (a store's packages): specs by (op, op hash) for a set of toolchains.
// Each spec's digests are computed once, not once per toolchain. Where two
// specs of an op hash alike the first given is kept. Holds pointers: the
// specs outlive it.
class SpecsByOpHash {
 public:
  SpecsByOpHash(const std::vector<const OpSpec*>& specs, const std::set<std::string>& toolchains);
  // The spec of `op` whose OpHash for one of the toolchains is `op_hash`;
  // nullptr when none is.
  const OpSpec* Find(const std::string& op, const std::string& op_hash) const;

 private:
  std::map<std::pair<std::string, std::string>, const OpSpec*> specs_;  // (op, op hash)
};

}  // namespace tune
