// The worker's cache of unpacked op packages (worker/package_cache.h): LRU
// by bytes over real folders, as the backends unpack them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "measure/package_dir.h"
#include "opspec/op_definition.h"
#include "package_cache.h"
#include "support/temp_dir.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

OpSpec Version(char c) {
  auto pkg = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
  EXPECT_TRUE(pkg.ok()) << pkg.status().message();
  OpSpec spec;
  spec.name = "synthetic";
  if (pkg.ok()) spec.package = *pkg;
  spec.package["data.bin"] = std::string(100 << 10, c);
  return spec;
}

// Past its byte bound the least recently used folders go; one a queued or
// running unit uses, and each device's last, stay whatever their age; a
// package removed and used again is unpacked again where it was.
TEST(PackageCache, OverItsByteBoundTheLeastRecentlyUsedFoldersGo) {
  testing::TempDir dir;
  const std::string root = dir.Sub("packages");
  const OpSpec a = Version('a'), b = Version('b'), c = Version('c'), d = Version('d');
  for (const OpSpec* s : {&a, &b, &c, &d}) ASSERT_TRUE(UnpackedPackage(*s, root).ok());
  auto folder = [&](const OpSpec& s) { return root + "/" + PackageDigest(s.package); };
  // Three packages' worth: one of the four must go.
  PackageCache cache({root, dir.Sub("absent")}, 3 * (105 << 10), 0);
  auto use = [&](size_t slot, const OpSpec& s) {
    ASSERT_TRUE(cache.Touch(slot, s.name, s.package, PackageDigest(s.package)).ok());
  };
  use(0, a);
  use(0, b);
  use(0, c);
  use(0, d);  // device 0's last
  cache.Pin(7, PackageDigest(a.package));  // a unit of `a` is queued
  PackageCache::Eviction e = cache.Evict();
  EXPECT_GT(e.bytes_before, e.bytes_after);
  ASSERT_EQ(e.removed.size(), 1u);
  EXPECT_EQ(e.removed[0], folder(b));  // `a` is older but pinned
  EXPECT_TRUE(fs::exists(folder(a)));
  EXPECT_TRUE(fs::exists(folder(c)));
  EXPECT_TRUE(fs::exists(folder(d)));
  // Under the bound now: nothing more goes.
  EXPECT_TRUE(cache.Evict().removed.empty());
  // `b` used again: back where it was (a program backend remembers the path).
  use(1, b);
  EXPECT_TRUE(fs::exists(folder(b) + "/op.toml"));
  cache.Unpin(7);
  // Now `a` is the least recently used and unpinned; `b` and `d` are the
  // devices' last.
  e = cache.Evict();
  ASSERT_EQ(e.removed.size(), 1u);
  EXPECT_EQ(e.removed[0], folder(a));
  EXPECT_LE(e.bytes_after, uint64_t(3 * (105 << 10)));
}

}  // namespace
}  // namespace tune
