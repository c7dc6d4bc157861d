// What the coordinator's parts (worker sessions, sweeps, ingestion, status
// pages) share, private to coordinator/. Every part runs on the loop's
// thread only, unless a comment says otherwise; none is thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/log.h"
#include "protocol/protocol.h"
#include "store/result_store.h"

namespace tune {

// A routing identity as hex, for logs.
std::string Printable(const std::string& identity);

// One line of the coordinator's log (base/log.h). Thread-safe.
void CoordinatorLog(log::Level level, const std::string& message, std::initializer_list<log::Field> fields = {});

// What the parts ask of the socket loop that wires them (Coordinator::Impl).
class PeerLink {
 public:
  virtual ~PeerLink() = default;
  // Sends `cmd` to the peer without blocking; a failed send is logged.
  virtual void Send(const std::string& identity, Command cmd) = 0;
  // Tells the peer why it is cut off (logged, counted) and forgets its
  // worker session, if any.
  virtual void Disconnect(const std::string& identity, const std::string& reason) = 0;
  // A peer that sent what does not decode or check: counted as a protocol
  // error, then disconnected.
  virtual void ProtocolError(const std::string& identity, const std::string& reason) = 0;
};

// Whether the store takes writes. Set while it refuses them (disk full, I/O
// error): no leases are given out, since their results could not be
// stored, and the store is tried again every few seconds until a write
// succeeds.
class StoreHealth {
 public:
  // A write failed: `what` is shown (status, metrics) until one succeeds.
  void Failed(const std::string& what, double now);
  // Tries the store again when a retry is due; clears the fault when it
  // takes writes.
  void MaybeRecover(ResultStore& store, double now);
  // "" while writes succeed.
  const std::string& fault() const { return fault_; }

 private:
  std::string fault_;
  double retry_at_ = 0;
};

// What the loop itself counts, for /metrics.
struct LoopCounters {
  uint64_t dropped_messages = 0;  // peers disconnected for bad or unexpected messages
  uint64_t protocol_errors = 0;   // frames that failed to decode or check
  uint64_t leases_expired = 0;
  uint64_t images_served = 0;            // stored cubins sent to workers (ImageReply)
  uint64_t image_requests_refused = 0;   // ImageRequests that broke a rule
  uint64_t build_works = 0;              // BuildWorks handed to builders
  uint64_t builder_images_stored = 0;    // builders' images stored (new, or a new witness)
  uint64_t builder_image_conflicts = 0;  // builders' images that differ from the stored one of their key
  uint64_t builder_configs_failed = 0;   // configs builders could not compile
  uint64_t builds_refused = 0;           // BuiltImages refused
};

}  // namespace tune
