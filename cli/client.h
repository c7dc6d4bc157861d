// A DEALER client for one request/reply exchange with the coordinator
// (submit, status). Fails with a clear error when the coordinator does not
// answer within the timeout.
#pragma once

#include <memory>
#include <string>

#include "codec/protocol.h"
#include "tune/status.h"

namespace tune {

class CoordinatorClient {
 public:
  // `curve_secret_key` and `coordinator_key` are key files; empty = plaintext.
  explicit CoordinatorClient(std::string endpoint, double timeout_seconds = 10,
                             std::string curve_secret_key = "", std::string coordinator_key = "");
  ~CoordinatorClient();
  Result<Command> Call(Command request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
