// The coordinator's HTTP side over real loopback sockets: a plain POSIX
// client (so that it can also send what no HTTP library would) against an
// HttpServer fed by a fixed status source standing in for the coordinator.
// Long on purpose: one suite per component, each HTTP behaviour (phases,
// deadlines, caps, eviction, pipelining, assets) a test of its own.
#include "dashboard.h"
#include "serve/http_server.h"
#include "serve/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tune {
namespace {

using Clock = std::chrono::steady_clock;

// A server as the coordinator runs it: its dashboard page and documents.
HttpServerOptions DashboardOptions() {
  HttpServerOptions opts;
  opts.page = DashboardPage();
  opts.documents = DashboardDocuments();
  return opts;
}

// Stands in for the coordinator's snapshot: fixed documents, swappable at
// run time, and switchable into failure modes.
class FakeStatusSource : public HttpStatusSource {
 public:
  FakeStatusSource() {
    docs_["sweeps"] =
        R"({"now_unix":1700000100,"sweeps":[{"id":"s1","name":"nightly-gemm","state":"running",)"
        R"("pairs_done":40,"pairs_total":100,"pairs_failed":2,"units_done":4,"units_total":10,)"
        R"("gpu_models":["h100-80gb-hbm3"],"started_unix":1700000000,"finished_unix":0}]})";
    docs_["workers"] =
        R"({"workers":[{"name":"gpu1:42","leases":1,"last_seen_seconds":0.2,"devices":[)"
        R"({"index":0,"name":"NVIDIA H100 80GB HBM3","model":"h100-80gb-hbm3","backend":"cuda",)"
        R"("cc":"9.0","num_sms":132,"total_mem_bytes":85899345920}]}]})";
    docs_["best"] =
        R"({"best":[{"op":"gemm","dtype":"f16","shape":"M=4096,N=4096,K=4096",)"
        R"("gpu_model":"h100-80gb-hbm3","config":"BK=32,BM=128","median_us":812.5,)"
        R"("stdev_us":3.1,"samples":50,"backend":"cuda"}]})";
    docs_["compare"] =
        R"({"groups":[{"op":"gemm","dtype":"f16","shape":"M=4096,N=4096,K=4096","gpus":[)"
        R"({"gpu_model":"h100-80gb-hbm3","median_us":812.5,"config":"BK=32","backend":"cuda"},)"
        R"({"gpu_model":"a100-sxm4-80gb","median_us":1530.0,"config":"BK=64","backend":"cuda"}]}]})";
    metrics_ = "# TYPE tunefarm_workers gauge\ntunefarm_workers 1\n";
  }

