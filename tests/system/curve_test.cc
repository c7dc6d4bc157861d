// CURVE on the farm's links: key files round-trip and fail clearly; over
// real loopback TCP, a worker whose key is on the allow-list exchanges
// envelopes with a CURVE ROUTER, while an unknown key, a plaintext client and
// a client that does not know the server's key get nothing through.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "support/temp_dir.h"
#include "wire/curve.h"
#include "protocol/protocol.h"
#include "zap_authenticator.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Long enough for a loopback CURVE handshake many times over; a message
// that has not arrived by then is not coming.
constexpr auto kNothingArrives = 1500ms;
constexpr auto kArrives = 5s;

using tune::testing::TempDir;

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

CurveKeyPair NewKeys() {
  auto k = GenerateCurveKeyPair();
  EXPECT_TRUE(k.ok()) << k.status().message();
  return *k;
}

// Collects the authenticator's log lines.
struct LogSink {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& l) {
      std::lock_guard lock(mu);
      lines.push_back(l);
    };
  }
  bool Contains(const std::string& needle) {
    std::lock_guard lock(mu);
    for (const auto& l : lines) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }
};

std::optional<std::vector<zmq::message_t>> RecvWithin(zmq::socket_t& s,
                                                      std::chrono::milliseconds timeout) {
  zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
  if (zmq::poll(items, 1, timeout) <= 0) return std::nullopt;
  std::vector<zmq::message_t> parts;
  do {
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::dontwait)) break;
    parts.push_back(std::move(m));
  } while (s.get(zmq::sockopt::rcvmore));
  return parts;
}

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

Envelope MakeHello(const std::string& worker) {
  DeviceInfo d;
  d.index = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.model = "h100-80gb-hbm3";
  d.backend = "sim";
  d.num_sms = 132;
  Envelope env;
  env.seq = 7;
  env.sender = worker;
  env.command = Hello{worker, TUNEFARM_VERSION, {d}};
  return env;
}

// ---------------------------------------------------------------------------
// Key files.

TEST(CurveKeys, FilesRoundTrip) {
  TempDir dir;
  const CurveKeyPair keys = NewKeys();
  EXPECT_TRUE(IsValidCurveKey(keys.public_z85));
  EXPECT_TRUE(IsValidCurveKey(keys.secret_z85));
  EXPECT_NE(keys.public_z85, keys.secret_z85);

  const std::string path = dir.Sub("worker-a.key");
  ASSERT_TRUE(WriteCurveKeyPair(keys, path, "worker-a").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path + ".pub"), 0644u);

  auto loaded = LoadCurveKeyPair(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->public_z85, keys.public_z85);
  EXPECT_EQ(loaded->secret_z85, keys.secret_z85);

  auto pub = LoadCurvePublicKey(path + ".pub");
  ASSERT_TRUE(pub.ok()) << pub.status().message();
  EXPECT_EQ(*pub, keys.public_z85);

  // The public file doubles as an allow-list.
  auto list = LoadCurveAllowList(path + ".pub");
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].public_z85, keys.public_z85);
  EXPECT_EQ((*list)[0].name, "worker-a");
  // The secret never leaks into the public file.
  std::ifstream in(path + ".pub");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find(keys.secret_z85), std::string::npos);
}

TEST(CurveKeys, NeverReplacesAKeyUnlessAsked) {
  TempDir dir;
  const std::string path = dir.Sub("k");
  const CurveKeyPair first = NewKeys(), second = NewKeys();
  ASSERT_TRUE(WriteCurveKeyPair(first, path, "").ok());
  Status again = WriteCurveKeyPair(second, path, "");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("already exists"), std::string::npos) << again.message();
  EXPECT_EQ(LoadCurveKeyPair(path)->secret_z85, first.secret_z85);

  ASSERT_TRUE(WriteCurveKeyPair(second, path, "", /*overwrite=*/true).ok());
  EXPECT_EQ(LoadCurveKeyPair(path)->secret_z85, second.secret_z85);
  EXPECT_EQ(*LoadCurvePublicKey(path + ".pub"), second.public_z85);
  EXPECT_EQ(ModeOf(path), 0600u);
}

