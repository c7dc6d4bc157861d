// Link: one end of the farm's protocol over ZeroMQ, the one home of what
// every end does with its socket (the coordinator's ROUTER; the DEALERs of
// workers, builders and clients), in the manner of Majordomo's APIs:
//
//   - options: no linger (a stopping process never waits on frames its
//     peer will not take) and the frame limit, kMaxFrameBytes, set on the
//     socket, so that ZeroMQ drops an oversized message before it is read;
//   - CURVE: the coordinator's keys on a ROUTER (the ZAP handler admits
//     peers, coordinator/zap_authenticator.h), a DEALER's own keys and the
//     coordinator's public key on a DEALER;
//   - envelopes: one frame per message (a ROUTER's peer identity before
//     it), framed by an EnvelopeFramer (the sender's name, numbered), decoded
//     by protocol/protocol.h, which reads every frame as hostile.
//
// What a link means to its program stays there: the worker's hello,
// heartbeats and resends (worker/coordinator_link.h, over Liveness in
// wire/liveness.h), the client's request and reply (client/
// coordinator_client.h), the coordinator's sessions.
//
// Thread safety: none, as a ZeroMQ socket; one thread owns a link.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "protocol/protocol.h"
#include "tune/status.h"
#include "wire/curve.h"

namespace tune {

// Envelopes from one sender (Envelope::sender), numbered (Envelope::seq):
// an end's frames, whichever socket carries them (a worker frames results
// while its link is down, to send on the next).
class EnvelopeFramer {
 public:
  explicit EnvelopeFramer(std::string sender) : sender_(std::move(sender)) {}
  // `cmd` as the sender's next envelope, encoded: one frame.
  std::string Frame(Command cmd);

 private:
  std::string sender_;
  uint64_t seq_ = 0;
};

class Link {
 public:
  // A DEALER; CURVE to the coordinator whose public key is `server_key`
  // when `keys` is set. Connect it with Connect. Errors: CURVE set-up.
  static Result<std::unique_ptr<Link>> Dealer(zmq::context_t& ctx, const CurveKeyPair* keys,
                                              const std::string& server_key);
  // A ROUTER, a CURVE server with `keys` when set; a peer that connects
  // again under the same identity takes its place (router_handover). Bind
  // it with Bind. Errors: CURVE set-up.
  static Result<std::unique_ptr<Link>> Router(zmq::context_t& ctx, const CurveKeyPair* keys);

  // Errors: ZeroMQ's, naming the endpoint.
  Status Connect(const std::string& endpoint);
  Status Bind(const std::string& endpoint);
  // The endpoint bound (a port chosen by the system filled in), or "".
  std::string bound_endpoint() const;

  // For polls and socket monitors.
  zmq::socket_t& socket() { return socket_; }

  // Sends `frame` (to `peer` on a ROUTER), without waiting unless `wait`.
  // Errors: ZeroMQ's (a full queue without `wait`, a peer gone).
  Status SendFrame(const std::string& frame, const std::string& peer = {}, bool wait = false);

  // A message as it arrived: a ROUTER's peer identity, and its frames
  // (one for a well-formed envelope).
  struct Message {
    std::string peer;
    std::vector<zmq::message_t> frames;
  };
  // The next whole message waiting, without waiting; nullopt when none. A
  // message begun is read to its end, even across a signal, so that no
  // frame of it is read as a message of its own. Throws zmq::error_t as
  // ZeroMQ does (EINTR before a message begins).
  std::optional<Message> Receive();
  // The next message's envelope (nullopt: none waits); a malformed one is
  // its decoding error. For DEALERs, whose messages are one frame.
  std::optional<Result<Envelope>> ReceiveEnvelope();

 private:
  Link(zmq::context_t& ctx, zmq::socket_type type);

  zmq::socket_t socket_;
  bool router_;
};

}  // namespace tune
