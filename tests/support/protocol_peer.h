// One DEALER connection to a coordinator, speaking the protocol by hand, so
// that a test decides exactly what a worker or a client sends, and when:
// honest peers whose timing matters, and hostile ones.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "protocol/protocol.h"
#include "wire/curve.h"

namespace tune::testing {

// A peer's CURVE identity: its key pair and the coordinator's public key.
struct PeerCurve {
  CurveKeyPair mine;
  std::string server_public_z85;
};

class ProtocolPeer {
 public:
  // With `curve`, the DEALER is a CURVE client of that identity (a
  // coordinator run with --curve-key admits it by its allow-lists).
  ProtocolPeer(zmq::context_t& ctx, const std::string& endpoint, int receive_timeout_ms = 10000,
               const std::optional<PeerCurve>& curve = std::nullopt)
      : socket_(ctx, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, receive_timeout_ms);
    if (curve) {
      Status st = ConfigureCurveClient(socket_, curve->mine, curve->server_public_z85);
      EXPECT_TRUE(st.ok()) << st.message();
    }
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
  // Asks for work for device `device_index` until a unit comes. A model's
  // units exist once its config spaces are expanded, which its first
  // device's first request starts: NoWork until then.
  WorkUnit RequestUnit(int device_index = 0) {
    for (int i = 0; i < 500; ++i) {
      Send(RequestWork{device_index});
      auto cmd = ReceiveAny();
      if (!cmd) break;
      if (auto* unit = std::get_if<WorkUnit>(&*cmd)) return std::move(*unit);
      if (!std::holds_alternative<NoWork>(*cmd)) {
        ADD_FAILURE() << "expected work_unit or no_work, got " << CommandName(*cmd);
        return {};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "no work unit came";
    return {};
  }

 private:
  zmq::socket_t socket_;
  uint64_t seq_ = 0;
};

}  // namespace tune::testing