TEST(CurveKeys, BadKeyFilesGiveClearErrors) {
  TempDir dir;
  const CurveKeyPair keys = NewKeys(), other = NewKeys();
  auto error_of = [](const auto& r) { return r.ok() ? std::string("(ok)") : r.status().message(); };
  auto expect_error = [&](const std::string& err, std::initializer_list<std::string> needles) {
    for (const auto& n : needles) EXPECT_NE(err.find(n), std::string::npos) << err;
  };

  const std::string missing = dir.Sub("missing.key");
  expect_error(error_of(LoadCurveKeyPair(missing)), {missing, "No such file"});
  expect_error(error_of(LoadCurvePublicKey(missing)), {missing});
  expect_error(error_of(LoadCurveAllowList(missing)), {missing});

  const std::string loose = dir.Sub("loose.key");
  WriteFile(loose, "public " + keys.public_z85 + "\nsecret " + keys.secret_z85 + "\n", 0644);
  expect_error(error_of(LoadCurveKeyPair(loose)), {loose, "chmod 600"});

  const std::string garbled = dir.Sub("garbled.key");
  WriteFile(garbled, "# comment\npublic " + keys.public_z85 + "\nsecret not-a-key\n", 0600);
  const std::string err = error_of(LoadCurveKeyPair(garbled));
  expect_error(err, {garbled + ":3", "Z85"});
  EXPECT_EQ(err.find("not-a-key"), std::string::npos) << "secret material echoed: " << err;

  const std::string mismatched = dir.Sub("mismatched.key");
  WriteFile(mismatched, "public " + other.public_z85 + "\nsecret " + keys.secret_z85 + "\n", 0600);
  expect_error(error_of(LoadCurveKeyPair(mismatched)), {mismatched, "does not belong"});

  const std::string empty = dir.Sub("empty.key");
  WriteFile(empty, "# nothing here\n", 0600);
  expect_error(error_of(LoadCurveKeyPair(empty)), {empty, "no 'secret"});
  expect_error(error_of(LoadCurvePublicKey(empty)), {empty, "no public key"});

  // Swapping the two files is the likely mistake; both say what to do.
  ASSERT_TRUE(WriteCurveKeyPair(keys, dir.Sub("w"), "w").ok());
  expect_error(error_of(LoadCurveKeyPair(dir.Sub("w.pub"))), {"public key file"});
  expect_error(error_of(LoadCurvePublicKey(dir.Sub("w"))), {"secret key file", ".pub"});
  expect_error(error_of(LoadCurveAllowList(dir.Sub("w"))), {"secret key file"});

  const std::string truncated = dir.Sub("truncated.pub");
  WriteFile(truncated, keys.public_z85.substr(0, 30) + "\n");
  expect_error(error_of(LoadCurvePublicKey(truncated)), {truncated + ":1", "40-character"});
}

TEST(CurveKeys, AllowListFormat) {
  TempDir dir;
  const CurveKeyPair a = NewKeys(), b = NewKeys();
  // '#' is a Z85 digit: a key may start with it and still be a key.
  std::string hash_key = "#" + a.public_z85.substr(1);
  if (!IsValidCurveKey(hash_key)) hash_key = b.public_z85;  // not every such string decodes
  const std::string path = dir.Sub("allowed");
  WriteFile(path,
            "# fleet A\n"
            "\n" +
                a.public_z85 + "   worker-a  (rack 3)  \n" + "   " + b.public_z85 + "\n" +
                a.public_z85 + " duplicate\n" + hash_key + " hash\n");
  auto list = LoadCurveAllowList(path);
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_GE(list->size(), 2u);
  EXPECT_EQ((*list)[0].public_z85, a.public_z85);
  EXPECT_EQ((*list)[0].name, "worker-a  (rack 3)");
  EXPECT_EQ((*list)[1].public_z85, b.public_z85);
  EXPECT_EQ((*list)[1].name, "");
  bool found_hash = false;
  for (const auto& k : *list) found_hash |= k.public_z85 == hash_key;
  EXPECT_TRUE(found_hash);

  const std::string bad = dir.Sub("bad");
  WriteFile(bad, a.public_z85 + "\nworker-b\n");
  auto r = LoadCurveAllowList(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(bad + ":2"), std::string::npos) << r.status().message();

  const std::string none = dir.Sub("none");
  WriteFile(none, "# everyone was removed\n");
  r = LoadCurveAllowList(none);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no keys"), std::string::npos) << r.status().message();
}

