// A DEALER client for one request/reply exchange with the coordinator
// (submit, status). Fails with a clear error when the coordinator does not
// answer within the timeout.
#pragma once

#include <memory>
#include <string>

#include "codec/protocol.h"
#include "tune/status.h"

namespace tune {

// Where a coordinator is and how to reach it.
struct ClientArgs {
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::string curve_secret_key, coordinator_key;  // CURVE key files; empty = plaintext
};

class CoordinatorClient {
 public:
  // `curve_secret_key` and `coordinator_key` are key files; empty = plaintext.
  explicit CoordinatorClient(std::string endpoint, double timeout_seconds = 10,
                             std::string curve_secret_key = "", std::string coordinator_key = "");
  CoordinatorClient(const ClientArgs& to, double timeout_seconds)
      : CoordinatorClient(to.endpoint, timeout_seconds, to.curve_secret_key, to.coordinator_key) {}
  ~CoordinatorClient();
  Result<Command> Call(Command request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
