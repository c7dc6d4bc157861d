#include "measure/package_dir.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace tune {

namespace fs = std::filesystem;

Result<std::string> UnpackedPackage(const OpSpec& spec, const std::string& root) {
  if (root.empty()) return Status::Error("cannot unpack op '" + spec.name + "': no folder of this user's to unpack it in");
  const fs::path dir = fs::path(root) / PackageDigest(spec.package);
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return dir.string();
  const fs::path tmp = dir.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(std::random_device{}());
  for (const auto& [name, text] : spec.package) {
    const fs::path file = tmp / name;  // names are checked plain relative ones (op_confine.h)
    fs::create_directories(file.parent_path(), ec);
    std::ofstream out(file, std::ios::binary);
    out << text;
    out.close();
    if (text.rfind("#!", 0) == 0 || text.rfind("\x7f" "ELF", 0) == 0)
      fs::permissions(file, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add, ec);
    if (ec || !out) {
      fs::remove_all(tmp, ec);
      return Status::Error("cannot unpack op '" + spec.name + "' into " + tmp.string());
    }
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    // Another process or thread of this host unpacked it first: theirs serves.
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    if (!fs::is_directory(dir, ignored))
      return Status::Error("cannot unpack op '" + spec.name + "' into " + dir.string() + ": " + ec.message());
  }
  return dir.string();
}

}  // namespace tune
