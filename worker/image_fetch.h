// A worker taking stored kernel images from its coordinator instead of
// compiling (ImageRequest / ImageReply, protocol/protocol.h): before a unit's
// configs compile, the worker asks for the cubins of those it lacks; each
// image that comes back is checked here before it stands in for a compile,
// and kept in the worker's image cache so that it is asked for once.
//
// The coordinator serves only images two worker keys sent, but a worker
// trusts no peer: an image must be exactly what was asked (its key), hash
// to its sha256, be a cubin for the device's architecture and define the
// op's kernel. A device still checks every kernel against the op's
// reference before timing it, fetched or compiled.
//
// Thread safety: free functions are pure; FetchedImageCache is safe from any
// number of threads and processes (entries are written whole, then renamed).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocol/protocol.h"
#include "tune/status.h"

namespace tune {

// How long a device thread waits for the coordinator's ImageReply before it
// compiles the configs itself.
inline constexpr double kImageFetchWaitSeconds = 5.0;

// OK when `got` may stand in for compiling `want`: its key fields are the
// want's, its image at most kMaxKernelImageBytes hashes to its sha256, is a
// cubin for want.arch (CheckCubin) and defines each of `entries` (the op's
// kernel, CheckCubinEntries). The error says which check failed.
Status CheckFetchedImage(const KernelImage& got, const ImageWant& want, const std::vector<std::string>& entries);

// What a reply brought for `wants`: the images that pass CheckFetchedImage,
// by the want's Key(), and one line for each image refused (an image no
// want asked for, one that fails a check, a second image of a key). Wants
// absent from `good` are compiled.
struct FetchedImages {
  std::map<std::string, KernelImage> good;
  std::vector<std::string> refused;
};
FetchedImages TakeFetchedImages(const ImageReply& reply, const std::vector<ImageWant>& wants,
                                const std::vector<std::string>& entries);

// Images taken from the coordinator, on disk under a folder of the worker's
// cubin cache: <dir>/<kernel hash>/<config id>-<dtype>-<arch>.cubin. Each is
// checked again (CheckFetchedImage without its sha256) when read: a torn or
// altered file is a miss.
class FetchedImageCache {
 public:
  explicit FetchedImageCache(std::string dir) : dir_(std::move(dir)) {}
  // The cubin of `want`, nullopt when the cache has none that checks.
  std::optional<std::string> Get(const ImageWant& want, const std::vector<std::string>& entries) const;
  // Keeps `image` (checked already) for `want`; a cache that cannot be
  // written is not an error (the image is asked for again next time).
  void Put(const ImageWant& want, const std::string& image) const;

 private:
  std::string PathOf(const ImageWant& want) const;
  std::string dir_;
};

}  // namespace tune