  std::string Json(const std::string& what) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if (throw_) throw std::runtime_error("snapshot exploded");
    auto it = docs_.find(what);
    return it == docs_.end() ? std::string() : it->second;
  }
  std::string Metrics() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if (throw_) throw std::runtime_error("snapshot exploded");
    return metrics_;
  }

  std::string Doc(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    return docs_[what];
  }
  void Set(const std::string& what, std::string doc) {
    std::lock_guard<std::mutex> lock(mu_);
    docs_[what] = std::move(doc);
  }
  void SetThrow(bool t) {
    std::lock_guard<std::mutex> lock(mu_);
    throw_ = t;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::string metrics() {
    std::lock_guard<std::mutex> lock(mu_);
    return metrics_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> docs_;
  std::string metrics_;
  bool throw_ = false;
  int calls_ = 0;
};

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// One TCP connection to the server, speaking bytes. `from` binds the local
// end to an address of its own: Linux routes all of 127/8 to loopback, so
// 127.0.0.2 is another client address for the server. `rcvbuf` (bytes, 0 =
// the kernel's autotuning) bounds how much of a response the kernel takes in
// for a client that does not read.
class Connection {
 public:
  explicit Connection(uint16_t port, const char* host = "127.0.0.1", const char* from = nullptr,
                      int rcvbuf = 0) {
    const bool v6 = std::strchr(host, ':') != nullptr;
    fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (from && !v6) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      inet_pton(AF_INET, from, &local.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) return;
    }
    int rc = -1;
    if (v6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(port);
      inet_pton(AF_INET6, host, &a.sin6_addr);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      inet_pton(AF_INET, host, &a.sin_addr);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    connected_ = rc == 0;
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // Reads until `buf_` holds `n` bytes, EOF or the deadline. False on EOF or
  // timeout before `n` bytes.
  bool Fill(size_t n, Clock::time_point deadline) {
    while (buf_.size() < n) {
      if (!ReadSome(deadline)) return false;
    }
    return true;
  }

  // Parses one response (HEAD: no body). nullopt on EOF, timeout or garbage.
  std::optional<Response> ReadResponse(bool head = false, double seconds = 5) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(seconds));
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadSome(deadline)) return std::nullopt;
    }
    const std::string head_text = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    Response r;
    size_t line_end = head_text.find("\r\n");
    const std::string status_line = head_text.substr(0, line_end);
    if (std::sscanf(status_line.c_str(), "HTTP/%*d.%*d %d", &r.status) != 1) return std::nullopt;
    size_t pos = line_end == std::string::npos ? head_text.size() : line_end + 2;
    while (pos < head_text.size()) {
      size_t e = head_text.find("\r\n", pos);
      if (e == std::string::npos) e = head_text.size();
      const std::string line = head_text.substr(pos, e - pos);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[name] = value;
      }
      pos = e + 2;
    }
    if (head) return r;
    const size_t length = std::stoul(r.Header("content-length").empty() ? "0"
                                                                         : r.Header("content-length"));
    if (!Fill(length, deadline)) return std::nullopt;
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  // True when the server closes the connection (EOF or reset) before the
  // deadline; what arrives first is kept in received().
  bool ClosedByPeer(double seconds = 5) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(seconds));
    while (Clock::now() < deadline) {
      if (!ReadSome(deadline)) return eof_;
    }
    return false;
  }

  // Without waiting: false once the server has closed the connection.
  bool Alive() {
    pollfd p{fd_, POLLIN, 0};
    if (!eof_ && ::poll(&p, 1, 0) > 0) {
      char chunk[8192];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n <= 0) eof_ = true;
      else buf_.append(chunk, static_cast<size_t>(n));
    }
    return connected_ && !eof_;
  }

  // Waits until the first response byte arrives, without consuming it.
  bool WaitReadable(double seconds) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(seconds * 1000)) > 0;
  }

  // Bytes read but not parsed into a response yet.
  const std::string& received() const { return buf_; }

 private:
  // False on EOF, error or timeout.
  bool ReadSome(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[8192];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

std::string Get(const std::string& target, bool keep_alive = true) {
  return "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n" +
         (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
}

std::optional<Response> Fetch(uint16_t port, const std::string& target,
                              const std::string& method = "GET") {
  Connection c(port);
  if (!c.connected()) return std::nullopt;
  if (!c.Send(method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")) {
    return std::nullopt;
  }
  return c.ReadResponse(method == "HEAD");
}

class HttpServerTest : public ::testing::Test {
 protected:
  // The coordinator's page and documents unless a test gives its own.
  void StartServer(HttpServerOptions opts = DashboardOptions()) {
    server_ = std::make_unique<HttpServer>(std::move(opts), &source_);
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_NE(server_->port(), 0);
  }
  // The server answers a plain request: the check after every abuse.
  void ExpectHealthy() {
    auto r = Fetch(server_->port(), "/api/sweeps");
    ASSERT_TRUE(r.has_value()) << "server stopped answering";
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, source_.Doc("sweeps"));
  }

  FakeStatusSource source_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, ServesEveryJsonEndpointFromTheSource) {
  StartServer();
  for (const std::string what : {"sweeps", "workers", "best", "compare"}) {
    auto r = Fetch(server_->port(), "/api/" + what);
    ASSERT_TRUE(r.has_value()) << what;
    EXPECT_EQ(r->status, 200) << what;
    EXPECT_EQ(r->Header("content-type"), "application/json") << what;
    EXPECT_EQ(r->Header("cache-control"), "no-store") << what;
    EXPECT_EQ(r->Header("x-content-type-options"), "nosniff") << what;
    EXPECT_EQ(r->body, source_.Doc(what)) << what;
    EXPECT_TRUE(nlohmann::json::accept(r->body)) << what;
  }
}

TEST_F(HttpServerTest, ServesPrometheusMetrics) {
  StartServer();
  auto r = Fetch(server_->port(), "/metrics");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("content-type").rfind("text/plain; version=0.0.4", 0), 0u)
      << r->Header("content-type");
  EXPECT_EQ(r->body, source_.metrics());
}

TEST_F(HttpServerTest, ServesTheDashboardPage) {
  StartServer();
  auto r = Fetch(server_->port(), "/");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(r->Header("content-security-policy").find("connect-src 'self'"), std::string::npos);
  EXPECT_NE(r->body.find("<title>tunefarm</title>"), std::string::npos);
  for (const char* id : {"id=\"sweeps\"", "id=\"workers-body\"", "id=\"compare\"", "id=\"best-body\""}) {
    EXPECT_NE(r->body.find(id), std::string::npos) << id;
  }
  // Nothing is loaded from another origin.
  EXPECT_EQ(r->body.find("src=\"http"), std::string::npos);
  EXPECT_EQ(r->body.find("href=\"http"), std::string::npos);
  // The page itself never asks the source; only its polls do.
  auto idx = Fetch(server_->port(), "/index.html");
  ASSERT_TRUE(idx.has_value());
  EXPECT_EQ(idx->body, r->body);
}

TEST_F(HttpServerTest, HealthzAndQueryStrings) {
  StartServer();
  auto h = Fetch(server_->port(), "/healthz");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->body, "ok\n");
  auto q = Fetch(server_->port(), "/api/workers?since=10&x=%20");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->status, 200);
  EXPECT_EQ(q->body, source_.Doc("workers"));
}

TEST_F(HttpServerTest, UnknownPathsAre404) {
  StartServer();
  for (const std::string target : {"/nope", "/api/", "/api/sweepsX", "/api/sweeps/1", "//",
                                   "/metrics/", "/../etc/passwd", "*"}) {
    auto r = Fetch(server_->port(), target);
    ASSERT_TRUE(r.has_value()) << target;
    EXPECT_EQ(r->status, 404) << target;
  }
  ExpectHealthy();
}

// A worker's server: metrics and health only, no page, no documents.
TEST_F(HttpServerTest, AServerWithoutPageOrDocumentsServesMetricsOnly) {
  HttpServerOptions opts;
  StartServer(opts);
  EXPECT_FALSE(server_->has_chart_js());
  for (const std::string target : {"/", "/index.html", "/api/sweeps", "/api/workers"}) {
    auto r = Fetch(server_->port(), target);
    ASSERT_TRUE(r.has_value()) << target;
    EXPECT_EQ(r->status, 404) << target;
    EXPECT_EQ(r->body, "not found; try /metrics\n") << target;
  }
  auto m = Fetch(server_->port(), "/metrics");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->body, source_.Metrics());
}

TEST_F(HttpServerTest, OtherMethodsAre405WithAllow) {
  StartServer();
  for (const std::string method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    auto r = Fetch(server_->port(), "/api/sweeps", method);
    ASSERT_TRUE(r.has_value()) << method;
    EXPECT_EQ(r->status, 405) << method;
    EXPECT_EQ(r->Header("allow"), "GET, HEAD") << method;
  }
  // A POST with a body leaves a keep-alive connection usable.
  Connection c(server_->port());
  ASSERT_TRUE(c.Send("POST /api/sweeps HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
                     Get("/api/best")));
  auto first = c.ReadResponse();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->status, 405);
  auto second = c.ReadResponse();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body, source_.Doc("best"));
}

