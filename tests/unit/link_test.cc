// wire/link.h: the ends of the protocol over real ZeroMQ sockets (inproc):
// envelopes framed and numbered per sender, a ROUTER's peer identity, a
// message of more than one frame refused as malformed, a hostile frame
// decoded to an error rather than a crash.
#include "wire/link.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tune {
namespace {

// The next message on `link`, waiting up to a few seconds for it.
template <class Fn>
auto Await(Fn&& receive) {
  for (int i = 0; i < 500; ++i) {
    auto got = receive();
    if (got) return got;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return decltype(receive())();
}

TEST(Link, EnvelopesGoBothWaysNumberedPerSender) {
  zmq::context_t ctx{1};
  auto router = Link::Router(ctx, nullptr);
  ASSERT_TRUE(router.ok()) << router.status().message();
  ASSERT_TRUE((*router)->Bind("inproc://link-test").ok());
  EXPECT_EQ((*router)->bound_endpoint(), "inproc://link-test");
  auto dealer = Link::Dealer(ctx, nullptr, "");
  ASSERT_TRUE(dealer.ok());
  ASSERT_TRUE((*dealer)->Connect("inproc://link-test").ok());

  EnvelopeFramer worker("w1");
  ASSERT_TRUE((*dealer)->SendFrame(worker.Frame(Heartbeat{})).ok());
  ASSERT_TRUE((*dealer)->SendFrame(worker.Frame(Heartbeat{})).ok());
  std::string peer;
  for (uint64_t seq : {1u, 2u}) {
    auto m = Await([&] { return (*router)->Receive(); });
    ASSERT_TRUE(m.has_value());
    ASSERT_EQ(m->frames.size(), 1u);
    EXPECT_FALSE(m->peer.empty());
    peer = m->peer;
    auto env = DecodeEnvelope(m->frames[0].data(), m->frames[0].size());
    ASSERT_TRUE(env.ok()) << env.status().message();
    EXPECT_EQ(env->sender, "w1");
    EXPECT_EQ(env->seq, seq);
    EXPECT_TRUE(std::holds_alternative<Heartbeat>(env->command));
  }
  EnvelopeFramer coordinator("coordinator");
  ASSERT_TRUE((*router)->SendFrame(coordinator.Frame(ErrorReply{"no such sweep"}), peer).ok());
  auto reply = Await([&] { return (*dealer)->ReceiveEnvelope(); });
  ASSERT_TRUE(reply.has_value());
  ASSERT_TRUE(reply->ok()) << reply->status().message();
  EXPECT_EQ((*reply)->sender, "coordinator");
  ASSERT_TRUE(std::holds_alternative<ErrorReply>((*reply)->command));
  EXPECT_EQ(std::get<ErrorReply>((*reply)->command).message, "no such sweep");
  EXPECT_FALSE((*dealer)->ReceiveEnvelope().has_value());  // nothing more waits
}

TEST(Link, AMalformedMessageIsAnErrorNotACrash) {
  zmq::context_t ctx{1};
  auto router = Link::Router(ctx, nullptr);
  ASSERT_TRUE(router.ok());
  ASSERT_TRUE((*router)->Bind("inproc://link-hostile").ok());
  // A peer that frames as it likes.
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.connect("inproc://link-hostile");
  raw.send(zmq::str_buffer("garbage that is no envelope"), zmq::send_flags::none);
  auto m = Await([&] { return (*router)->Receive(); });
  ASSERT_TRUE(m.has_value());
  ASSERT_EQ(m->frames.size(), 1u);
  EXPECT_FALSE(DecodeEnvelope(m->frames[0].data(), m->frames[0].size()).ok());
  const std::string peer = m->peer;

  // Two frames to a DEALER: one message, refused whole, never read as two.
  auto dealer = Link::Dealer(ctx, nullptr, "");
  ASSERT_TRUE(dealer.ok());
  zmq::socket_t server(ctx, zmq::socket_type::router);
  server.bind("inproc://link-two-frames");
  ASSERT_TRUE((*dealer)->Connect("inproc://link-two-frames").ok());
  EnvelopeFramer client("client:1");
  ASSERT_TRUE((*dealer)->SendFrame(client.Frame(Heartbeat{})).ok());
  zmq::message_t id, frame;
  ASSERT_TRUE(server.recv(id));
  ASSERT_TRUE(server.recv(frame));
  const std::string envelope = EnvelopeFramer("coordinator").Frame(Heartbeat{});
  server.send(id, zmq::send_flags::sndmore);
  server.send(zmq::buffer(envelope), zmq::send_flags::sndmore);
  server.send(zmq::buffer(envelope), zmq::send_flags::none);
  auto got = Await([&] { return (*dealer)->ReceiveEnvelope(); });
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->status().message(), "expected one frame, got 2");
  EXPECT_FALSE((*dealer)->ReceiveEnvelope().has_value());
}

}  // namespace
}  // namespace tune
