#include "farm_access.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "base/log.h"
#include "bundle/signing.h"
#include "remote_store.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

// The key bundles are signed with when no --sign-key is given:
// $TUNEFARM_SIGN_KEY, else $XDG_CONFIG_HOME/tunefarm/bundle.key (default
// ~/.config), made (with its .pub) the first time it is needed.
Result<std::string> DefaultSignKey(bool* created) {
  *created = false;
  std::string path;
  if (const char* env = std::getenv("TUNEFARM_SIGN_KEY"); env && *env) {
    path = env;
  } else {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    if ((!xdg || !*xdg) && (!home || !*home))
      return Status::InvalidArgument("no HOME to keep a signing key in: give --sign-key KEY or --unsigned");
    path = (xdg && *xdg ? std::string(xdg) : std::string(home) + "/.config") + "/tunefarm/bundle.key";
  }
  if (std::filesystem::exists(path)) return path;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  auto pub = GenerateKeyPairFiles(path, path + ".pub");
  if (!pub.ok()) return pub.status();
  *created = true;
  return path;
}

}  // namespace

Result<std::unique_ptr<ResultStore>> OpenStoreOf(const std::string& path, const ClientArgs& remote,
                                                 const std::vector<ResultFilter>& filters) {
  if (remote.endpoint.empty()) return OpenStore(path);
  CoordinatorClient client(remote, kStoreReadTimeoutSeconds);
  return FetchStore(client, filters, !remote.curve_secret_key.empty());
}

Status WriteBundle(const Bundle& b, const std::string& path, const std::string& sign_key, bool unsigned_bundle) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  if (unsigned_bundle) {
    log::Note("publish", "bundle " + path + ".tfb is unsigned: deployments (the runtime, launcher and Python "
                                            "package) refuse it");
    return WriteBundleFiles(b, path);
  }
  std::string key_path = sign_key;
  bool created = false;
  if (key_path.empty()) {
    auto def = DefaultSignKey(&created);
    if (!def.ok()) return def.status();
    key_path = *def;
  }
  auto key = ReadSecretKeyFile(key_path);
  if (!key.ok()) return key.status();
  TUNE_RETURN_IF_ERROR(WriteSignedBundleFiles(b, *key, path));
  if (created) log::Note("publish", "created the signing key " + key_path + " (keep it secret)");
  log::Note("publish", "signed with key " + key_path + "; deployments trust " + key_path + ".pub (key id " +
                           key->public_key().Id() + ")");
  return Status::OK();
}

// Reports open the store read-only: they take no lock, so they work while a
// coordinator owns it.
Result<std::unique_ptr<ResultStore>> OpenStore(const std::string& path) {
  if (!std::filesystem::exists(path)) return Status::Error("store " + path + " does not exist");
  return ResultStore::OpenReadOnly(path);
}

// One worker's image alone is not trusted: where this host has NVRTC, it
// compiles each shipped config again and the images must agree.
PublishOptions PublishOptionsHere(bool kernels) {
  PublishOptions o;
  o.kernels = kernels;
#ifdef TUNEFARM_WITH_CUDA
  o.recompile = [](const OpSpec& spec, const std::string& dtype, const Config& config, const std::string& arch,
                   const std::string& kernel_hash) -> Result<std::string> {
    // No cache: a cached image would be checked against itself.
    CompiledKernel ck = CompileConfig(spec, dtype, config, arch, "");
    if (ck.kernel_hash != kernel_hash)
      return Status::Error("this host's NVRTC " + NvrtcVersionString() + " compiles another kernel than the measured one");
    if (ck.failure != FailureClass::kNone) return Status::Error("its recompile here failed: " + ck.failure_message);
    return ck.image;
  };
#endif
  return o;
}

}  // namespace tune
