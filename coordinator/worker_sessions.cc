#include "worker_sessions.h"

#include <cmath>

#include "base/backend_kinds.h"
#include "base/limits.h"
#include "wire/liveness.h"
#include "coordinator_parts.h"

namespace tune {
namespace {

// Devices a hello may name: a host with more GPUs than this is no farm host.
constexpr size_t kMaxDevicesPerWorker = 64;

}  // namespace

Status CheckDevices(const std::vector<DeviceInfo>& devices) {
  if (devices.size() > kMaxDevicesPerWorker) {
    return Status::Error(std::to_string(devices.size()) + " devices, more than " + std::to_string(kMaxDevicesPerWorker));
  }
  std::set<int> indices;
  for (const auto& d : devices) {
    const std::string where = "device " + std::to_string(d.index) + ": ";
    if (!indices.insert(d.index).second) return Status::Error(where + "index given twice");
    if (d.model.empty() || d.model.size() > 64 ||
        d.model.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
      return Status::Error(where + "model '" + d.model + "' is not a model name ([a-z0-9-], 1 to 64)");
    }
    if (!FindBackendKind(d.backend))
      return Status::Error(where + "unknown backend '" + d.backend + "' (" + BackendNamesText() + ")");
    if (!std::isfinite(d.power_limit_w) || d.power_limit_w < 0 || d.power_limit_w > kMaxPowerW)
      return Status::Error(where + "power limit " + std::to_string(d.power_limit_w) + " W is not a power (0 to " +
                           std::to_string(int(kMaxPowerW)) + ")");
  }
  return Status::OK();
}

const DeviceInfo* WorkerSession::Device(int index) const {
  const DeviceInfo* dev = nullptr;
  for (const auto& d : devices) {
    if (d.index == index) dev = &d;
  }
  return dev;
}

WorkerSession& WorkerSessions::Start(const std::string& identity, const Hello& hello, const std::string& key,
                                     double now) {
  Drop(identity);
  WorkerSession s;
  s.name = hello.worker_name;
  s.key = key;
  s.devices = hello.devices;
  s.builder_archs = hello.builder_archs;
  s.builder_toolchain = hello.builder_toolchain;
  s.last_seen = now;
  return sessions_[identity] = std::move(s);
}

WorkerSession* WorkerSessions::Heard(const std::string& identity, double now) {
  WorkerSession* s = Find(identity);
  if (s) s->last_seen = now;
  return s;
}

WorkerSession* WorkerSessions::Find(const std::string& identity) {
  auto it = sessions_.find(identity);
  return it == sessions_.end() ? nullptr : &it->second;
}

const WorkerSession* WorkerSessions::Find(const std::string& identity) const {
  auto it = sessions_.find(identity);
  return it == sessions_.end() ? nullptr : &it->second;
}

void WorkerSessions::Serve(WorkerSession& session, const DeviceInfo& device) {
  if (session.serving.insert(device.index).second) scheduler_->AddDevice(device, env_->NowUnixSeconds());
}

void WorkerSessions::Drop(const std::string& identity) {
  auto it = sessions_.find(identity);
  if (it == sessions_.end()) return;
  for (const auto& d : it->second.devices) {
    if (it->second.serving.count(d.index)) scheduler_->RemoveDevice(d.model);
  }
  sessions_.erase(it);
  scheduler_->DropWorker(identity, env_->NowUnixSeconds());
}

void WorkerSessions::NoteSent(const std::string& identity, double now) {
  if (WorkerSession* s = Find(identity)) s->last_sent = now;
}

void WorkerSessions::NoteClockSkew(const std::string& identity, double skew) {
  WorkerSession* s = Find(identity);
  if (!s) return;
  s->clock_skew_seconds = skew;
  if (std::abs(skew) <= kClockSkewWarnSeconds || s->told_skew) return;
  s->told_skew = true;
  CoordinatorLog(log::Level::kWarn, "a worker's clock is off ours: its rows are stored with our time",
                 {{"worker", s->name}, {"skew_seconds", skew}});
}

bool WorkerSessions::NoteViolation(const std::string& identity) {
  WorkerSession* s = Find(identity);
  return s && ++s->violations >= kMaxViolations;
}

WorkerSessions::Due WorkerSessions::Check(double now, double heartbeat_seconds, uint32_t liveness,
                                          const std::function<bool(const std::string& key)>& still_worker) {
  Due due;
  for (const auto& [id, s] : sessions_) {
    if (still_worker && !still_worker(s.key)) {
      due.revoked.push_back(id);
    } else if (Liveness::Gone(s.last_seen, now, heartbeat_seconds, liveness)) {
      due.dead.push_back(id);
    } else if (Liveness::HeartbeatDue(s.last_sent, now, heartbeat_seconds)) {
      due.quiet.push_back(id);
    }
  }
  worker_deaths_ += due.dead.size();
  return due;
}

std::vector<DeviceInfo> WorkerSessions::DevicesByModel() const {
  std::vector<DeviceInfo> out;
  std::set<std::string> models;
  for (const auto& [id, s] : sessions_)
    for (const auto& d : s.devices)
      if (models.insert(d.model).second) out.push_back(d);
  return out;
}

}  // namespace tune
