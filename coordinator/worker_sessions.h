// The coordinator's peer registry: one WorkerSession per worker (or
// builder) that said hello, from its hello to its disconnect. Private to coordinator/; loop
// thread only, not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/env.h"
#include "scheduler.h"
#include "protocol/protocol.h"

namespace tune {

// Refused results batches after which a peer is disconnected.
constexpr uint32_t kMaxViolations = 3;

// The devices of a hello, checked before they can name a model: model names
// are store keys (as NormaliseGpuModel writes them), indices unique.
// Returns an error naming the device otherwise.
Status CheckDevices(const std::vector<DeviceInfo>& devices);

struct WorkerSession {
  std::string name;
  std::string key;          // CURVE public key (Z85) it was admitted with; "" in plaintext
  uint32_t violations = 0;  // batches refused since it said hello
  // Indices of devices that asked for work: only those make their model
  // live (Scheduler::AddDevice), so a model that a hello names and no
  // device ever serves makes no sweep wait for it.
  std::set<int> serving;
  std::vector<DeviceInfo> devices;
  // A builder's (Hello::builder_archs, builder_toolchain): no devices.
  std::vector<std::string> builder_archs;
  std::string builder_toolchain;
  double last_seen = 0;
  double last_sent = 0;
  // Its rows' clock less ours, from its last stored batch (NoteClockSkew).
  double clock_skew_seconds = 0;
  bool told_skew = false;

  // Who a lease is booked to: the CURVE key the peer proved it holds, or
  // its name where the coordinator runs without CURVE.
  const std::string& Lessee() const { return key.empty() ? name : key; }
  bool builder() const { return !builder_archs.empty(); }
  // The device of that index from its hello; nullptr when it named none.
  const DeviceInfo* Device(int index) const;
};

class WorkerSessions {
 public:
  // `scheduler` learns which models are served and which workers left (at
  // `env`'s wall clock); both must outlive this registry.
  explicit WorkerSessions(Scheduler* scheduler, Env* env = Env::Default()) : scheduler_(scheduler), env_(env) {}

  // A hello: starts the session of `identity` over (a second hello drops the
  // first session, its leases and devices). `devices` must pass
  // CheckDevices. Returns the new session.
  WorkerSession& Start(const std::string& identity, const Hello& hello, const std::string& key, double now);

  // Any command is a heartbeat. Returns the sender's session, nullptr if it
  // did not say hello.
  WorkerSession* Heard(const std::string& identity, double now);

  // The session of `identity`; nullptr if none.
  WorkerSession* Find(const std::string& identity);
  const WorkerSession* Find(const std::string& identity) const;

  // A device of `session` asked for work: its model is live from now on.
  void Serve(WorkerSession& session, const DeviceInfo& device);

  // Ends the session of `identity`, if any: its served models lose a
  // device, its leases go back to the queue.
  void Drop(const std::string& identity);

  // A message went to `identity` at `now` (heartbeats are sent only to
  // sessions that heard nothing else for a heartbeat period).
  void NoteSent(const std::string& identity, double now);

  // A worker's clock far from ours: flagged (status, metrics) and logged
  // once per session; the worker is told in each acknowledgement.
  void NoteClockSkew(const std::string& identity, double skew);

  // A results batch of `identity` was refused. Returns true when it has
  // reached kMaxViolations (the caller disconnects it).
  bool NoteViolation(const std::string& identity);

  // What a tick must do with the sessions at `now`: `revoked` lost their
  // key's worker role (`still_worker` says, for each key, whether it keeps
  // it; may be empty, and then no key is looked at), `dead` missed
  // `liveness` heartbeats of `heartbeat_seconds`, `quiet` are due a
  // heartbeat. Dead sessions are counted (worker_deaths) but not dropped.
  struct Due {
    std::vector<std::string> revoked, dead, quiet;
  };
  Due Check(double now, double heartbeat_seconds, uint32_t liveness,
            const std::function<bool(const std::string& key)>& still_worker);

  // One device per GPU model among the connected workers' devices.
  std::vector<DeviceInfo> DevicesByModel() const;

  const std::map<std::string, WorkerSession>& all() const { return sessions_; }
  size_t size() const { return sessions_.size(); }
  uint64_t worker_deaths() const { return worker_deaths_; }

 private:
  Scheduler* scheduler_;
  Env* env_;
  std::map<std::string, WorkerSession> sessions_;  // routing identity -> session
  uint64_t worker_deaths_ = 0;  // sessions that missed their heartbeats
};

}  // namespace tune
