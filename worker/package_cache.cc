#include "package_cache.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <tuple>

#include "measure/package_dir.h"

namespace tune {

namespace fs = std::filesystem;

namespace {

// A package folder's name: its PackageDigest (hex). Half-unpacked ones
// ("<digest>.tmp.<pid>.<n>") are another writer's, not the cache's.
bool IsDigestName(const std::string& name) {
  return !name.empty() && name.size() <= 128 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

uint64_t FolderBytes(const fs::path& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code e;
    if (it->is_regular_file(e) && !it->is_symlink(e)) bytes += it->file_size(e);
  }
  return bytes;
}

}  // namespace

PackageCache::PackageCache(std::vector<std::string> roots, uint64_t max_bytes, double grace_seconds)
    : roots_(std::move(roots)), max_bytes_(max_bytes), grace_seconds_(grace_seconds) {}

void PackageCache::Pin(uint64_t unit_id, const std::string& digest) {
  std::lock_guard<std::mutex> lock(mu_);
  pinned_[unit_id] = digest;
}

void PackageCache::Unpin(uint64_t unit_id) {
  std::lock_guard<std::mutex> lock(mu_);
  pinned_.erase(unit_id);
}

Status PackageCache::Touch(size_t slot, const std::string& name, const OpPackage& package, const std::string& digest) {
  std::lock_guard<std::mutex> lock(mu_);
  used_[digest] = ++clock_;
  last_of_slot_[slot] = digest;
  for (const std::string& root : roots_) {
    std::error_code ec;
    const fs::path dir = fs::path(root) / digest;
    if (evicted_.erase({root, digest})) {
      OpSpec spec;
      spec.name = name;
      spec.package = package;
      auto again = UnpackedPackage(spec, root);
      if (!again.ok()) return again.status();
    }
    // Other workers sharing the folder see it as recently used.
    if (fs::is_directory(dir, ec)) fs::last_write_time(dir, fs::file_time_type::clock::now(), ec);
  }
  return Status::OK();
}

PackageCache::Eviction PackageCache::Evict() {
  std::lock_guard<std::mutex> lock(mu_);
  struct Folder {
    std::string root, digest;
    uint64_t bytes = 0;
    uint64_t used = 0;           // this process's last use; 0: none
    fs::file_time_type mtime;
  };
  std::vector<Folder> folders;
  Eviction out;
  for (const std::string& root : roots_) {
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code e;
      if (!IsDigestName(name) || it->is_symlink(e) || !it->is_directory(e)) continue;
      Folder f{root, name, FolderBytes(it->path()), 0, fs::last_write_time(it->path(), e)};
      if (auto u = used_.find(name); u != used_.end()) f.used = u->second;
      out.bytes_before += f.bytes;
      folders.push_back(std::move(f));
    }
  }
  out.bytes_after = out.bytes_before;
  if (out.bytes_before <= max_bytes_) return out;
  std::set<std::string> keep;
  for (const auto& [unit, digest] : pinned_) keep.insert(digest);
  for (const auto& [slot, digest] : last_of_slot_) keep.insert(digest);
  // Least recently used first: folders this process never used (by age),
  // then its own in the order it used them.
  std::sort(folders.begin(), folders.end(), [](const Folder& a, const Folder& b) {
    return std::tie(a.used, a.mtime) < std::tie(b.used, b.mtime);
  });
  const auto now = fs::file_time_type::clock::now();
  for (const Folder& f : folders) {
    if (out.bytes_after <= max_bytes_) break;
    if (keep.count(f.digest)) continue;
    if (f.used == 0 && std::chrono::duration<double>(now - f.mtime).count() < grace_seconds_) continue;
    std::error_code ec;
    const fs::path dir = fs::path(f.root) / f.digest;
    fs::remove_all(dir, ec);
    if (ec) continue;
    out.bytes_after -= std::min(out.bytes_after, f.bytes);
    out.removed.push_back(dir.string());
    evicted_.insert({f.root, f.digest});
  }
  return out;
}

}  // namespace tune