TEST_F(HttpServerTest, HeadAnnouncesLengthWithoutBody) {
  StartServer();
  Connection c(server_->port());
  ASSERT_TRUE(c.Send("HEAD /api/compare HTTP/1.1\r\nHost: x\r\n\r\n" + Get("/api/workers")));
  auto head = c.ReadResponse(/*head=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Header("content-length"), std::to_string(source_.Doc("compare").size()));
  // The next response starts right after the head: no body bytes in between.
  auto next = c.ReadResponse();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->status, 200);
  EXPECT_EQ(next->body, source_.Doc("workers"));
}

TEST_F(HttpServerTest, KeepAliveAndPipelining) {
  StartServer();
  Connection c(server_->port());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(c.Send(Get("/api/sweeps")));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->Header("connection"), "close");
  }
  // Four requests in one write come back as four responses, in order.
  ASSERT_TRUE(c.Send(Get("/api/sweeps") + Get("/api/workers") + Get("/nope") + Get("/metrics", false)));
  for (const std::string want : {"sweeps", "workers", "404", "metrics"}) {
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.has_value()) << want;
    if (want == "404") {
      EXPECT_EQ(r->status, 404);
    } else if (want == "metrics") {
      EXPECT_EQ(r->body, source_.metrics());
      EXPECT_EQ(r->Header("connection"), "close");
    } else {
      EXPECT_EQ(r->body, source_.Doc(want));
    }
  }
  EXPECT_TRUE(c.ClosedByPeer());
}

TEST_F(HttpServerTest, Http10ClosesAfterTheResponse) {
  StartServer();
  Connection c(server_->port());
  ASSERT_TRUE(c.Send("GET /api/best HTTP/1.0\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, source_.Doc("best"));
  EXPECT_TRUE(c.ClosedByPeer());
}

TEST_F(HttpServerTest, GarbageIs400AndTheServerKeepsServing) {
  StartServer();
  const std::vector<std::string> garbage = {
      "hello\r\n\r\n",
      "GET\r\n\r\n",
      "GET / HTTP/1.1\r\nHost x\r\n\r\n",                             // header without a colon
      "GET / HTTP/1.1\r\nContent-Length: banana\r\n\r\n",
      "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
      "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",     // bad chunk size
      "GET / HTTP/1.1\n\n",                                             // bare line feeds
      "G\xc3\x28T / HTTP/1.1\r\n\r\n",
      std::string("GET /\0 HTTP/1.1\r\n\r\n", 20),
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",          // a TLS hello
  };
  for (const auto& g : garbage) {
    Connection c(server_->port());
    ASSERT_TRUE(c.Send(g));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.has_value()) << "no answer to " << ::testing::PrintToString(g);
    EXPECT_EQ(r->status, 400) << ::testing::PrintToString(g);
    EXPECT_EQ(r->Header("connection"), "close");
    EXPECT_TRUE(c.ClosedByPeer()) << ::testing::PrintToString(g);
    ExpectHealthy();
  }
}

TEST_F(HttpServerTest, RandomBytesNeverStopTheServer) {
  HttpServerOptions opts = DashboardOptions();
  opts.idle_timeout_seconds = 2;
  StartServer(opts);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> len(0, 3000), byte(0, 255), pick(0, 3);
  const std::string prefixes[] = {"", "GET / HTTP/1.1\r\n", "GET /api/sweeps HTTP/1.1\r\nHost: ",
                                  "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"};
  for (int i = 0; i < 200; ++i) {
    std::string bytes = prefixes[pick(rng)];
    const int n = len(rng);
    for (int k = 0; k < n; ++k) bytes += static_cast<char>(byte(rng));
    Connection c(server_->port());
    ASSERT_TRUE(c.connected());
    c.Send(bytes);
    c.ShutdownWrite();
    // Whatever comes back (a 400, a 431 or nothing), the connection ends.
    EXPECT_TRUE(c.ClosedByPeer(5)) << "iteration " << i;
  }
  ExpectHealthy();
}

TEST_F(HttpServerTest, OversizedRequestsAreRefused) {
  HttpServerOptions opts = DashboardOptions();
  opts.max_header_bytes = 1024;
  opts.max_body_bytes = 1024;
  StartServer(opts);
  {
    Connection c(server_->port());
    ASSERT_TRUE(c.Send("GET /api/sweeps HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(4000, 'a') +
                       "\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 431);
    EXPECT_TRUE(c.ClosedByPeer());
  }
  {
    Connection c(server_->port());
    ASSERT_TRUE(c.Send("GET " + std::string(4000, '/') + " HTTP/1.1\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 431);
  }
  {
    // The body keeps arriving after the refusal; the answer must still get through.
    Connection c(server_->port());
    const size_t size = 200000;
    std::thread sender([&] {
      c.Send("GET /api/sweeps HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(size) +
             "\r\n\r\n" + std::string(size, 'b'));
    });
    auto r = c.ReadResponse();
    sender.join();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 413);
  }
  {
    Connection c(server_->port());
    std::string chunked = "GET /api/sweeps HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 4; ++i) chunked += "200\r\n" + std::string(512, 'c') + "\r\n";
    chunked += "0\r\n\r\n";
    ASSERT_TRUE(c.Send(chunked));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 413);
  }
  ExpectHealthy();
}

TEST_F(HttpServerTest, IdleAndSlowConnectionsAreClosed) {
  HttpServerOptions opts = DashboardOptions();
  opts.idle_timeout_seconds = 0.3;
  StartServer(opts);
  Connection idle(server_->port());
  Connection slow(server_->port());
  ASSERT_TRUE(slow.Send("GET /api/sweeps HTTP/1.1\r\nHost: x\r\n"));  // never finished
  EXPECT_TRUE(idle.ClosedByPeer(5));
  EXPECT_TRUE(slow.ClosedByPeer(5));
  ExpectHealthy();
}

// At the connection limit a newcomer takes the slot of the connection whose
// client has owed its part longest: a complete request, or a read of the
// response being written.
TEST_F(HttpServerTest, AtTheLimitTheLongestWaitingConnectionGivesWay) {
  HttpServerOptions opts = DashboardOptions();
  opts.max_connections = 2;
  opts.max_connections_per_address = 0;
  StartServer(opts);
  Connection a(server_->port());
  Connection b(server_->port());
  for (Connection* c : {&a, &b}) {  // a first: a has waited longest
    ASSERT_TRUE(c->Send(Get("/healthz")));
    ASSERT_TRUE(c->ReadResponse().has_value());
  }
  Connection third(server_->port());
  ASSERT_TRUE(third.Send(Get("/healthz")));
  auto r = third.ReadResponse(false, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(a.ClosedByPeer(2));
  ASSERT_TRUE(b.Send(Get("/api/best")));
  auto rb = b.ReadResponse(false, 2);
  ASSERT_TRUE(rb.has_value()) << "b was younger than a and should have kept its slot";
  EXPECT_EQ(rb->body, source_.Doc("best"));
  EXPECT_EQ(server_->counters().evicted, 1u);
  EXPECT_EQ(server_->counters().refused, 0u);

  // A response the client does not read stalls the server's write: from
  // then on its client owes a read, longer than `idle` has owed a request,
  // so it is the one that gives way (reset), and `idle` keeps its slot.
  b.ShutdownWrite();
  third.ShutdownWrite();
  ASSERT_TRUE(b.ClosedByPeer(2));
  ASSERT_TRUE(third.ClosedByPeer(2));
  const std::string big(32u << 20, 'x');
  source_.Set("compare", big);
  Connection writer(server_->port(), "127.0.0.1", nullptr, 64 * 1024);
  ASSERT_TRUE(writer.Send(Get("/api/compare")));
  ASSERT_TRUE(writer.WaitReadable(2));
  Connection idle(server_->port());
  ASSERT_TRUE(idle.Send(Get("/healthz")));
  ASSERT_TRUE(idle.ReadResponse(false, 2).has_value());
  Connection fourth(server_->port());
  ASSERT_TRUE(fourth.Send(Get("/healthz")));
  auto r4 = fourth.ReadResponse(false, 2);
  ASSERT_TRUE(r4.has_value());
  EXPECT_EQ(r4->status, 200);
  EXPECT_TRUE(writer.ClosedByPeer(5));
  EXPECT_EQ(server_->counters().evicted, 2u);
  ASSERT_TRUE(idle.Send(Get("/api/best")));
  auto ri = idle.ReadResponse(false, 2);
  ASSERT_TRUE(ri.has_value()) << "the connection waiting for a request lost its slot to a stalled writer";
  EXPECT_EQ(ri->body, source_.Doc("best"));
}

// A reader that reads its response keeps its slot, being answered; one
// that stalls gives it to a newcomer, even when it is the only connection.
TEST_F(HttpServerTest, AtTheLimitAStalledResponseGivesWay) {
  HttpServerOptions opts = DashboardOptions();
  opts.max_connections = 1;
  StartServer(opts);
  const std::string big(32u << 20, 'x');
  source_.Set("compare", big);
  Connection writer(server_->port(), "127.0.0.1", nullptr, 64 * 1024);
  ASSERT_TRUE(writer.Send(Get("/api/compare", /*keep_alive=*/false)));
  ASSERT_TRUE(writer.WaitReadable(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // stalled, owing a read
  Connection newcomer(server_->port());
  ASSERT_TRUE(newcomer.Send(Get("/healthz")));
  auto r = newcomer.ReadResponse(false, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(writer.ClosedByPeer(5));
  EXPECT_FALSE(writer.ReadResponse(false, 5).has_value()) << "the stalled response was not cut short";
  EXPECT_EQ(server_->counters().refused, 0u);
  EXPECT_EQ(server_->counters().evicted, 1u);
}

// Requests sent before the answers to the ones before are served up to
// max_pipelined_requests in a row; the next is answered 429 and the
// connection closed. Requests sent after reading each answer are not
// pipelined, however many.
TEST_F(HttpServerTest, PipeliningIsCappedInDepth) {
  HttpServerOptions opts = DashboardOptions();
  opts.max_pipelined_requests = 3;
  StartServer(opts);
  Connection reader(server_->port());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(reader.Send(Get("/healthz")));
    auto r = reader.ReadResponse(false, 2);
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->status, 200);
  }
  Connection piper(server_->port());
  std::string burst;
  for (int i = 0; i < 8; ++i) burst += Get("/healthz");
  ASSERT_TRUE(piper.Send(burst));
  for (int i = 0; i < 4; ++i) {  // the first, then 3 pipelined
    auto r = piper.ReadResponse(false, 2);
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->status, 200) << i;
  }
  auto refused = piper.ReadResponse(false, 2);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 429);
  EXPECT_NE(refused->body.find("pipelined"), std::string::npos);
  EXPECT_TRUE(piper.ClosedByPeer(3));
  EXPECT_EQ(server_->counters().pipeline_refusals, 1u);
  ExpectHealthy();
}

