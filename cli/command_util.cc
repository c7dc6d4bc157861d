#include "command_util.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include "client.h"
#include "progress.h"
#include "base/clock.h"
#include "base/text.h"
#include "publish/signing.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

constexpr double kCoordinatorPatienceSeconds = 120;

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

int Fail(const std::string& line) {
  std::fprintf(stderr, "tunefarm: %s\n", line.c_str());
  return 1;
}

int Usage(const std::string& line) {
  std::fprintf(stderr, "tunefarm: %s\n", line.c_str());
  return kExitUsage;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Status FinishWorkerArgs(WorkerArgs& args) {
  args.opts.sim_models = SplitList(args.sim_models);
  auto roots = ParseIncludeRoots(args.include_roots);
  if (!roots.ok()) return Status::Error("--include-root: " + roots.status().message());
  args.opts.include_roots = *roots;
  args.opts.cuda_devices.clear();
  for (const auto& d : SplitList(args.devices)) {
    try {
      args.opts.cuda_devices.push_back(std::stoi(d));
    } catch (const std::exception&) {
      return Status::Error("--devices: '" + d + "' is not a device ordinal");
    }
  }
  return Status::OK();
}

std::string DefaultOpsDir() {
  std::error_code ec;
  const std::filesystem::path above = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  if (!ec && std::filesystem::is_directory(above / "share" / "tunefarm" / "ops", ec))
    return (above / "share" / "tunefarm" / "ops").string();
  return "ops";
}

Result<SweepProgress> WaitForSweep(const ClientArgs& c, const std::string& sweep_id, bool quiet,
                                   const std::atomic<bool>* stop, double poll_seconds, double timeout_seconds) {
  const double start = NowSeconds();
  const std::string goes_on = "sweep " + sweep_id + " goes on at the coordinator: `tunefarm status " + sweep_id +
                              " --wait` waits again, `tunefarm cancel " + sweep_id + "` stops it";
  bool told_waiting = false;
  double last_answer = start;
  ProgressLine progress(stderr);
  SweepProgress last;
  std::optional<CoordinatorClient> client;
  while (!stop->load()) {
    if (!client) client.emplace(c.endpoint, 5, c.curve_secret_key, c.coordinator_key);
    auto reply = client->Call(SweepStatusRequest{sweep_id});
    if (!reply.ok()) {
      // A fresh socket next: a restarted coordinator must not inherit a
      // request the old one never answered.
      client.reset();
      // The coordinator may be restarting; sweeps survive that.
      if (NowSeconds() - last_answer > kCoordinatorPatienceSeconds) return reply.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    last_answer = NowSeconds();
    auto* status = std::get_if<SweepStatus>(&*reply);
    if (!status || status->sweeps.empty()) return Status::Error("coordinator sent no status");
    last = status->sweeps.front();
    if (last.state != "running") {
      if (!quiet) progress.Finish(last, NowSeconds() - start);
      return last;
    }
    if (!last.waiting_for.empty() && !told_waiting) {
      told_waiting = true;
      std::fprintf(stderr, "\nwaiting for %s: no live worker has it (the sweep waits for one to join%s)\n",
                   Join(last.waiting_for, ", ").c_str(), timeout_seconds > 0 ? "" : "; --timeout bounds the wait");
    }
    if (!quiet) progress.Update(last, NowSeconds() - start);
    if (timeout_seconds > 0 && NowSeconds() - start >= timeout_seconds)
      return Status::Error("still running after " + FormatDuration(timeout_seconds) + ": " + goes_on);
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_seconds));
  }
  return Status::Error("interrupted: " + goes_on);
}

Status WriteBundle(const Bundle& b, const std::string& path, const std::string& sign_key, bool unsigned_bundle) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  if (unsigned_bundle) {
    std::fprintf(stderr, "bundle %s.tfb is unsigned: deployments (the runtime, launcher and Python package) refuse it\n",
                 path.c_str());
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
  if (created) std::fprintf(stderr, "created the signing key %s (keep it secret)\n", key_path.c_str());
  std::fprintf(stderr, "signed with key %s; deployments trust %s.pub (key id %s)\n", key_path.c_str(),
               key_path.c_str(), key->public_key().Id().c_str());
  return Status::OK();
}

// Reports open the store read-only: they take no lock, so they work while a
// coordinator owns it.
Result<std::unique_ptr<ResultStore>> OpenStore(const std::string& path) {
  if (!std::filesystem::exists(path)) return Status::Error("store " + path + " does not exist");
  return ResultStore::OpenReadOnly(path);
}

void AddFormatOption(CLI::App* app, std::string* format) {
  app->add_option("--format", *format, "table, csv or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json"}));
  app->add_flag_callback("--json", [format] { *format = "json"; }, "Same as --format json")->group("");
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
