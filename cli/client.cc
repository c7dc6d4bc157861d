#include "client.h"

#include <unistd.h>

#include <chrono>
#include <zmq.hpp>

#include "wire/curve.h"

namespace tune {

struct CoordinatorClient::Impl {
  std::string endpoint;
  double timeout;
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
  uint64_t seq = 0;
  std::string curve_secret_key, coordinator_key;
};

CoordinatorClient::CoordinatorClient(std::string endpoint, double timeout_seconds,
                                     std::string curve_secret_key, std::string coordinator_key)
    : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = std::move(endpoint);
  impl_->curve_secret_key = std::move(curve_secret_key);
  impl_->coordinator_key = std::move(coordinator_key);
  impl_->timeout = timeout_seconds;
  impl_->sock.set(zmq::sockopt::linger, 0);
  impl_->sock.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxFrameBytes));
}

CoordinatorClient::~CoordinatorClient() = default;

Result<Command> CoordinatorClient::Call(Command request) {
  try {
    if (impl_->seq == 0) {
      if (!impl_->curve_secret_key.empty()) {
        auto keys = LoadCurveKeyPair(impl_->curve_secret_key);
        if (!keys.ok()) return keys.status();
        auto server = LoadCurvePublicKey(impl_->coordinator_key);
        if (!server.ok()) return server.status();
        TUNE_RETURN_IF_ERROR(ConfigureCurveClient(impl_->sock, *keys, *server));
      }
      impl_->sock.connect(impl_->endpoint);
    }
    Envelope env;
    env.seq = ++impl_->seq;
    env.sender = "client:" + std::to_string(getpid());
    env.command = std::move(request);
    const std::string frame = EncodeEnvelope(env);
    impl_->sock.send(zmq::buffer(frame), zmq::send_flags::none);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(impl_->timeout);
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::pollitem_t items[] = {{impl_->sock.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, std::chrono::milliseconds(100));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      zmq::message_t msg;
      (void)impl_->sock.recv(msg);
      auto reply = DecodeEnvelope(msg.data(), msg.size());
      if (!reply.ok()) return Status::Error("coordinator " + impl_->endpoint + ": " + reply.status().message());
      if (std::holds_alternative<Heartbeat>(reply->command)) continue;
      if (auto* err = std::get_if<ErrorReply>(&reply->command)) return Status::Error(err->message);
      return std::move(reply->command);
    }
  } catch (const zmq::error_t& e) {
    return Status::Error("coordinator " + impl_->endpoint + ": " + e.what());
  }
  return Status::Error("coordinator " + impl_->endpoint + " did not answer within " +
                       std::to_string(static_cast<int>(impl_->timeout)) + " s");
}

}  // namespace tune