// One response from `from` within `seconds`, or nullopt.
std::optional<Response> FetchFrom(uint16_t port, const char* from, const std::string& target,
                                  double seconds) {
  Connection c(port, "127.0.0.1", from);
  if (!c.connected() || !c.Send(Get(target, /*keep_alive=*/false))) return std::nullopt;
  return c.ReadResponse(false, seconds);
}

// Slowloris, kept up by a thread as an attacker would: every connection is
// held open without ever finishing its request (half send nothing after a
// request line, half trickle a header byte every 200 ms) and is reopened
// once the server closes it, a few per round: a flood of new connections
// faster than a request's round trip can displace anyone (http_server.h),
// which is not what this models.
class SlowClients {
 public:
  SlowClients(uint16_t port, std::vector<std::string> from, size_t count)
      : port_(port), from_(std::move(from)), conns_(count) {
    for (size_t i = 0; i < count; ++i) Open(i);
    thread_ = std::thread([this] { Run(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
  }
  SlowClients(const SlowClients&) = delete;
  SlowClients& operator=(const SlowClients&) = delete;

  size_t reopened() const { return reopened_; }

 private:
  void Open(size_t i) {
    conns_[i] = std::make_unique<Connection>(port_, "127.0.0.1", from_[i % from_.size()].c_str());
    if (i % 2) conns_[i]->Send("GET /api/sweeps HTTP/1.1\r\nHost: x\r\n");
  }

  void Run() {
    const std::string trickle = "X-Slow: 1\r\n";
    for (size_t round = 0; !stop_; ++round) {
      size_t reopened_this_round = 0;
      for (size_t i = 0; i < conns_.size() && !stop_; ++i) {
        if (!conns_[i]->Alive()) {
          if (reopened_this_round == kReopenPerRound) continue;
          Open(i);
          ++reopened_this_round;
          ++reopened_;
        } else if (i % 2) {
          conns_[i]->Send(std::string(1, trickle[round % trickle.size()]));
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  static constexpr size_t kReopenPerRound = 8;
  const uint16_t port_;
  const std::vector<std::string> from_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> reopened_{0};
  std::thread thread_;
};

class SlowClientTest : public HttpServerTest {
 protected:
  // With default options (64 slots, 16 per address, 10 s to send headers):
  // `count` slow clients from `slow_from`, then honest requests from
  // `honest_from` must each be answered within two seconds, again and again.
  void ExpectHonestClientsServed(std::vector<std::string> slow_from, size_t count,
                                 const std::vector<const char*>& honest_from) {
    StartServer();
    SlowClients slow(server_->port(), std::move(slow_from), count);
    auto seen = [&] {
      const HttpServerCounters c = server_->counters();
      return c.accepted + c.refused;
    };
    for (int i = 0; i < 250 && seen() < count; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GE(seen(), count);
    for (int round = 0; round < 5; ++round) {
      for (const char* from : honest_from) {
        for (const std::string target : {"/healthz", "/api/sweeps", "/"}) {
          auto r = FetchFrom(server_->port(), from, target, 2);
          ASSERT_TRUE(r.has_value()) << target << " from " << from << " in round " << round;
          EXPECT_EQ(r->status, 200) << target;
          if (target == "/api/sweeps") {
            EXPECT_EQ(r->body, source_.Doc("sweeps"));
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    const HttpServerCounters c = server_->counters();
    EXPECT_EQ(c.refused, 0u);
    EXPECT_LE(c.open, 64u);
    EXPECT_GE(c.evicted, count - 64);
    EXPECT_GT(slow.reopened(), 0u) << "the slow clients never lost a slot";
  }
};

// 128 slow clients from 8 addresses (16 each, the per-address cap) fill the
// 64 slots twice over; honest clients, from one of those addresses and from
// a ninth, still get answers.
TEST_F(SlowClientTest, ManySlowClientsDoNotStarveHonestOnes) {
  std::vector<std::string> from;
  for (int i = 1; i <= 8; ++i) from.push_back("127.0.0." + std::to_string(i));
  ExpectHonestClientsServed(from, 128, {"127.0.0.1", "127.0.0.9"});
}

// All on 127.0.0.1: the per-address cap is what the slow clients hit, and
// honest clients behind the same address still get answers.
TEST_F(SlowClientTest, SlowClientsDoNotStarveHonestOnesFromTheSameAddress) {
  ExpectHonestClientsServed({"127.0.0.1"}, 120, {"127.0.0.1"});
}

// Polls `done` for up to two seconds. A timed-out connection is closed by
// the stream's timer before the server counts it, so a client can see the
// close a moment before the counter moves.
template <typename Predicate>
bool Eventually(Predicate done) {
  for (int i = 0; i < 100; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// Sends `bytes` one at a time, `gap` apart, until the server closes the
// connection; returns how long that took, or nullopt if it never did.
std::optional<Clock::duration> TrickleUntilClosed(Connection& c, const std::string& bytes,
                                                  std::chrono::milliseconds gap) {
  const auto t0 = Clock::now();
  for (char ch : bytes) {
    c.Send(std::string(1, ch));
    if (c.ClosedByPeer(gap.count() / 1000.0)) return Clock::now() - t0;
  }
  if (c.ClosedByPeer(2)) return Clock::now() - t0;
  return std::nullopt;
}

TEST_F(HttpServerTest, HeaderDeadlineIsNotPushedBackByEachByte) {
  HttpServerOptions opts = DashboardOptions();
  opts.header_deadline_seconds = 0.5;
  opts.idle_timeout_seconds = 5;  // far longer than any gap between bytes
  StartServer(opts);
  const std::string request = Get("/healthz");  // 41 bytes, 50 ms apart: ~2 s

  Connection slow(server_->port());
  const auto took = TrickleUntilClosed(slow, request, std::chrono::milliseconds(50));
  ASSERT_TRUE(took.has_value()) << "a request trickled over ~2 s was served";
  EXPECT_GE(*took, std::chrono::milliseconds(400));
  EXPECT_LT(*took, std::chrono::milliseconds(1500));
  EXPECT_EQ(slow.received(), "");

  // The same request, trickled within the deadline, is served.
  Connection brisk(server_->port());
  for (char ch : request) {
    ASSERT_TRUE(brisk.Send(std::string(1, ch)));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto r = brisk.ReadResponse(false, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);

  // On keep-alive the deadline counts from the end of the previous response.
  const auto answered = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(
      TrickleUntilClosed(brisk, "GET /healthz HTTP/1.1\r\n", std::chrono::milliseconds(50)));
  const auto since_response = Clock::now() - answered;
  EXPECT_GE(since_response, std::chrono::milliseconds(400));
  EXPECT_LT(since_response, std::chrono::milliseconds(1500));
  EXPECT_EQ(brisk.received(), "");

  EXPECT_TRUE(Eventually([&] { return server_->counters().header_timeouts == 2; }))
      << server_->counters().header_timeouts;
  EXPECT_EQ(server_->counters().idle_timeouts, 0u);
  ExpectHealthy();
}

TEST_F(HttpServerTest, BodyDeadlineIsNotPushedBackByEachByte) {
  HttpServerOptions opts = DashboardOptions();
  opts.body_deadline_seconds = 0.5;
  opts.idle_timeout_seconds = 5;
  StartServer(opts);
  Connection c(server_->port());
  ASSERT_TRUE(c.Send("POST /api/sweeps HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n"));
  const auto took = TrickleUntilClosed(c, std::string(40, 'b'), std::chrono::milliseconds(50));
  ASSERT_TRUE(took.has_value()) << "a body trickled over ~2 s was read to the end";
  EXPECT_GE(*took, std::chrono::milliseconds(400));
  EXPECT_LT(*took, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.received(), "");  // not even the 405 it would have earned
  EXPECT_TRUE(Eventually([&] { return server_->counters().body_timeouts == 1; }));
  EXPECT_EQ(server_->counters().idle_timeouts, 0u);
  ExpectHealthy();
}

TEST_F(HttpServerTest, WriteDeadlineClosesAClientThatDoesNotRead) {
  HttpServerOptions opts = DashboardOptions();
  opts.write_deadline_seconds = 0.5;
  opts.idle_timeout_seconds = 5;
  StartServer(opts);
  source_.Set("compare", std::string(32u << 20, 'x'));
  Connection c(server_->port(), "127.0.0.1", nullptr, 64 * 1024);
  const auto t0 = Clock::now();
  ASSERT_TRUE(c.Send(Get("/api/compare")));
  EXPECT_TRUE(Eventually([&] { return server_->counters().write_timeouts == 1; }));
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
  EXPECT_EQ(server_->counters().idle_timeouts, 0u);
  EXPECT_FALSE(c.ReadResponse(false, 10).has_value()) << "the response was not cut short";
  EXPECT_TRUE(c.ClosedByPeer(2));
  ExpectHealthy();
}

TEST_F(HttpServerTest, PerAddressCap) {
  HttpServerOptions opts = DashboardOptions();
  opts.max_connections_per_address = 2;
  StartServer(opts);
  const uint16_t port = server_->port();
  // x (another address) has waited longest of all, then a, then b.
  Connection x(port, "127.0.0.1", "127.0.0.2");
  auto a = std::make_unique<Connection>(port);
  Connection b(port);
  for (Connection* c : {&x, a.get(), &b}) {
    ASSERT_TRUE(c->connected());
    ASSERT_TRUE(c->Send(Get("/healthz")));
    ASSERT_TRUE(c->ReadResponse().has_value());
  }
  // 127.0.0.1 is at its cap: a newcomer from there takes the slot of that
  // address's longest waiter, not x's.
  Connection c(port);
  ASSERT_TRUE(c.Send(Get("/healthz")));
  ASSERT_TRUE(c.ReadResponse(false, 2).has_value());
  EXPECT_TRUE(a->ClosedByPeer(2));
  for (Connection* still : {&x, &b, &c}) {
    ASSERT_TRUE(still->Send(Get("/api/best")));
    auto r = still->ReadResponse(false, 2);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->body, source_.Doc("best"));
  }
  // Another address is unaffected by 127.0.0.1's count.
  Connection y(port, "127.0.0.1", "127.0.0.2");
  ASSERT_TRUE(y.Send(Get("/healthz")));
  ASSERT_TRUE(y.ReadResponse(false, 2).has_value());
  EXPECT_TRUE(x.Alive());
  EXPECT_EQ(server_->counters().evicted, 1u);

  // When every connection of an address is being answered and none
  // reads, a further one from there takes the slot of the one stalled
  // longest, and other addresses are unaffected.
  const std::string big(32u << 20, 'x');
  source_.Set("compare", big);
  std::vector<std::unique_ptr<Connection>> writers;
  for (int i = 0; i < 2; ++i) {
    writers.push_back(std::make_unique<Connection>(port, "127.0.0.1", "127.0.0.3", 64 * 1024));
    ASSERT_TRUE(writers.back()->Send(Get("/api/compare", /*keep_alive=*/false)));
    ASSERT_TRUE(writers.back()->WaitReadable(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto third = FetchFrom(port, "127.0.0.3", "/healthz", 2);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->status, 200);
  EXPECT_TRUE(writers[0]->ClosedByPeer(5));
  EXPECT_EQ(server_->counters().refused, 0u);
  EXPECT_EQ(server_->counters().evicted, 2u);
  auto other = FetchFrom(port, "127.0.0.4", "/healthz", 2);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->status, 200);
  EXPECT_TRUE(x.Alive());
  auto r = writers[1]->ReadResponse(false, 20);
  ASSERT_TRUE(r.has_value()) << "a writer from another address, or a younger one, lost its slot";
  EXPECT_EQ(r->body.size(), big.size());
}

// Every slot held by readers that never read: 64 connections from four
// addresses (16 each, the per-address cap) pipeline GETs of a large document
// and read nothing, so each response stalls in the server's write. Honest
// clients, from a fifth address and from one of theirs, are answered at
// once meanwhile, and every stalled connection is closed within the stall
// limit.
TEST_F(HttpServerTest, PipeliningClientsThatNeverReadCannotHoldTheSlots) {
  HttpServerOptions opts = DashboardOptions();
  opts.write_stall_seconds = 1;
  StartServer(opts);
  const uint16_t port = server_->port();
  source_.Set("compare", std::string(1u << 20, 'x'));
  std::string pipelined;
  for (int i = 0; i < 16; ++i) pipelined += Get("/api/compare");
  std::vector<std::unique_ptr<Connection>> slow;
  for (int i = 0; i < 64; ++i) {
    const std::string from = "127.0.0." + std::to_string(2 + i % 4);
    slow.push_back(std::make_unique<Connection>(port, "127.0.0.1", from.c_str(), 64 * 1024));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send(pipelined));
  }
  for (auto& c : slow) ASSERT_TRUE(c->WaitReadable(2));  // every response under way
  const auto stalled = Clock::now();
  ASSERT_EQ(server_->counters().open, 64u);

  for (const char* from : {"127.0.0.1", "127.0.0.3"}) {
    for (const std::string target : {"/healthz", "/api/sweeps"}) {
      const auto t0 = Clock::now();
      auto r = FetchFrom(port, from, target, 2);
      ASSERT_TRUE(r.has_value()) << target << " from " << from << " was not answered";
      EXPECT_EQ(r->status, 200);
      EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2)) << target << " from " << from;
    }
  }
  // Stalled at once, so closed about a second later, all of them.
  while (server_->counters().open > 0 && Clock::now() - stalled < std::chrono::milliseconds(2500)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const HttpServerCounters c = server_->counters();
  EXPECT_EQ(c.open, 0u) << "slow connections still open " << std::chrono::duration<double>(Clock::now() - stalled).count()
                        << " s after they stalled";
  EXPECT_EQ(c.refused, 0u);
  EXPECT_EQ(c.evicted + c.write_stalls, 64u);
  // Their clients see it once they read: what the kernel held, then the
  // end, far short of the 16 answers they asked for.
  for (size_t i = 0; i < slow.size(); ++i) {
    EXPECT_TRUE(slow[i]->ClosedByPeer(2)) << "slow connection " << i << " still served";
    EXPECT_LT(slow[i]->received().size(), size_t{16} << 20) << i;
  }
  ExpectHealthy();
}

TEST_F(HttpServerTest, SourceFailuresAre500And503) {
  StartServer();
  source_.SetThrow(true);
  for (const std::string target : {"/api/sweeps", "/metrics"}) {
    auto r = Fetch(server_->port(), target);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 500) << target;
    EXPECT_NE(r->body.find("snapshot exploded"), std::string::npos);
  }
  // The dashboard page does not depend on the source.
  auto page = Fetch(server_->port(), "/");
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->status, 200);
  source_.SetThrow(false);
  source_.Set("best", "");
  auto r = Fetch(server_->port(), "/api/best");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  ExpectHealthy();
}

TEST_F(HttpServerTest, ConcurrentClientsWhileTheSnapshotChanges) {
  StartServer();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      source_.Set("compare", R"({"groups":[],"tick":)" + std::to_string(i) + "}");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&] {
      Connection c(server_->port());
      for (int i = 0; i < 50; ++i) {
        if (!c.Send(Get(i % 2 ? "/api/compare" : "/api/sweeps"))) {
          ++bad;
          return;
        }
        auto r = c.ReadResponse();
        if (r && r->status == 200 && nlohmann::json::accept(r->body)) ++ok;
        else ++bad;
      }
    });
  }
  for (auto& c : clients) c.join();
  stop = true;
  writer.join();
  EXPECT_EQ(ok.load(), 400);
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(HttpServerTest, StartAndStopContract) {
  HttpServer idle({}, &source_);
  EXPECT_EQ(idle.port(), 0);
  EXPECT_EQ(idle.url(), "");
  EXPECT_EQ(idle.counters().accepted, 0u);
  idle.Stop();  // without Start: nothing to do

  StartServer();
  EXPECT_EQ(server_->url(), "http://127.0.0.1:" + std::to_string(server_->port()) + "/");
  EXPECT_FALSE(server_->Start().ok());  // twice

  HttpServerOptions taken;
  taken.port = server_->port();
  HttpServer clash(taken, &source_);
  Status st = clash.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(std::to_string(server_->port())), std::string::npos) << st.message();

  HttpServerOptions bad;
  bad.address = "not-an-address";
  HttpServer nowhere(bad, &source_);
  st = nowhere.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not-an-address"), std::string::npos) << st.message();

  HttpServer no_source({}, nullptr);
  EXPECT_FALSE(no_source.Start().ok());

  // Stop with a connection open mid-request: prompt, and the client sees the close.
  Connection c(server_->port());
  ASSERT_TRUE(c.Send("GET /api/sweeps HTTP/1.1\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = Clock::now();
  server_->Stop();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  EXPECT_TRUE(c.ClosedByPeer(2));
  server_->Stop();  // twice
  Connection after(taken.port);
  EXPECT_FALSE(after.connected());
}

TEST_F(HttpServerTest, ListensOnIpv6Loopback) {
  HttpServerOptions opts = DashboardOptions();
  opts.address = "::1";
  server_ = std::make_unique<HttpServer>(opts, &source_);
  Status st = server_->Start();
  if (!st.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << st.message();
  EXPECT_EQ(server_->url(), "http://[::1]:" + std::to_string(server_->port()) + "/");
  Connection c(server_->port(), "::1");
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Get("/api/workers")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, source_.Doc("workers"));
}

// Chart.js is inlined from the first readable candidate, escaped so that it
// cannot end the script element early.
TEST_F(HttpServerTest, InlinesChartJsFromTheFirstReadableCandidate) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("http_server_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto js = dir / "chart.js";
  std::ofstream(js) << "window.Chart = function () {}; var s = '</script><!-- <SCRIPT>';";
  HttpServerOptions opts = DashboardOptions();
  opts.chart_js_candidates = {(dir / "missing.js").string(), js.string()};
  StartServer(opts);
  EXPECT_TRUE(server_->has_chart_js());
  auto r = Fetch(server_->port(), "/");
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->body.find("window.Chart = function () {};"), std::string::npos);
  EXPECT_NE(r->body.find("'<\\/script><\\!-- <SCRIPT>'"), std::string::npos);
  EXPECT_EQ(r->body.find("</script><!--"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_F(HttpServerTest, WithoutChartJsThePageDrawsItsOwnBars) {
  HttpServerOptions opts = DashboardOptions();
  opts.chart_js_candidates = {};
  StartServer(opts);
  EXPECT_FALSE(server_->has_chart_js());
  auto r = Fetch(server_->port(), "/");
  ASSERT_TRUE(r.has_value());
  size_t scripts = 0;
  for (size_t at = r->body.find("<script"); at != std::string::npos; at = r->body.find("<script", at + 1)) {
    ++scripts;
  }
  EXPECT_EQ(scripts, 1u);  // the dashboard's own
  EXPECT_NE(r->body.find("mini-track"), std::string::npos);  // the per-op tables' own bars
}

TEST_F(HttpServerTest, DebianChartJsIsUsedWhenInstalled) {
  bool present = false;
  for (const auto& p : DefaultChartJsPaths()) present = present || std::filesystem::exists(p);
  if (!present) GTEST_SKIP() << "libjs-chart.js is not installed";
  StartServer();
  EXPECT_TRUE(server_->has_chart_js());
  auto r = Fetch(server_->port(), "/");
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->body.find("Chart.js v"), std::string::npos);
}

// ---------------------------------------------------------------------------

TEST(HttpMetricsTest, RendersFamiliesWithHelpAndType) {
  const std::vector<Metric> m = {
      Metric::Gauge("tunefarm_workers", "Connected workers.", 3),
      Metric::Counter("tunefarm_results_ingested_total", "Result rows stored.", 1234),
      Metric::Gauge("tunefarm_sweep_pairs_done", "Pairs done per sweep.", 10, {{"sweep", "nightly"}}),
      Metric::Gauge("tunefarm_workers", "ignored: the family has one", 4),
      Metric::Gauge("tunefarm_sweep_pairs_done", "", 0.5, {{"sweep", "adhoc"}}),
  };
  EXPECT_EQ(RenderMetrics(m),
            "# HELP tunefarm_workers Connected workers.\n"
            "# TYPE tunefarm_workers gauge\n"
            "tunefarm_workers 3\n"
            "tunefarm_workers 4\n"
            "# HELP tunefarm_results_ingested_total Result rows stored.\n"
            "# TYPE tunefarm_results_ingested_total counter\n"
            "tunefarm_results_ingested_total 1234\n"
            "# HELP tunefarm_sweep_pairs_done Pairs done per sweep.\n"
            "# TYPE tunefarm_sweep_pairs_done gauge\n"
            "tunefarm_sweep_pairs_done{sweep=\"nightly\"} 10\n"
            "tunefarm_sweep_pairs_done{sweep=\"adhoc\"} 0.5\n");
}

TEST(HttpMetricsTest, EscapesLabelsAndHelpAndSanitisesNames) {
  const std::vector<Metric> m = {
      Metric::Gauge("tunefarm.gpu-count", "multi\nline \\ help", 1,
                    {{"model", "a\"b\\c\nd"}, {"bad-label", "x"}, {"9lives", "y"}}),
      Metric::Gauge("9bad", "", 2),
  };
  EXPECT_EQ(RenderMetrics(m),
            "# HELP tunefarm_gpu_count multi\\nline \\\\ help\n"
            "# TYPE tunefarm_gpu_count gauge\n"
            "tunefarm_gpu_count{model=\"a\\\"b\\\\c\\nd\",bad_label=\"x\",_9lives=\"y\"} 1\n"
            "# TYPE _9bad gauge\n"
            "_9bad 2\n");
}

TEST(HttpMetricsTest, SpecialValuesAndHistograms) {
  // On a bound counts in its bucket; NaN, infinities and negatives are dropped.
  Histogram lease({0.5, 2});
  for (double v : {0.25, 0.5, 2.0, 11.0, std::nan(""), HUGE_VAL, -1.0}) lease.Observe(v);
  const std::vector<Metric> m = {
      Metric::Gauge("g", "", std::nan("")),
      Metric::Gauge("g", "", HUGE_VAL, {{"k", "pos"}}),
      Metric::Gauge("g", "", -HUGE_VAL, {{"k", "neg"}}),
      Metric::Gauge("g", "", 1e20, {{"k", "big"}}),
      Metric::Gauge("g", "", -0.125, {{"k", "small"}}),
      Metric::FromHistogram("tunefarm_lease_seconds", "Lease round trip.", lease, {{"model", "h100"}}),
  };
  EXPECT_EQ(RenderMetrics(m),
            "# TYPE g gauge\n"
            "g NaN\n"
            "g{k=\"pos\"} +Inf\n"
            "g{k=\"neg\"} -Inf\n"
            "g{k=\"big\"} 1e+20\n"
            "g{k=\"small\"} -0.125\n"
            "# HELP tunefarm_lease_seconds Lease round trip.\n"
            "# TYPE tunefarm_lease_seconds histogram\n"
            "tunefarm_lease_seconds_bucket{model=\"h100\",le=\"0.5\"} 2\n"
            "tunefarm_lease_seconds_bucket{model=\"h100\",le=\"2\"} 3\n"
            "tunefarm_lease_seconds_bucket{model=\"h100\",le=\"+Inf\"} 4\n"
            "tunefarm_lease_seconds_sum{model=\"h100\"} 13.75\n"
            "tunefarm_lease_seconds_count{model=\"h100\"} 4\n");
  EXPECT_EQ(RenderMetrics({}), "");
}

}  // namespace
}  // namespace tune
