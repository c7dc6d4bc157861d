// make_test_bundle OUT_DIR [GPU_MODEL...]
//
// Writes what deploy_gemm needs to run without a farm at hand:
//   OUT_DIR/farm.key, farm.pub     an Ed25519 key pair (kept when present)
//   OUT_DIR/gemm-tuned.tfb/.json   gemm_sm90 f16 tuned at 1024^3 and 4096^3 for
//                                  each GPU_MODEL (default h100-80gb-hbm3),
//                                  plus the op defaults of gemm and gemm_sm90
//   OUT_DIR/gemm-other-gpu.tfb     the same for "gh200-480gb" only (another
//                                  family), so that an H100 or H200 gets the
//                                  op default
//
// The configs and figures are those of the H100 run recorded in
// bench/runs/h100-2026-11-21 (best_sizes_1.txt); the defaults are copied from
// ops/*/op.toml. It is a fixture for the example, not a farm result: real
// bundles come from `tunefarm publish`.
//
// Built only inside the tunefarm tree: it uses tune/bundle.h and
// tune/signing.h, which the installed runtime package does not ship.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tune/bundle.h"
#include "tune/signing.h"

namespace {

tune::Config SmConfig(int bn, int wg, int mt, int stages, int group_m, int minb) {
  // Axis order of ops/gemm_sm90/op.toml.
  return tune::Config{{{"BN", bn}, {"WG", wg}, {"MT", mt}, {"STAGES", stages}, {"GROUP_M", group_m}, {"MINB", minb}}};
}

tune::BundleEntry Entry(const std::string& model, int64_t size, tune::Config config, double median_us) {
  tune::BundleEntry e;
  e.op = "gemm_sm90";
  e.dtype = "f16";
  e.gpu_model = model;
  e.shape.dims = {{"M", size}, {"N", size}, {"K", size}};
  e.config_id = config.Id();
  e.config = std::move(config);
  e.kernel_hash = "example";  // not a measured kernel: no real hash to claim
  e.median_us = median_us;
  e.samples = 5;
  e.backend = "cuda";
  return e;
}

tune::Bundle MakeBundle(const std::string& name, const std::vector<std::string>& models) {
  tune::Bundle b;
  b.name = name;
  b.farm_version = TUNEFARM_VERSION;
  b.created_unix = 1763683200;  // fixed, so that the fixture is reproducible
  b.defaults["gemm_sm90"] = SmConfig(256, 2, 1, 4, 8, 1);
  b.defaults["gemm"] = tune::Config{
      {{"BM", 128}, {"BN", 256}, {"BK", 64}, {"WM", 2}, {"WN", 4}, {"STAGES", 3}, {"GROUP_M", 8}}};
  for (const auto& model : models) {
    b.entries.push_back(Entry(model, 1024, SmConfig(64, 1, 1, 6, 1, 1), 11.17));
    b.entries.push_back(Entry(model, 4096, SmConfig(256, 2, 1, 4, 8, 1), 215.97));
  }
  return b;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [GPU_MODEL...]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  ::mkdir(dir.c_str(), 0755);
  const std::string secret = dir + "/farm.key", pub = dir + "/farm.pub";
  if (!Exists(secret)) {
    auto made = tune::GenerateKeyPairFiles(secret, pub);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().message().c_str());
      return 1;
    }
  }
  auto key = tune::ReadSecretKeyFile(secret);
  if (!key.ok()) {
    std::fprintf(stderr, "%s\n", key.status().message().c_str());
    return 1;
  }
  std::vector<std::string> models;
  for (int i = 2; i < argc; ++i)
    if (std::find(models.begin(), models.end(), argv[i]) == models.end()) models.push_back(argv[i]);
  if (models.empty()) models.push_back("h100-80gb-hbm3");

  const struct {
    std::string file;
    tune::Bundle bundle;
  } outputs[] = {
      {dir + "/gemm-tuned", MakeBundle("deploy-gemm-example", models)},
      {dir + "/gemm-other-gpu", MakeBundle("deploy-gemm-example-other-gpu", {"gh200-480gb"})},
  };
  for (const auto& out : outputs) {
    tune::Status s = tune::WriteSignedBundleFiles(out.bundle, *key, out.file);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
    std::printf("%s.tfb: %zu entries, signed by key %s\n", out.file.c_str(), out.bundle.entries.size(),
                key->public_key().Id().c_str());
  }
  std::printf("trusted key: %s\n", pub.c_str());
  return 0;
}