TEST(CurveKeys, LoopbackEndpoints) {
  for (const char* e : {"tcp://127.0.0.1:5555", "tcp://127.0.0.1:*", "tcp://127.1.2.3:9",
                        "tcp://localhost:5555", "tcp://LOCALHOST:1", "tcp://[::1]:5555",
                        "tcp://lo:5555", "ipc:///run/tunefarm.sock", "inproc://results",
                        "tcp://10.0.0.1:4000;127.0.0.1:5555"}) {
    EXPECT_TRUE(IsLoopbackEndpoint(e)) << e;
  }
  for (const char* e : {"tcp://*:5555", "tcp://0.0.0.0:5555", "tcp://10.0.0.7:5555",
                        "tcp://coord.example.com:5555", "tcp://127.0.0.1.evil.com:5555",
                        "tcp://localhost.evil.com:1", "tcp://[::]:5555", "tcp://eth0:5555",
                        "tcp://127.0.0.1;10.0.0.1:5555", "tcp://1270.0.0.1:1", "pgm://eth0;239.0.0.1:5",
                        "tcp://127.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackEndpoint(e)) << e;
  }
}

// ---------------------------------------------------------------------------
// Sockets: a coordinator-like CURVE ROUTER behind a ZapAuthenticator.

class CurveLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = NewKeys();
    allowed_ = NewKeys();
    unknown_ = NewKeys();
    allow_list_ = dir_.Sub("allowed_workers");
    WriteFile(allow_list_, "# workers\n" + allowed_.public_z85 + " worker-a\n");
    ZapAuthenticatorOptions opts;
    opts.log = log_.fn();
    auto zap = ZapAuthenticator::FromFile(ctx_, allow_list_, opts);
    ASSERT_TRUE(zap.ok()) << zap.status().message();
    zap_ = std::move(*zap);
    ASSERT_TRUE(zap_->Start().ok());

    router_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::router);
    router_->set(zmq::sockopt::linger, 0);
    ASSERT_TRUE(ConfigureCurveServer(*router_, server_).ok());
    router_->bind("tcp://127.0.0.1:*");
    endpoint_ = router_->get(zmq::sockopt::last_endpoint);
  }

  void TearDown() override {
    for (auto& d : dealers_) d->close();
    if (router_) router_->close();
    if (zap_) zap_->Stop();
  }

  // A DEALER as a worker would set it up; `keys` null = plaintext.
  zmq::socket_t& Dealer(const CurveKeyPair* keys, const std::string& server_public) {
    dealers_.push_back(std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer));
    zmq::socket_t& d = *dealers_.back();
    d.set(zmq::sockopt::linger, 0);
    if (keys) {
      EXPECT_TRUE(ConfigureCurveClient(d, *keys, server_public).ok());
    }
    d.connect(endpoint_);
    return d;
  }

  void SendHello(zmq::socket_t& dealer, const std::string& worker) {
    const std::string frame = EncodeEnvelope(MakeHello(worker));
    dealer.send(zmq::buffer(frame), zmq::send_flags::dontwait);
  }

  TempDir dir_;
  LogSink log_;
  zmq::context_t ctx_;
  CurveKeyPair server_, allowed_, unknown_;
  std::string allow_list_, endpoint_;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::unique_ptr<zmq::socket_t> router_;
  std::vector<std::unique_ptr<zmq::socket_t>> dealers_;
};

