#include "image_fetch.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <system_error>

#include "base/env.h"

namespace tune {

namespace fs = std::filesystem;

Status CheckFetchedImage(const KernelImage& got, const ImageWant& want, const std::vector<std::string>& entries) {
  if (got.kernel_hash != want.kernel_hash || got.config_id != want.config_id || got.dtype != want.dtype ||
      got.arch != want.arch)
    return Status::InvalidArgument("image " + got.Key() + " where " + want.Key() + " was asked for");
  // Size, sha256 of the bytes, a cubin for the asked arch.
  if (Status st = CheckKernelImage(got); !st.ok()) return st;
  if (Status st = CheckCubinEntries(got.image, entries); !st.ok()) return st.WithPrefix("image " + got.Key() + ": ");
  return Status::OK();
}

FetchedImages TakeFetchedImages(const ImageReply& reply, const std::vector<ImageWant>& wants,
                                const std::vector<std::string>& entries) {
  std::map<std::string, const ImageWant*> asked;
  for (const ImageWant& w : wants) asked.emplace(w.Key(), &w);
  FetchedImages out;
  for (const KernelImage& k : reply.images) {
    const auto want = asked.find(k.Key());
    if (want == asked.end()) {
      out.refused.push_back("image " + k.Key() + " that was not asked for");
      continue;
    }
    if (out.good.count(k.Key())) {
      out.refused.push_back("image " + k.Key() + " twice in one reply");
      continue;
    }
    if (Status st = CheckFetchedImage(k, *want->second, entries); !st.ok()) {
      out.refused.push_back(st.message());
      continue;
    }
    out.good.emplace(k.Key(), k);
  }
  return out;
}

std::string FetchedImageCache::PathOf(const ImageWant& want) const {
  // The want's fields are the worker's own (its kernel hash, the unit's
  // config ids); a field that could leave the folder is not cached.
  for (const std::string* v : {&want.kernel_hash, &want.config_id, &want.dtype, &want.arch})
    if (v->empty() || *v == "." || *v == ".." || v->find('/') != std::string::npos || v->find('\0') != std::string::npos)
      return "";
  if (dir_.empty()) return "";
  return dir_ + "/" + want.kernel_hash + "/" + want.config_id + "-" + want.dtype + "-" + want.arch + ".cubin";
}

std::optional<std::string> FetchedImageCache::Get(const ImageWant& want, const std::vector<std::string>& entries) const {
  const std::string path = PathOf(want);
  if (path.empty()) return std::nullopt;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size == 0 || size > kMaxKernelImageBytes) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  KernelImage k{want.kernel_hash, want.config_id, want.dtype, want.arch, "",
                std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), {}, {}};
  k.sha256 = Sha256Hex(k.image);  // the file is checked as a cubin, not against a hash it does not keep
  if (!CheckFetchedImage(k, want, entries).ok()) return std::nullopt;
  return std::move(k.image);
}

void FetchedImageCache::Put(const ImageWant& want, const std::string& image) const {
  const std::string path = PathOf(want);
  if (path.empty()) return;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  (void)Env::Default()->WriteFileAtomically(path, image);  // a cache that cannot be written: fetched again next time
}

}  // namespace tune
