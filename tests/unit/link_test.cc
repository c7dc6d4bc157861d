// wire/link.h: the ends of the protocol over real ZeroMQ sockets (inproc):
// envelopes framed and numbered per sender, a ROUTER's peer identity, a
// message of more than one frame refused as malformed, a hostile frame
// decoded to an error rather than a crash.
#include "wire/link.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock.h"
#include "coordinator_client.h"
#include "coordinator_link.h"
#include "support/temp_dir.h"

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

// A worker whose hello is refused (a live session of its name, as after a
// coordinator paused and resumed) says hello again only after a backoff that
// doubles while it is refused, not at once in a loop; a coordinator that
// knew the link and asks for a new hello gets it at once.
TEST(CoordinatorLink, ARefusedHelloWaitsItsBackoffAndAGreetedLinkReconnectsAtOnce) {
  zmq::context_t ctx{1};
  auto router = Link::Router(ctx, nullptr);
  ASSERT_TRUE(router.ok());
  ASSERT_TRUE((*router)->Bind("inproc://link-refused").ok());
  EnvelopeFramer coordinator("coordinator");
  CoordinatorLink::Options o;
  o.endpoint = "inproc://link-refused";
  o.name = "w1";
  CoordinatorLink link(ctx, o);
  // The coordinator's side of one hello: answered with `reply`.
  std::string peer;
  auto answer = [&](Command reply) {
    auto hello = Await([&] { return (*router)->Receive(); });
    ASSERT_TRUE(hello.has_value());
    peer = hello->peer;
    ASSERT_TRUE((*router)->SendFrame(coordinator.Frame(std::move(reply)), peer).ok());
  };
  auto next = [&] {
    return Await([&] { return link.Receive(); });
  };
  double waited = 0;
  for (int refusal = 0; refusal < 3; ++refusal) {
    ASSERT_TRUE(link.Connect().ok());
    answer(Disconnect{"a live worker is already named 'w1'"});
    ASSERT_TRUE(next().has_value());
    EXPECT_FALSE(link.connected());
    const double now = NowSeconds();
    EXPECT_FALSE(link.ReconnectDue(now)) << "refusal " << refusal;
    // The wait doubles: due within the backoff's bound, not before half of it.
    const double due = Liveness::kFirstBackoffSeconds * (1 << refusal);
    EXPECT_TRUE(link.ReconnectDue(now + due + 0.01));
    EXPECT_GT(due, waited);
    waited = due;
  }
  // Greeted, then asked for a new hello: due at once.
  ASSERT_TRUE(link.Connect().ok());
  answer(HelloAck{});
  ASSERT_TRUE(next().has_value());
  EXPECT_TRUE(link.greeted());
  ASSERT_TRUE((*router)->SendFrame(coordinator.Frame(Disconnect{"coordinator restarted"}), peer).ok());
  auto bye = next();
  ASSERT_TRUE(bye.has_value());
  EXPECT_TRUE(link.ReconnectDue(NowSeconds()));
}

// A coordinator that takes the connection and never answers its handshake
// (paused, stopped in a debugger): the client says so at its connect bound,
// not after ZeroMQ's 30 s handshake limit, and blames no keys.
TEST(CoordinatorClient, AConnectionWithoutAHandshakeIsSaidAtTheConnectBound) {
  testing::TempDir dir;
  const std::string path = dir.Sub("paused.sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 8), 0);  // connections queue; nothing ever reads them
  ClientArgs to;
  to.endpoint = "ipc://" + path;
  to.connect_seconds = 1;
  CoordinatorClient client(to, 60);
  auto reply = client.Call(SweepStatusRequest{});
  ::close(fd);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("took the connection but did not answer its handshake in 1 s"),
            std::string::npos)
      << reply.status().message();
  EXPECT_EQ(reply.status().message().find("CURVE"), std::string::npos) << reply.status().message();
}

}  // namespace
}  // namespace tune
