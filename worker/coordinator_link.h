// The worker's side of its link to the coordinator, in the manner of
// Majordomo's worker API (mdwrkapi): one DEALER socket, the hello, heartbeats
// both ways, reconnection with a doubling backoff, and every results batch
// kept until the coordinator acknowledges it and sent again on each new link.
//
// Thread safety: none; the worker's socket loop owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "wire/curve.h"
#include "wire/link.h"
#include "wire/liveness.h"
#include "protocol/protocol.h"
#include "tune/status.h"

namespace tune {

class CoordinatorLink {
 public:
  struct Options {
    std::string endpoint;
    std::string name;                        // the worker's, in every envelope
    std::vector<DeviceInfo> devices;         // announced in the hello
    std::optional<CurveKeyPair> curve_keys;  // set: CURVE to coordinator_key
    std::string coordinator_key;
    // A builder's hello (Hello::builder_archs, builder_toolchain); empty
    // for a GPU worker.
    std::vector<std::string> builder_archs;
    std::string builder_toolchain;
  };

  // `ctx` must outlive the link.
  CoordinatorLink(zmq::context_t& ctx, Options opts);

  // Opens a new socket and says hello. Errors: CURVE set-up.
  Status Connect();
  // Closes the socket; the next Connect is due after the backoff, which
  // doubles up to 8 s and starts again at 0.25 s once a hello is answered.
  void Drop(const std::string& why);
  bool connected() const { return link_ != nullptr; }
  // The coordinator answered this link's hello: work may be asked for.
  bool greeted() const { return greeted_; }
  bool ReconnectDue(double now) const { return liveness_.ReconnectDue(now); }
  zmq::socket_t& socket() { return link_->socket(); }
  // Results batches sent and not yet acknowledged.
  size_t unacknowledged() const { return unacked_.size(); }

  void Send(Command cmd);
  // A results batch: sent at once when greeted, and kept (to go again on
  // the next link) until the coordinator acknowledges it.
  void SendResults(Results results);

  // The next command from the coordinator; nullopt when none waits or the
  // link was dropped. The link's own commands are handled here as well:
  // HelloAck (greeted, the heartbeat, unacknowledged batches sent again),
  // ResultsAck (the batch forgotten; a refusal logged) and Disconnect (the
  // link dropped, a new hello due at once). Malformed messages are logged
  // and skipped.
  std::optional<Command> Receive();

  // Drops the link when the coordinator was silent past its liveness, and
  // sends a heartbeat when nothing was sent for an interval. False when
  // the link was dropped.
  bool KeepAlive(double now);

 private:
  void SendFrame(const std::string& frame);

  zmq::context_t& ctx_;
  Options opts_;
  std::unique_ptr<Link> link_;  // a new one per connection
  EnvelopeFramer framer_;  Liveness liveness_;  // the coordinator's terms, when it was heard, the backoff
  bool greeted_ = false;
  bool told_skew_ = false;  // the clock-skew warning is logged once
  std::map<std::pair<uint64_t, uint64_t>, std::string> unacked_;  // (unit, batch) -> frame
};

}  // namespace tune
