// TempDir: a fresh directory under gtest's temp dir, removed with all it
// holds when the object goes. Tests keep their stores, keys, bundles, caches
// and op folders there.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace tune::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tunefarm") {
    std::string tmpl = (std::filesystem::path(::testing::TempDir()) / (prefix + ".XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
    EXPECT_FALSE(path_.empty()) << "cannot create a directory like " << tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string Sub(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  // Writes `text` to `name` inside the directory, creating its folders.
  void Write(const std::string& name, const std::string& text) const {
    const std::filesystem::path file = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
  }

 private:
  std::string path_;
};

}  // namespace tune::testing
