#include "local_farm.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

#include "base/backend_kinds.h"
#include "base/log.h"
#include "coordinator_client.h"
#include "base/text.h"

namespace tune {

namespace {

// The coordinator socket's name inside the farm's folder.
constexpr char kSocketName[] = "coordinator";

// A folder that only this user may enter, for the coordinator's socket: a
// fresh mkdtemp folder (mode 0700) under $XDG_RUNTIME_DIR (when it is an
// absolute folder of this user that nobody else may write) or /tmp. Its
// mode and owner are checked after it is made: connect(2) on a Unix socket
// needs search permission on every folder of its path, so another user's
// connect fails with EACCES and no client of theirs reaches the farm.
Result<std::string> MakePrivateSocketFolder() {
  std::vector<std::string> bases;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && xdg[0] == '/') {
    struct stat st {};
    if (::stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 022) == 0)
      bases.emplace_back(xdg);
  }
  bases.emplace_back("/tmp");
  std::string why;
  for (const std::string& base : bases) {
    std::string folder = base + "/tunefarm-local-XXXXXX";
    // A Unix socket's path must fit sockaddr_un (108 bytes with its NUL).
    if (folder.size() + 1 + sizeof(kSocketName) > sizeof(sockaddr_un{}.sun_path)) {
      why = base + ": path too long for a Unix socket";
      continue;
    }
    if (!::mkdtemp(folder.data())) {
      why = base + ": " + std::strerror(errno);
      continue;
    }
    struct stat st {};
    if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
        (st.st_mode & 0777) != 0700) {
      ::rmdir(folder.c_str());
      why = folder + ": not a folder of mode 0700 owned by this user";
      continue;
    }
    return folder;
  }
  return Status::Error("local farm: cannot make a private folder for the coordinator's socket (" + why + ")");
}

}  // namespace

Result<std::unique_ptr<LocalFarm>> LocalFarm::Start(const LocalFarmOptions& opts) {
  std::unique_ptr<LocalFarm> farm(new LocalFarm());
  // Workers first: their backend decides what the farm measures.
  WorkerOptions wopts = opts.worker;
  auto first = std::make_unique<Worker>(wopts);
  Status st = first->Start();
  // No silent simulation: without a GPU, auto fails (the worker's line
  // says how to ask for sim).
  if (!st.ok()) return st;
  farm->simulated_ = IsSimulatedBackend(first->devices().front().backend);
  farm->workers_.push_back(std::move(first));
  for (unsigned i = 1; farm->simulated_ && i < opts.sim_workers; ++i) {
    WorkerOptions o = wopts;
    o.name = wopts.name.empty() ? "" : wopts.name + "-" + std::to_string(i);
    farm->workers_.push_back(std::make_unique<Worker>(o));
    TUNE_RETURN_IF_ERROR(farm->workers_.back()->Start());
  }
  for (const auto& d : farm->devices()) {
    const bool sim = IsSimulatedBackend(d.backend);
    // Its power limit labels its energy figures (docs/timing.md, "Energy").
    const std::string limit = d.power_limit_w > 0 ? Fmt(", power limit %.0f W", d.power_limit_w) : "";
    if (log::WritesJson())
      log::Info("tune", "device", {{"index", d.index}, {"name", d.name}, {"gpu_model", d.model}, {"simulated", sim},
                                   {"power_limit_w", d.power_limit_w}});
    else
      std::fprintf(stderr, "tunefarm: device %d %s (%s%s)%s\n", d.index, d.name.c_str(), d.model.c_str(),
                   limit.c_str(), sim ? " [SIMULATED]" : "");
  }
  // The farm is private to this process: its coordinator listens on a Unix
  // socket in a folder only this user can enter, never on a TCP port that
  // any local user could reach (and submit program ops to, or pose as its
  // workers on). No HTTP status port either (http_port stays off).
  auto folder = MakePrivateSocketFolder();
  if (!folder.ok()) return folder.status();
  farm->socket_folder_ = *folder;
  CoordinatorOptions copts;
  copts.endpoint = "ipc://" + *folder + "/" + kSocketName;
  copts.store_path = opts.store;
  copts.scheduler.refine_within = opts.worker.timing.refine_within;
  copts.scheduler.max_raw_configs = opts.max_raw_configs;
  copts.scheduler.search_in_flight = opts.search_in_flight;
  farm->coordinator_ = std::make_unique<Coordinator>(copts);
  TUNE_RETURN_IF_ERROR(farm->coordinator_->Start());
  return farm;
}

LocalFarm::~LocalFarm() { Stop(); }

Result<SweepProgress> LocalFarm::Run(const SweepSubmit& sweep, const WaitFn& wait) {
  const std::string endpoint = coordinator_->bound_endpoint();
  threads_.emplace_back([this] { (void)coordinator_->Run(&stop_); });
  CoordinatorClient client(endpoint);
  auto reply = client.Call(sweep);
  StartWorkers(endpoint);
  if (!reply.ok()) return reply.status();
  const auto* accepted = std::get_if<SweepAccepted>(&*reply);
  if (!accepted) {
    const auto* error = std::get_if<ErrorReply>(&*reply);
    return Status::Error(error ? error->message : "coordinator sent an unexpected reply");
  }
  return wait(endpoint, accepted->sweep_id);
}

Result<std::string> LocalFarm::KeepModelsHere(SweepSubmit* sweep) const {
  const std::set<std::string> here = models();
  std::vector<std::string> kept, lacking;
  for (const std::string& m : sweep->gpu_models) {
    if (m == "*" || here.count(m)) kept.push_back(m);
    else lacking.push_back(m);
  }
  if (lacking.empty()) return std::string();
  if (kept.empty())
    return Status::InvalidArgument("the sweep's gpus (" + Join(lacking, ", ") + ") are not on this host (it has " +
                                   Join({here.begin(), here.end()}, ", ") +
                                   "): measure them on a farm that has them (tunefarm submit), or name this host's "
                                   "models (or \"*\") in its gpus");
  sweep->gpu_models = kept;
  return "this host has no " + Join(lacking, ", ") + " (named in the sweep's gpus): measuring on " + Join(kept, ", ") +
         " only";
}

void LocalFarm::Serve() {
  threads_.emplace_back([this] { (void)coordinator_->Run(&stop_); });
  StartWorkers(endpoint());
}

void LocalFarm::StartWorkers(const std::string& endpoint) {
  for (auto& w : workers_) {
    w->set_endpoint(endpoint);
    threads_.emplace_back([this, worker = w.get()] { (void)worker->Run(&stop_); });
  }
}

void LocalFarm::Stop() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
  // With the socket's folder gone nobody can connect again; the socket
  // itself closes with the coordinator.
  if (!socket_folder_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(socket_folder_, ec);
    if (ec) std::fprintf(stderr, "tunefarm: cannot remove %s: %s\n", socket_folder_.c_str(), ec.message().c_str());
    socket_folder_.clear();
  }
}

std::vector<DeviceInfo> LocalFarm::devices() const {
  std::vector<DeviceInfo> out;
  for (const auto& w : workers_) {
    for (const auto& d : w->devices()) out.push_back(d);
  }
  return out;
}

std::set<std::string> LocalFarm::models() const {
  std::set<std::string> out;
  for (const auto& d : devices()) out.insert(d.model);
  return out;
}

WorkerStats LocalFarm::stats() const {
  WorkerStats total;
  for (const auto& w : workers_) total += w->stats();
  return total;
}

}  // namespace tune
