// One DEALER connection to a coordinator, speaking the protocol by hand, so
// that a test decides exactly what a worker or a client sends, and when:
// honest peers whose timing matters, and hostile ones.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <zmq.hpp>

#include "tune/protocol.h"

namespace tune::testing {

class ProtocolPeer {
 public:
  ProtocolPeer(zmq::context_t& ctx, const std::string& endpoint, int receive_timeout_ms = 10000)
      : socket_(ctx, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, receive_timeout_ms);
    socket_.connect(endpoint);
  }
  void Send(Command cmd, std::string sender = "test-peer") {
    Envelope env;
    env.seq = ++seq_;
    env.sender = std::move(sender);
    env.command = std::move(cmd);
    SendFrame(EncodeEnvelope(env));
  }
  void SendFrame(const std::string& frame) { socket_.send(zmq::buffer(frame), zmq::send_flags::none); }
  // The next command that is not a heartbeat; nullopt after the receive
  // timeout of silence.
  std::optional<Command> ReceiveAny() {
    while (true) {
      zmq::message_t msg;
      if (!socket_.recv(msg)) return std::nullopt;
      auto env = DecodeEnvelope(msg.data(), msg.size());
      EXPECT_TRUE(env.ok()) << env.status().message();
      if (env.ok() && !std::holds_alternative<Heartbeat>(env->command)) return env->command;
    }
  }
  // The next command, which must be a T.
  template <typename T>
  T Receive() {
    auto cmd = ReceiveAny();
    if (!cmd) {
      ADD_FAILURE() << "no reply from the coordinator";
      return T{};
    }
    if (auto* t = std::get_if<T>(&*cmd)) return std::move(*t);
    ADD_FAILURE() << "expected " << CommandName(Command{T{}}) << ", got " << CommandName(*cmd);
    return T{};
  }

 private:
  zmq::socket_t socket_;
  uint64_t seq_ = 0;
};

}  // namespace tune::testing
