// A DEALER client for one request/reply exchange with the coordinator
// (submit, status). Fails with a clear error (kUnavailable) when the
// coordinator does not answer within the timeout, and sooner when it can
// tell why: no connection within kClientConnectSeconds (nothing listens
// there), a connection whose handshake does not complete in that time (a
// paused or overloaded coordinator), the connection closed while the
// request waited (the coordinator stopped), or a CURVE handshake refused
// (the keys).
#pragma once

#include <memory>
#include <string>

#include "protocol/protocol.h"
#include "tune/status.h"

namespace tune {

// How long a client waits for a connection before saying nothing listens.
inline constexpr double kClientConnectSeconds = 10;

// Where a coordinator is and how to reach it.
struct ClientArgs {
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::string curve_secret_key, coordinator_key;  // CURVE key files; empty = plaintext
  double connect_seconds = kClientConnectSeconds;  // --connect-timeout
};

class CoordinatorClient {
 public:
  // `curve_secret_key` and `coordinator_key` are key files; empty = plaintext.
  explicit CoordinatorClient(std::string endpoint, double timeout_seconds = 10,
                             std::string curve_secret_key = "", std::string coordinator_key = "");
  CoordinatorClient(const ClientArgs& to, double timeout_seconds)
      : CoordinatorClient(to.endpoint, timeout_seconds, to.curve_secret_key, to.coordinator_key) {
    SetConnectSeconds(to.connect_seconds);
  }
  ~CoordinatorClient();
  // Without a connection and its handshake after `seconds` (default
  // kClientConnectSeconds, at most the timeout) the call fails saying
  // nothing listens, or nothing answers there: a caller whose
  // requests may run long (a store read) keeps its user's shorter bound
  // for the connection.
  void SetConnectSeconds(double seconds);
  Result<Command> Call(Command request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
