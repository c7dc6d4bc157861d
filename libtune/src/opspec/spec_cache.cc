#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "opspec/op_definition.h"

namespace tune {

namespace {

struct SharedSpecs {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const OpSpec>> specs;  // (digest, origin)
  std::deque<std::pair<std::pair<std::string, std::string>, size_t>> order;              // oldest first, bytes
  size_t bytes = 0;
};

size_t PackageBytes(const OpPackage& package) {
  size_t n = 0;
  for (const auto& [name, body] : package) n += name.size() + body.size();
  return n;
}

}  // namespace

Result<std::shared_ptr<const OpSpec>> SharedOpSpec(const OpPackage& package, const std::string& origin) {
  static SharedSpecs* shared = new SharedSpecs;  // never destroyed: used until the process ends
  std::pair<std::string, std::string> key{PackageDigest(package), origin};
  {
    std::lock_guard<std::mutex> lock(shared->mu);
    if (auto it = shared->specs.find(key); it != shared->specs.end()) return it->second;
  }
  // Parsed outside the lock: two threads may parse one package at once, and
  // the first to finish is kept.
  auto spec = ParseOpSpec(package, origin);
  if (!spec.ok()) return spec.status();
  auto parsed = std::make_shared<const OpSpec>(std::move(spec).value());
  const size_t bytes = PackageBytes(package);
  std::lock_guard<std::mutex> lock(shared->mu);
  auto [it, added] = shared->specs.emplace(key, parsed);
  if (!added) return it->second;
  shared->order.emplace_back(std::move(key), bytes);
  shared->bytes += bytes;
  while (shared->bytes > kMaxSharedSpecBytes && shared->order.size() > 1) {
    shared->bytes -= shared->order.front().second;
    shared->specs.erase(shared->order.front().first);
    shared->order.pop_front();
  }
  return parsed;
}

}  // namespace tune
