#include "wire/link.h"

#include <cerrno>

namespace tune {

std::string EnvelopeFramer::Frame(Command cmd) {
  Envelope env;
  env.seq = ++seq_;
  env.sender = sender_;
  env.command = std::move(cmd);
  return EncodeEnvelope(env);
}

Link::Link(zmq::context_t& ctx, zmq::socket_type type) : socket_(ctx, type), router_(type == zmq::socket_type::router) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxFrameBytes));
}

Result<std::unique_ptr<Link>> Link::Dealer(zmq::context_t& ctx, const CurveKeyPair* keys, const std::string& server_key) {
  std::unique_ptr<Link> link(new Link(ctx, zmq::socket_type::dealer));
  if (keys) TUNE_RETURN_IF_ERROR(ConfigureCurveClient(link->socket_, *keys, server_key));
  return link;
}

Result<std::unique_ptr<Link>> Link::Router(zmq::context_t& ctx, const CurveKeyPair* keys) {
  std::unique_ptr<Link> link(new Link(ctx, zmq::socket_type::router));
  link->socket_.set(zmq::sockopt::router_handover, 1);
  if (keys) TUNE_RETURN_IF_ERROR(ConfigureCurveServer(link->socket_, *keys));
  return link;
}

Status Link::Connect(const std::string& endpoint) {
  try {
    socket_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Error("cannot connect to " + endpoint + ": " + e.what());
  }
  return Status::OK();
}

Status Link::Bind(const std::string& endpoint) {
  try {
    socket_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Error("cannot bind " + endpoint + ": " + e.what());
  }
  return Status::OK();
}

std::string Link::bound_endpoint() const { return socket_.get(zmq::sockopt::last_endpoint); }

Status Link::SendFrame(const std::string& frame, const std::string& peer, bool wait) {
  const zmq::send_flags flags = wait ? zmq::send_flags::none : zmq::send_flags::dontwait;
  try {
    if (router_ && !socket_.send(zmq::buffer(peer), flags | zmq::send_flags::sndmore))
      return Status::Unavailable("the queue to the peer is full");
    if (!socket_.send(zmq::buffer(frame), flags)) return Status::Unavailable("the queue to the peer is full");
  } catch (const zmq::error_t& e) {
    return Status::Error(e.what());
  }
  return Status::OK();
}

std::optional<Link::Message> Link::Receive() {
  Message m;
  zmq::message_t first;
  if (!socket_.recv(first, zmq::recv_flags::dontwait)) return std::nullopt;
  bool more = first.more();
  if (router_) m.peer = first.to_string();
  else m.frames.push_back(std::move(first));
  while (more) {
    m.frames.emplace_back();
    // The rest of a message is queued already: finish it even when a
    // signal interrupts.
    for (;;) {
      try {
        (void)socket_.recv(m.frames.back());
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
    }
    more = m.frames.back().more();
  }
  return m;
}

std::optional<Result<Envelope>> Link::ReceiveEnvelope() {
  auto m = Receive();
  if (!m) return std::nullopt;
  if (m->frames.size() != 1)
    return Result<Envelope>(Status::InvalidArgument("expected one frame, got " + std::to_string(m->frames.size())));
  return DecodeEnvelope(m->frames[0].data(), m->frames[0].size());
}

}  // namespace tune