TEST_F(CurveLinkTest, AllowedWorkerExchangesEnvelopes) {
  zmq::socket_t& dealer = Dealer(&allowed_, server_.public_z85);
  SendHello(dealer, "host-a:42");

  auto got = RecvWithin(*router_, kArrives);
  ASSERT_TRUE(got.has_value()) << "allowed worker's hello never arrived";
  ASSERT_EQ(got->size(), 2u);  // identity, envelope
  zmq::message_t& frame = (*got)[1];
  auto env = DecodeEnvelope(frame.data(), frame.size());
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->seq, 7u);
  EXPECT_EQ(env->sender, "host-a:42");
  ASSERT_TRUE(std::holds_alternative<Hello>(env->command));
  const Hello& hello = std::get<Hello>(env->command);
  EXPECT_EQ(hello.worker_name, "host-a:42");
  ASSERT_EQ(hello.devices.size(), 1u);
  EXPECT_EQ(hello.devices[0].model, "h100-80gb-hbm3");

  // The coordinator learns which key the sender proved it holds.
  EXPECT_EQ(AdmittedKey(frame), allowed_.public_z85);
  EXPECT_STREQ(frame.gets("Key-Name"), "worker-a");
  EXPECT_EQ(zap_->accepted(), 1u);
  EXPECT_TRUE(log_.Contains("admitted CURVE key " + allowed_.public_z85 + " (worker-a)"));

  // And the reply travels back encrypted to the same peer.
  Envelope ack;
  ack.seq = 1;
  ack.sender = "coordinator";
  ack.command = HelloAck{250, 4};
  const std::string ack_frame = EncodeEnvelope(ack);
  router_->send((*got)[0], zmq::send_flags::sndmore);
  router_->send(zmq::buffer(ack_frame), zmq::send_flags::none);
  auto back = RecvWithin(dealer, kArrives);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 1u);
  auto decoded = DecodeEnvelope((*back)[0].data(), (*back)[0].size());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_TRUE(std::holds_alternative<HelloAck>(decoded->command));
  EXPECT_EQ(std::get<HelloAck>(decoded->command).heartbeat_ms, 250u);
  EXPECT_EQ(std::get<HelloAck>(decoded->command).liveness, 4u);
}

TEST_F(CurveLinkTest, UnknownKeyGetsNothingThrough) {
  zmq::socket_t& dealer = Dealer(&unknown_, server_.public_z85);
  SendHello(dealer, "intruder:1");
  EXPECT_FALSE(RecvWithin(*router_, kNothingArrives).has_value());
  EXPECT_GE(zap_->refused(), 1u);
  EXPECT_EQ(zap_->accepted(), 0u);
  EXPECT_TRUE(log_.Contains("refused CURVE key " + unknown_.public_z85)) << "refusal not logged";
  EXPECT_TRUE(log_.Contains("not on the allow-list"));
  // Refused peers reconnect constantly; the log names each one once a minute.
  size_t refusals = 0;
  {
    std::lock_guard lock(log_.mu);
    for (const auto& l : log_.lines) refusals += l.find("refused") != std::string::npos;
  }
  EXPECT_EQ(refusals, 1u);
}

TEST_F(CurveLinkTest, PlaintextClientGetsNothingThrough) {
  zmq::socket_t& dealer = Dealer(nullptr, "");
  SendHello(dealer, "plaintext:1");
  EXPECT_FALSE(RecvWithin(*router_, kNothingArrives).has_value());
  // The server was there all along: an allowed worker still gets through.
  SendHello(Dealer(&allowed_, server_.public_z85), "host-a:1");
  EXPECT_TRUE(RecvWithin(*router_, kArrives).has_value());
}

TEST_F(CurveLinkTest, ClientRefusesAnImpostorServer) {
  // The worker was told another server key: whoever answers on this
  // endpoint cannot prove it holds that key's secret.
  const CurveKeyPair impostor = NewKeys();
  zmq::socket_t& dealer = Dealer(&allowed_, impostor.public_z85);
  SendHello(dealer, "host-a:2");
  EXPECT_FALSE(RecvWithin(*router_, kNothingArrives).has_value());
}

