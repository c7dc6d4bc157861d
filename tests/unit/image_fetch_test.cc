// A worker's check of the images its coordinator serves (worker/image_fetch.h):
// only the image asked for, whole, of the device's architecture and with the
// op's kernel stands in for a compile; every other goes to the compiler.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "image_fetch.h"
#include "support/cubin.h"
#include "support/temp_dir.h"

namespace tune {
namespace {

constexpr char kHash[] = "0123456789abcdef0123456789abcdef";

ImageWant Want(const std::string& config = "TILE=32", const std::string& arch = "sm_90") {
  return ImageWant{kHash, config, "f16", arch};
}

KernelImage Image(const ImageWant& w, const std::string& cubin_arch = "", const std::string& entry = "gemm") {
  KernelImage k{w.kernel_hash, w.config_id, w.dtype, w.arch, "",
                testing::SyntheticCubin(cubin_arch.empty() ? w.arch : cubin_arch, entry, w.config_id), {}, {}};
  k.sha256 = Sha256Hex(k.image);
  return k;
}

const std::vector<std::string> kEntries = {"gemm"};

TEST(ImageFetch, TheImageAskedForPasses) {
  EXPECT_TRUE(CheckFetchedImage(Image(Want()), Want(), kEntries).ok());
}

TEST(ImageFetch, CorruptOrForeignImagesAreRefused) {
  const ImageWant want = Want();
  KernelImage bad_sha = Image(want);
  bad_sha.image[bad_sha.image.size() - 1] ^= 1;  // a changed byte: the hash no longer matches
  EXPECT_FALSE(CheckFetchedImage(bad_sha, want, kEntries).ok());

  KernelImage not_elf = Image(want);
  not_elf.image = std::string(4096, 'x');
  not_elf.sha256 = Sha256Hex(not_elf.image);
  EXPECT_FALSE(CheckFetchedImage(not_elf, want, kEntries).ok());

  // Named sm_90, built for sm_80.
  const KernelImage wrong_arch = Image(want, "sm_80");
  const Status arch = CheckFetchedImage(wrong_arch, want, kEntries);
  EXPECT_FALSE(arch.ok());

  // Another config's (or kernel's, dtype's, arch's) image, whole and valid.
  for (const ImageWant& other : {Want("TILE=64"), ImageWant{"ffffffffffffffffffffffffffffffff", "TILE=32", "f16", "sm_90"},
                                 ImageWant{kHash, "TILE=32", "f32", "sm_90"}, Want("TILE=32", "sm_90a")}) {
    const Status st = CheckFetchedImage(Image(other), want, kEntries);
    EXPECT_FALSE(st.ok()) << other.Key();
    EXPECT_NE(st.message().find("was asked for"), std::string::npos) << st.message();
  }

  // A cubin without the op's kernel.
  EXPECT_FALSE(CheckFetchedImage(Image(want, "", "other_kernel"), want, kEntries).ok());
}

TEST(ImageFetch, AReplyYieldsOnlyGoodImagesOfWantsTheRestCompile) {
  const std::vector<ImageWant> wants = {Want("TILE=32"), Want("TILE=64"), Want("TILE=128")};
  ImageReply reply;
  reply.images.push_back(Image(wants[0]));           // good
  KernelImage corrupt = Image(wants[1]);
  corrupt.sha256 = Sha256Hex("something else");
  reply.images.push_back(corrupt);                   // refused: compiled
  reply.images.push_back(Image(Want("TILE=256")));   // not asked for
  reply.images.push_back(Image(wants[0]));           // twice
  const FetchedImages got = TakeFetchedImages(reply, wants, kEntries);
  ASSERT_EQ(got.good.size(), 1u);
  EXPECT_TRUE(got.good.count(wants[0].Key()));
  EXPECT_FALSE(got.good.count(wants[1].Key()));
  EXPECT_FALSE(got.good.count(wants[2].Key()));
  EXPECT_EQ(got.refused.size(), 3u);
}

TEST(ImageFetch, TheCacheKeepsCheckedImagesAndMissesAlteredOnes) {
  testing::TempDir dir;
  FetchedImageCache cache(dir.Sub("fetched"));
  const ImageWant want = Want();
  EXPECT_FALSE(cache.Get(want, kEntries).has_value());
  const KernelImage k = Image(want);
  cache.Put(want, k.image);
  auto got = cache.Get(want, kEntries);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, k.image);
  // The entry of another arch's want is no hit.
  EXPECT_FALSE(cache.Get(Want("TILE=32", "sm_90a"), kEntries).has_value());
  // A file that is no cubin for the arch any more: a miss (compiled again).
  const std::string path = dir.Sub("fetched") + "/" + kHash + "/TILE=32-f16-sm_90.cubin";
  ASSERT_TRUE(std::filesystem::exists(path));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "torn";
  EXPECT_FALSE(cache.Get(want, kEntries).has_value());
  // A want that would leave the folder is never read or written.
  ImageWant escape = want;
  escape.config_id = "../x";
  cache.Put(escape, k.image);
  EXPECT_FALSE(cache.Get(escape, kEntries).has_value());
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("fetched") + "/x-f16-sm_90.cubin"));
}

}  // namespace
}  // namespace tune
