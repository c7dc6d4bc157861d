#include "coordinator_client.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <zmq.hpp>

#include "base/clock.h"
#include "wire/curve.h"
#include "wire/link.h"

namespace tune {

struct CoordinatorClient::Impl {
  std::string endpoint;
  double timeout;
  double connect_seconds = kClientConnectSeconds;
  zmq::context_t ctx{1};
  std::unique_ptr<Link> link;  // made by the first call
  EnvelopeFramer framer{"client:" + std::to_string(getpid())};
  // The socket's connection and handshake events, so that a coordinator
  // that is not there, went away or refuses this client's key is said at
  // once, each in its words, instead of after the whole timeout.
  zmq::socket_t monitor{ctx, zmq::socket_type::pair};
  bool monitoring = false;
  bool connected = false;   // a transport connection (TCP accepted, IPC open)
  bool handshaken = false;  // and ZeroMQ's handshake over it completed
  std::string curve_secret_key, coordinator_key;

  // The link, CURVE set up and its events monitored, connected.
  Status Open() {
    std::optional<CurveKeyPair> keys;
    std::string server;
    if (!curve_secret_key.empty()) {
      auto loaded = LoadCurveKeyPair(curve_secret_key);
      if (!loaded.ok()) return loaded.status();
      auto public_key = LoadCurvePublicKey(coordinator_key);
      if (!public_key.ok()) return public_key.status();
      keys = std::move(loaded).value();
      server = std::move(public_key).value();
    }
    auto made = Link::Dealer(ctx, keys ? &*keys : nullptr, server);
    if (!made.ok()) return made.status();
    const std::string inproc = "inproc://client-monitor";
    if (zmq_socket_monitor((*made)->socket().handle(), inproc.c_str(),
                           ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0) {
      monitor.connect(inproc);
      monitoring = true;
    }
    TUNE_RETURN_IF_ERROR((*made)->Connect(endpoint));
    link = std::move(made).value();
    return Status::OK();
  }

  // The refusal or loss an event tells of, or "".
  std::string Refusal() {
    std::string why;
    zmq::message_t event, address;
    while (monitoring && monitor.recv(event, zmq::recv_flags::dontwait)) {
      if (event.more()) (void)monitor.recv(address, zmq::recv_flags::dontwait);
      if (event.size() < 6) continue;
      uint16_t id = 0;
      uint32_t value = 0;
      std::memcpy(&id, event.data(), 2);
      std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
      if (id == ZMQ_EVENT_CONNECTED) connected = true;
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) handshaken = true;
      // A refused handshake closes the connection too: the refusal says more.
      if (id == ZMQ_EVENT_DISCONNECTED && connected && why.empty())
        why = "closed the connection while this request waited (stopped or restarted?)";
      if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        why = "refused this client's key (CURVE status " + std::to_string(value) +
              "): its public key is not on the coordinator's allow-list, or was taken off it";
      else if ((id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) &&
               !curve_secret_key.empty())
        why = "refused the CURVE handshake: is --coordinator-key the coordinator's public key, and does it "
              "run with CURVE?";
      else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        why = "broke off the connection's handshake (is it paused or overloaded, or is the coordinator using "
              "CURVE and this client not: --curve-key, --coordinator-key?)";
    }
    return why;
  }
};

void CoordinatorClient::SetConnectSeconds(double seconds) { impl_->connect_seconds = seconds; }

CoordinatorClient::CoordinatorClient(std::string endpoint, double timeout_seconds,
                                     std::string curve_secret_key, std::string coordinator_key)
    : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = std::move(endpoint);
  impl_->curve_secret_key = std::move(curve_secret_key);
  impl_->coordinator_key = std::move(coordinator_key);
  impl_->timeout = timeout_seconds;
}

CoordinatorClient::~CoordinatorClient() = default;

Result<Command> CoordinatorClient::Call(Command request) {
  try {
    if (!impl_->link) TUNE_RETURN_IF_ERROR(impl_->Open());
    if (Status st = impl_->link->SendFrame(impl_->framer.Frame(std::move(request)), {}, /*wait=*/true); !st.ok())
      return Status::Error("coordinator " + impl_->endpoint + ": " + st.message());
    const double start = NowSeconds();
    const double deadline = start + impl_->timeout;
    // Without a connection after this long nothing listens there: said
    // now, not after a long request's whole timeout.
    const double connect_seconds = std::min(impl_->timeout, impl_->connect_seconds);
    const double connect_deadline = start + connect_seconds;
    while (NowSeconds() < deadline) {
      zmq::pollitem_t items[] = {{impl_->link->socket().handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, std::chrono::milliseconds(100));
      if (const std::string why = impl_->Refusal(); !why.empty())
        return Status::Unavailable("coordinator " + impl_->endpoint + " " + why);
      if (impl_->monitoring && !impl_->handshaken && !(items[0].revents & ZMQ_POLLIN) &&
          NowSeconds() >= connect_deadline) {
        const std::string in = std::to_string(static_cast<int>(std::ceil(connect_seconds))) + " s";
        if (impl_->connected)
          return Status::Unavailable("coordinator " + impl_->endpoint + " took the connection but did not answer "
                                     "its handshake in " + in + " (is it paused, stopped in a debugger, or "
                                     "overloaded?)");
        return Status::Unavailable("coordinator " + impl_->endpoint + " did not answer: no connection in " + in +
                                   " (is it running, and is this its address?)");
      }
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      auto got = impl_->link->ReceiveEnvelope();
      if (!got) continue;
      if (!got->ok()) return Status::Error("coordinator " + impl_->endpoint + ": " + got->status().message());
      Envelope* reply = &got->value();
      if (std::holds_alternative<Heartbeat>(reply->command)) continue;
      if (auto* err = std::get_if<ErrorReply>(&reply->command)) return Status::Error(err->message);
      // A refusal (this key's role, the protocol version, ...) says why.
      if (auto* gone = std::get_if<Disconnect>(&reply->command))
        return Status::Error("coordinator " + impl_->endpoint + " refused the request: " + gone->reason);
      return std::move(reply->command);
    }
  } catch (const zmq::error_t& e) {
    return Status::Error("coordinator " + impl_->endpoint + ": " + e.what());
  }
  return Status::Unavailable("coordinator " + impl_->endpoint + " did not answer within " +
                       std::to_string(static_cast<int>(impl_->timeout)) + " s");
}

}  // namespace tune