TEST_F(CurveLinkTest, ReloadedAllowListAdmitsNewKey) {
  WriteFile(allow_list_, allowed_.public_z85 + " worker-a\n" + unknown_.public_z85 + " worker-b\n");
  ASSERT_TRUE(zap_->Reload().ok());
  EXPECT_EQ(zap_->allowed_count(), 2u);
  SendHello(Dealer(&unknown_, server_.public_z85), "host-b:1");
  auto got = RecvWithin(*router_, kArrives);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(AdmittedKey((*got)[1]), unknown_.public_z85);

  // A list that holds no key admits nobody: revocation fails closed.
  WriteFile(allow_list_, "oops\n");
  Status st = zap_->Reload();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(allow_list_ + ":1"), std::string::npos) << st.message();
  EXPECT_EQ(zap_->allowed_count(), 0u);
}

// A list replaced by a FIFO (or a device, a folder) is refused at once, not
// waited on: a re-read runs on the handler's thread, and an open() blocked
// on a FIFO with no writer would hold every handshake for good. Refused, the
// list counts as empty (fails closed), and a good list later applies.
TEST_F(CurveLinkTest, AnAllowListReplacedByAFifoIsRefusedNotWaitedOn) {
  ASSERT_EQ(zap_->allowed_count(), 1u);
  fs::remove(allow_list_);
  ASSERT_EQ(::mkfifo(allow_list_.c_str(), 0644), 0);
  Status st = zap_->Reload();  // before the fix: blocked in open() for good
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(allow_list_ + " is not a regular file"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  EXPECT_EQ(zap_->allowed_count(), 0u);
  SendHello(Dealer(&allowed_, server_.public_z85), "host-a:30");
  EXPECT_FALSE(RecvWithin(*router_, kNothingArrives).has_value()) << "a key of the refused list got in";

  // A folder in its place is refused the same way.
  fs::remove(allow_list_);
  fs::create_directory(allow_list_);
  st = zap_->Reload();
  EXPECT_NE(st.message().find(allow_list_ + " is not a regular file"), std::string::npos) << st.message();

  // The handler still answers, and a good list applies again.
  fs::remove(allow_list_);
  WriteFile(allow_list_, allowed_.public_z85 + " worker-a\n");
  ASSERT_TRUE(zap_->Reload().ok());
  EXPECT_EQ(zap_->allowed_count(), 1u);
  SendHello(Dealer(&allowed_, server_.public_z85), "host-a:31");
  auto got = RecvWithin(*router_, kArrives);
  ASSERT_TRUE(got.has_value()) << "the handler no longer answers";
  EXPECT_EQ(AdmittedKey((*got)[1]), allowed_.public_z85);
}

// The watching handler meets the FIFO on its own thread and still answers.
TEST_F(CurveLinkTest, AWatchedAllowListReplacedByAFifoLeavesTheHandlerAnswering) {
  zap_->Stop();
  ZapAuthenticatorOptions opts;
  opts.log = log_.fn();
  opts.reload_check_seconds = 0.05;
  auto watching = ZapAuthenticator::FromFile(ctx_, allow_list_, opts);
  ASSERT_TRUE(watching.ok());
  ZapAuthenticator& zap = **watching;
  ASSERT_TRUE(zap.Start().ok());

  fs::remove(allow_list_);
  ASSERT_EQ(::mkfifo(allow_list_.c_str(), 0644), 0);
  ASSERT_TRUE(WaitFor([&] { return log_.Contains(allow_list_ + " is not a regular file"); }, 3000ms))
      << "the FIFO was never refused";
  EXPECT_EQ(zap.allowed_count(), 0u);

  fs::remove(allow_list_);
  WriteFile(allow_list_ + ".new", allowed_.public_z85 + " worker-a\n");
  fs::rename(allow_list_ + ".new", allow_list_);
  ASSERT_TRUE(WaitFor([&] { return zap.allowed_count() == 1; }, 3000ms)) << "the handler stopped re-reading";
  SendHello(Dealer(&allowed_, server_.public_z85), "host-a:32");
  EXPECT_TRUE(RecvWithin(*router_, kArrives).has_value()) << "the handler no longer answers";
  router_->close();
  router_.reset();
  zap.Stop();
}

// The coordinator's per-message rule, for a frame from a live connection:
// a key whose role is gone is disconnected.
bool Admitted(const ZapAuthenticator& zap, zmq::socket_t& router, zmq::socket_t& dealer, const std::string& key,
              const std::string& worker) {
  const std::string frame = EncodeEnvelope(MakeHello(worker));
  dealer.send(zmq::buffer(frame), zmq::send_flags::dontwait);
  auto got = RecvWithin(router, kArrives);
  EXPECT_TRUE(got.has_value()) << worker << ": a live connection's message never arrived";
  if (!got || got->size() != 2) return false;
  EXPECT_EQ(AdmittedKey((*got)[1]), key);
  return zap.RoleOf(AdmittedKey((*got)[1])) == PeerRole::kWorker;
}

// Emptied, or gone, the list revokes every key of its role, live
// connections included, within the re-read period.
TEST_F(CurveLinkTest, AnEmptiedOrMissingAllowListRevokesEveryKey) {
  zap_->Stop();
  ZapAuthenticatorOptions opts;
  opts.log = log_.fn();
  opts.reload_check_seconds = 0.05;
  auto watching = ZapAuthenticator::FromFile(ctx_, allow_list_, opts);
  ASSERT_TRUE(watching.ok());
  ZapAuthenticator& zap = **watching;
  ASSERT_TRUE(zap.Start().ok());
  zmq::socket_t& live = Dealer(&allowed_, server_.public_z85);
  ASSERT_TRUE(Admitted(zap, *router_, live, allowed_.public_z85, "host-a:10"));

  WriteFile(allow_list_, "");
  ASSERT_TRUE(WaitFor([&] { return log_.Contains("loaded: 0 key"); }, 3000ms)) << "the emptied list was kept";
  EXPECT_EQ(zap.allowed_count(), 0u);
  EXPECT_FALSE(Admitted(zap, *router_, live, allowed_.public_z85, "host-a:11")) << "the live connection stays in";
  SendHello(Dealer(&allowed_, server_.public_z85), "host-a:12");
  EXPECT_FALSE(RecvWithin(*router_, kNothingArrives).has_value()) << "a new handshake got in";

  WriteFile(allow_list_, allowed_.public_z85 + " worker-a\n");
  ASSERT_TRUE(WaitFor([&] { return zap.allowed_count() == 1; }, 3000ms));
  EXPECT_TRUE(Admitted(zap, *router_, live, allowed_.public_z85, "host-a:13"));
  fs::remove(allow_list_);
  ASSERT_TRUE(WaitFor([&] { return log_.Contains("no worker is admitted until it can be read"); }, 3000ms))
      << "a deleted list was kept";
  EXPECT_EQ(zap.allowed_count(), 0u);
  EXPECT_FALSE(Admitted(zap, *router_, live, allowed_.public_z85, "host-a:14"));
  router_->close();
  router_.reset();
  zap.Stop();
}

// A malformed line is skipped and named; the good lines are the list: the
// key taken off loses its connection, the key still listed keeps its own.
TEST_F(CurveLinkTest, AMalformedLineIsSkippedAndTheRestOfTheListApplies) {
  WriteFile(allow_list_, allowed_.public_z85 + " worker-a\n" + unknown_.public_z85 + " worker-b\n");
  zap_->Stop();
  ZapAuthenticatorOptions opts;
  opts.log = log_.fn();
  opts.reload_check_seconds = 0.05;
  auto watching = ZapAuthenticator::FromFile(ctx_, allow_list_, opts);
  ASSERT_TRUE(watching.ok());
  ZapAuthenticator& zap = **watching;
  ASSERT_TRUE(zap.Start().ok());
  zmq::socket_t& a = Dealer(&allowed_, server_.public_z85);
  zmq::socket_t& b = Dealer(&unknown_, server_.public_z85);
  ASSERT_TRUE(Admitted(zap, *router_, a, allowed_.public_z85, "host-a:20"));
  ASSERT_TRUE(Admitted(zap, *router_, b, unknown_.public_z85, "host-b:20"));

  WriteFile(allow_list_ + ".new", "# a is gone\nnot-a-key oops\n" + unknown_.public_z85 + " worker-b\n");
  fs::rename(allow_list_ + ".new", allow_list_);
  ASSERT_TRUE(WaitFor([&] { return log_.Contains("loaded: 1 key"); }, 3000ms)) << "the edited list was not applied";
  EXPECT_TRUE(log_.Contains(allow_list_ + ":2: 'not-a-key' is not a 40-character Z85 public key (line skipped)"));
  EXPECT_FALSE(Admitted(zap, *router_, a, allowed_.public_z85, "host-a:21")) << "the removed key stays in";
  EXPECT_TRUE(Admitted(zap, *router_, b, unknown_.public_z85, "host-b:21")) << "the listed key lost its role";
  SendHello(Dealer(&allowed_, server_.public_z85), "host-a:22");
  EXPECT_FALSE(RecvWithin(*router_, kNothingArrives).has_value()) << "the removed key's new handshake got in";
  SendHello(Dealer(&unknown_, server_.public_z85), "host-b:22");
  EXPECT_TRUE(RecvWithin(*router_, kArrives).has_value()) << "the listed key's new handshake was refused";
  router_->close();
  router_.reset();
  zap.Stop();
}

TEST_F(CurveLinkTest, WatchesTheAllowListFile) {
  // A second authenticator cannot take over the context's ZAP endpoint.
  ZapAuthenticator second(ctx_, {});
  EXPECT_FALSE(second.Start().ok());

  zap_->Stop();
  ZapAuthenticatorOptions opts;
  opts.log = log_.fn();
  opts.reload_check_seconds = 0.05;
  auto watching = ZapAuthenticator::FromFile(ctx_, allow_list_, opts);
  ASSERT_TRUE(watching.ok());
  ASSERT_TRUE((*watching)->Start().ok());
  WriteFile(allow_list_ + ".new", unknown_.public_z85 + " worker-b\n");
  fs::rename(allow_list_ + ".new", allow_list_);  // as an editor or ansible would
  ASSERT_TRUE(WaitFor([&] { return log_.Contains("loaded: 1 key"); }, 3000ms));

  SendHello(Dealer(&unknown_, server_.public_z85), "host-b:2");
  EXPECT_TRUE(RecvWithin(*router_, kArrives).has_value());
  SendHello(Dealer(&allowed_, server_.public_z85), "host-a:3");  // removed from the list
  EXPECT_FALSE(RecvWithin(*router_, kNothingArrives).has_value());
  router_->close();
  router_.reset();
  (*watching)->Stop();
}

// Why the authenticator must run before the server binds, and why the
// coordinator checks AdmittedKey(): without a ZAP handler libzmq lets any
// CURVE key in, and nothing but the missing User-Id tells.
TEST(CurveNoHandler, AdmitsAnyKeyButLeavesNoAdmittedKey) {
  zmq::context_t ctx;
  const CurveKeyPair server = NewKeys(), stranger = NewKeys();
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  ASSERT_TRUE(ConfigureCurveServer(router, server).ok());
  router.bind("tcp://127.0.0.1:*");
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  ASSERT_TRUE(ConfigureCurveClient(dealer, stranger, server.public_z85).ok());
  dealer.connect(router.get(zmq::sockopt::last_endpoint));
  const std::string frame = EncodeEnvelope(MakeHello("stranger:1"));
  dealer.send(zmq::buffer(frame), zmq::send_flags::none);
  auto got = RecvWithin(router, kArrives);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(AdmittedKey((*got)[1]), "");
}

TEST(CurveSockets, RejectMalformedKeys) {
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  const CurveKeyPair keys = NewKeys();
  EXPECT_FALSE(ConfigureCurveClient(s, keys, "short").ok());
  EXPECT_FALSE(ConfigureCurveClient(s, CurveKeyPair{"x", "y"}, keys.public_z85).ok());
  EXPECT_FALSE(ConfigureCurveServer(s, CurveKeyPair{keys.public_z85, ""}).ok());
}

}  // namespace
}  // namespace tune
