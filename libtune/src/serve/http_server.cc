#include "serve/http_server.h"

#include "base/log.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <thread>

#include "base/clock.h"
#include "base/html.h"

namespace tune {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

// The page at `/`, with Chart.js inlined at its marker when there is one.
std::string InlineChartJs(std::string page, const std::string& chart_js) {
  static constexpr std::string_view kMarker = "<!--TUNEFARM_CHARTJS-->";
  const size_t at = page.find(kMarker);
  if (at != std::string::npos)
    page.replace(at, kMarker.size(), chart_js.empty() ? "" : "<script>\n" + EscapeInlineScript(chart_js) + "\n</script>");
  return page;
}

// Chart.js draws on the page, so the page's CSP allows inline script and
// style but no other origin, no framing and no form posts.
constexpr const char* kPageCsp =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

constexpr const char* kJsonType = "application/json";
constexpr const char* kTextType = "text/plain; charset=utf-8";
constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

struct Reply {
  http::status status = http::status::ok;
  std::string content_type = kTextType;
  std::string body;
  bool page = false;  // the HTML page: sent with its CSP
};

Reply Text(http::status status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string_view PathOf(std::string_view target) {
  const size_t q = target.find_first_of("?#");
  return q == std::string_view::npos ? target : target.substr(0, q);
}

}  // namespace

HttpStatusSource::~HttpStatusSource() = default;

// ---------------------------------------------------------------------------
// Server internals. Everything below runs on the one HTTP thread, except
// Start() and Stop(), which touch the io_context only before run() starts
// and through stop() and join(), and counters(), which reads atomics.

namespace {

// Options in seconds, clamped so that a deadline converts to the timer's
// duration without overflow; a year is as good as "never" for a
// connection. Deadlines are on the monotonic clock (base/clock.h).
double Seconds(double s) {
  if (!(s > 0)) return 0;
  return std::min(s, 365.0 * 24 * 3600);
}

// A wait of `s` seconds as the timer's duration; none when `s` has passed.
std::chrono::nanoseconds TimerWait(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(std::max(s, 0.0)));
}

// Connections are grouped per host for the per-address cap: an IPv4 address,
// or the /64 of an IPv6 address (a host usually holds a whole /64, so
// counting single IPv6 addresses would cap nothing).
using AddressKey = net::ip::address_v6::bytes_type;

AddressKey KeyOf(const net::ip::address& a) {
  if (a.is_v4()) return net::ip::make_address_v6(net::ip::v4_mapped, a.to_v4()).to_bytes();
  AddressKey key = a.to_v6().to_bytes();
  if (!a.to_v6().is_v4_mapped()) std::fill(key.begin() + 8, key.end(), 0);
  return key;
}

struct AtomicCounters {
  std::atomic<uint64_t> accepted{0}, refused{0}, evicted{0}, header_timeouts{0},
      body_timeouts{0}, write_timeouts{0}, idle_timeouts{0}, write_stalls{0}, pipeline_refusals{0}, open{0};
};

class Session;

// What every connection reads, and the table of slots; lives in
// HttpServer::Impl, which outlives every Session (see Stop()).
struct ServerState {
  HttpServerOptions opts;
  HttpStatusSource* source = nullptr;
  std::string page;       // opts.page with Chart.js inlined; empty = no page
  std::string not_found;  // the 404 body: what is served
  AtomicCounters counters;
  // Every connection holding a slot. Small (max_connections), so the
  // eviction rule scans it instead of keeping an ordered index up to date.
  std::vector<Session*> sessions;
  std::map<AddressKey, size_t> per_address;

  // Gives `socket` a slot (taking one per the rule in http_server.h) and
  // starts serving it, or closes it.
  void Admit(tcp::socket socket);
  // The connection to give up its slot: the one whose client has owed its
  // part longest (Session::waiting_since), among those from `address` when
  // given. Null when there is none.
  Session* LongestWaiting(const AddressKey* address) const;
  void Register(Session* s, const AddressKey& address);
  void Unregister(Session* s, const AddressKey& address);

  Reply Route(std::string_view target) const {
    const std::string_view path = PathOf(target);
    if (path == "/healthz") return Text(http::status::ok, "ok\n");
    if ((path == "/" || path == "/index.html") && !page.empty()) {
      Reply r;
      r.content_type = "text/html; charset=utf-8";
      r.body = page;
      r.page = true;
      return r;
    }
    const bool metrics = path == "/metrics";
    std::string document;
    if (path.starts_with("/api/")) document = std::string(path.substr(5));
    const bool known = std::find(opts.documents.begin(), opts.documents.end(), document) != opts.documents.end();
    if (!metrics && !known) return Text(http::status::not_found, not_found);
    std::string body;
    try {
      body = metrics ? source->Metrics() : source->Json(document);
    } catch (const std::exception& e) {
      return Text(http::status::internal_server_error,
                  std::string("status source failed: ") + e.what() + "\n");
    } catch (...) {
      return Text(http::status::internal_server_error, "status source failed\n");
    }
    if (body.empty()) return Text(http::status::service_unavailable, "no status published yet\n");
    Reply r;
    r.content_type = metrics ? kMetricsType : kJsonType;
    r.body = std::move(body);
    return r;
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState* server, const AddressKey& address)
      : stream_(std::move(socket)), server_(server), address_(address) {
    server_->Register(this, address_);
  }
  ~Session() { Release(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void Start() { StartRequest(); }

  const AddressKey& address() const { return address_; }
  // The rule's order, oldest first: since when the client has owed the
  // server a request, or a read of the response being written. A
  // connection draining after an error answer has had its answer and sorts
  // before every waiting one.
  double waiting_since() const {
    return phase_ == Phase::kDrain ? -std::numeric_limits<double>::infinity() : waiting_since_;
  }
  void Evict() {
    ++server_->counters.evicted;
    Close(/*reset=*/phase_ == Phase::kWrite);
  }

 private:
  enum class Phase { kRequest, kBody, kWrite, kDrain };
  // Which limit the armed expiry is (ArmTimer).
  enum class Expiry { kPhase, kIdle, kStall };
  static constexpr size_t kReadChunk = 4096;

  const HttpServerOptions& opts() const { return server_->opts; }

  // A new request starts: from the accept, or from the end of the previous
  // response; the header deadline counts from here.
  void StartRequest() {
    pipelined_ = next_early_ ? pipelined_ + 1 : 0;
    next_early_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(opts().max_header_bytes));
    parser_->body_limit(opts().max_body_bytes);
    parser_->eager(true);
    phase_ = Phase::kRequest;
    waiting_since_ = NowSeconds();
    phase_deadline_ = waiting_since_ + Seconds(opts().header_deadline_seconds);
    Parse();
  }

  // Feeds what is buffered to the parser (pipelined requests may be there
  // already) and reads only when it needs more.
  void Parse() {
    while (buffer_.size() > 0 && !parser_->is_done()) {
      beast::error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) break;
      if (ec) return RequestFailed(ec);
      if (used == 0) break;
    }
    if (parser_->is_done()) return Handle(parser_->get());
    if (phase_ == Phase::kRequest && parser_->is_header_done()) {
      phase_ = Phase::kBody;
      phase_deadline_ = NowSeconds() + Seconds(opts().body_deadline_seconds);
    }
    ArmTimer();
    stream_.async_read_some(
        buffer_.prepare(kReadChunk),
        [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(beast::error_code ec, std::size_t n) {
    if (!open_) return;  // evicted meanwhile
    buffer_.commit(n);
    if (ec == beast::error::timeout) return TimedOut();
    // A clean close, an end in mid-request or a reset: nobody is there to answer.
    if (ec) return Close();
    Parse();
  }

  void RequestFailed(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return SendError(http::status::payload_too_large, "request body too large\n");
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      return SendError(http::status::request_header_fields_too_large,
                       "request headers too large\n");
    }
    SendError(http::status::bad_request, "bad request: " + ec.message() + "\n");
  }

  // Each read or write waits until the phase's deadline or for
  // idle_timeout_seconds (a write: write_stall_seconds), whichever comes
  // first. The stream closes the socket when that time passes.
  void ArmTimer() {
    const double now = NowSeconds();
    double at = phase_deadline_;
    expiry_ = Expiry::kPhase;
    if (const double idle = now + Seconds(opts().idle_timeout_seconds); idle < at) {
      at = idle;
      expiry_ = Expiry::kIdle;
    }
    if (phase_ == Phase::kWrite && opts().write_stall_seconds > 0) {
      if (const double stall = now + Seconds(opts().write_stall_seconds); stall < at) {
        at = stall;
        expiry_ = Expiry::kStall;
      }
    }
    stream_.expires_after(TimerWait(at - now));
  }

  void TimedOut() {
    AtomicCounters& c = server_->counters;
    if (expiry_ == Expiry::kIdle) {
      ++c.idle_timeouts;
    } else if (expiry_ == Expiry::kStall) {
      ++c.write_stalls;
    } else if (phase_ == Phase::kRequest) {
      ++c.header_timeouts;
    } else if (phase_ == Phase::kBody) {
      ++c.body_timeouts;
    } else if (phase_ == Phase::kWrite) {
      ++c.write_timeouts;
    }
    Close(/*reset=*/phase_ == Phase::kWrite);
  }

  void Handle(const http::request<http::string_body>& req) {
    // Pipelined: the next request has begun to arrive before any byte of
    // this one's answer was sent, so its client cannot have read the
    // answer first. (Asked now, not once the answer is written: a client
    // on loopback reads it and asks again before the write's handler runs.)
    beast::error_code ec;
    next_early_ = buffer_.size() > 0 || stream_.socket().available(ec) > 0;
    if (opts().max_pipelined_requests > 0 && pipelined_ > opts().max_pipelined_requests) {
      ++server_->counters.pipeline_refusals;
      return SendError(http::status::too_many_requests,
                       "too many pipelined requests: read the answers before sending more\n");
    }
    const bool head = req.method() == http::verb::head;
    Reply reply;
    if (req.method() != http::verb::get && !head) {
      reply = Text(http::status::method_not_allowed, "only GET and HEAD are served\n");
    } else {
      reply = server_->Route(std::string_view(req.target().data(), req.target().size()));
    }
    res_ = {};
    res_.version(req.version() == 10 ? 10 : 11);
    res_.result(reply.status);
    SetCommonHeaders(reply.content_type);
    if (reply.status == http::status::method_not_allowed) res_.set(http::field::allow, "GET, HEAD");
    if (reply.page) {
      res_.set("Content-Security-Policy", kPageCsp);
      res_.set("Referrer-Policy", "no-referrer");
    }
    res_.keep_alive(req.keep_alive());
    // HEAD announces the length GET would send, and sends no body.
    res_.content_length(reply.body.size());
    if (!head) res_.body() = std::move(reply.body);
    Write(/*after_error=*/false);
  }

  // After an error the request's framing is unknown: answer, then close.
  void SendError(http::status status, std::string body) {
    res_ = {};
    res_.version(11);
    res_.result(status);
    SetCommonHeaders(kTextType);
    res_.keep_alive(false);
    res_.content_length(body.size());
    res_.body() = std::move(body);
    Write(/*after_error=*/true);
  }

  void SetCommonHeaders(beast::string_view content_type) {
    res_.set(http::field::server, "tunefarm");
    res_.set(http::field::content_type, content_type);
    res_.set(http::field::cache_control, "no-store");
    res_.set("X-Content-Type-Options", "nosniff");
  }

  void Write(bool after_error) {
    phase_ = Phase::kWrite;
    phase_deadline_ = NowSeconds() + Seconds(opts().write_deadline_seconds);
    after_error_ = after_error;
    serializer_.emplace(res_);
    WriteSome();
  }

  // One write at a time, so that the idle and stall limits apply to each.
  // The client owes a read from here until the write makes progress.
  void WriteSome() {
    waiting_since_ = NowSeconds();
    ArmTimer();
    http::async_write_some(stream_, *serializer_,
                           [self = shared_from_this()](beast::error_code ec, std::size_t) {
                             self->OnWrite(ec);
                           });
  }

  void OnWrite(beast::error_code ec) {
    if (!open_) return;
    if (ec == beast::error::timeout) return TimedOut();
    if (ec) return Close();
    if (!serializer_->is_done()) return WriteSome();
    serializer_.reset();
    if (after_error_) return StartDrain();
    if (!res_.keep_alive()) return Close();
    StartRequest();
  }

  // Closing a socket with unread input makes the kernel send a reset, which
  // can destroy the error response before the client reads it (an oversized
  // body is still arriving). So: stop sending, then read and discard for a
  // short while until the client closes too.
  void StartDrain() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    phase_ = Phase::kDrain;
    drained_ = 0;
    stream_.expires_after(std::chrono::seconds(1));
    Drain();
  }

  void Drain() {
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (!self->open_) return;
                              self->drained_ += n;
                              if (ec || self->drained_ > (1u << 20)) return self->Close();
                              self->Drain();
                            });
  }

  // Gives the slot back at once, not when the last handler lets go of the
  // session, so that an evicted or timed-out connection frees its slot
  // (and its descriptor) before the next accept. `reset`: for a client that
  // stopped reading, whose unsent response a plain close would leave the
  // kernel retrying against a closed window for minutes.
  void Close(bool reset = false) {
    Release();
    beast::error_code ignored;
    if (reset) {
      stream_.socket().set_option(net::socket_base::linger(true, 0), ignored);
    } else {
      stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    }
    stream_.socket().close(ignored);
  }

  void Release() {
    if (!open_) return;
    open_ = false;
    server_->Unregister(this, address_);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::optional<http::response_serializer<http::string_body>> serializer_;
  ServerState* server_;
  const AddressKey address_;
  bool open_ = true;
  Phase phase_ = Phase::kRequest;
  double waiting_since_ = 0;   // NowSeconds
  double phase_deadline_ = 0;  // NowSeconds
  Expiry expiry_ = Expiry::kPhase;
  bool next_early_ = false;  // the next request began before this answer (Handle)
  size_t pipelined_ = 0;   // requests in a row that came before the previous answer was written
  bool after_error_ = false;
  std::array<char, 4096> discard_{};
  size_t drained_ = 0;
};

void ServerState::Register(Session* s, const AddressKey& address) {
  sessions.push_back(s);
  ++per_address[address];
  counters.open = sessions.size();
}

void ServerState::Unregister(Session* s, const AddressKey& address) {
  const auto it = std::find(sessions.begin(), sessions.end(), s);
  if (it != sessions.end()) {
    *it = sessions.back();
    sessions.pop_back();
  }
  const auto count = per_address.find(address);
  if (count != per_address.end() && --count->second == 0) per_address.erase(count);
  counters.open = sessions.size();
}

Session* ServerState::LongestWaiting(const AddressKey* address) const {
  Session* oldest = nullptr;
  for (Session* s : sessions) {
    if (address && s->address() != *address) continue;
    if (!oldest || s->waiting_since() < oldest->waiting_since()) oldest = s;
  }
  return oldest;
}

void ServerState::Admit(tcp::socket socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;  // the client is gone already; the socket closes with this scope
  const AddressKey key = KeyOf(peer.address());
  const size_t per_address_cap = opts.max_connections_per_address;
  const auto from_here = per_address.find(key);
  bool full = false;
  Session* victim = nullptr;
  if (per_address_cap > 0 && from_here != per_address.end() &&
      from_here->second >= per_address_cap) {
    full = true;
    victim = LongestWaiting(&key);
  } else if (sessions.size() >= opts.max_connections) {
    full = true;
    victim = LongestWaiting(nullptr);
  }
  if (full && !victim) {
    ++counters.refused;
    socket.close(ec);
    return;
  }
  if (victim) victim->Evict();
  ++counters.accepted;
  std::make_shared<Session>(std::move(socket), this, key)->Start();
}

}  // namespace

struct HttpServer::Impl {
  ServerState state;
  bool chart_js = false;
  bool started = false;
  uint16_t bound_port = 0;
  std::string url;

  std::unique_ptr<net::io_context> ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<net::steady_timer> accept_retry;
  std::thread thread;

  void Accept() {
    acceptor->async_accept(*ioc, [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      if (ec) {
        // Out of descriptors, typically: retry soon instead of spinning.
        accept_retry->expires_after(std::chrono::milliseconds(50));
        accept_retry->async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec) Accept();
        });
        return;
      }
      state.Admit(std::move(socket));
      Accept();
    });
  }
};

HttpServer::HttpServer(HttpServerOptions opts, HttpStatusSource* source)
    : impl_(std::make_unique<Impl>()) {
  impl_->state.opts = std::move(opts);
  impl_->state.source = source;
}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.started) return Status::Error("http: server already started");
  const std::string where = s.state.opts.address + ":" + std::to_string(s.state.opts.port);
  if (!s.state.source) return Status::Error("http: no status source for " + where);
  beast::error_code ec;
  const net::ip::address addr = net::ip::make_address(s.state.opts.address, ec);
  if (ec) return Status::Error("http: cannot parse address '" + s.state.opts.address + "': " + ec.message());

  const std::string chart_js =
      s.state.opts.page.empty() ? "" : ReadFirstFile(s.state.opts.chart_js_candidates);
  s.chart_js = !chart_js.empty();
  s.state.page = s.state.opts.page.empty() ? "" : InlineChartJs(s.state.opts.page, chart_js);
  s.state.not_found = "not found; try ";
  if (!s.state.page.empty()) s.state.not_found += "/, ";
  for (const auto& d : s.state.opts.documents) s.state.not_found += "/api/" + d + ", ";
  s.state.not_found += "/metrics\n";

  auto ioc = std::make_unique<net::io_context>(1);
  auto acceptor = std::make_unique<tcp::acceptor>(*ioc);
  const tcp::endpoint endpoint(addr, s.state.opts.port);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status::Error("http: cannot listen on " + where + ": " + ec.message());
  s.bound_port = acceptor->local_endpoint(ec).port();
  if (ec) return Status::Error("http: cannot read the bound port of " + where + ": " + ec.message());
  const std::string host = addr.is_v6() ? "[" + s.state.opts.address + "]" : s.state.opts.address;
  s.url = "http://" + host + ":" + std::to_string(s.bound_port) + "/";

  s.ioc = std::move(ioc);
  s.acceptor = std::move(acceptor);
  s.accept_retry = std::make_unique<net::steady_timer>(*s.ioc);
  s.started = true;
  s.Accept();
  s.thread = std::thread([&s] {
    for (;;) {
      try {
        s.ioc->run();
        return;
      } catch (const std::exception& e) {
        // One request's failure (out of memory, typically) must not take the
        // status page down for good.
        log::Error("http", "handler failed", {{"error", e.what()}});
      }
    }
  });
  return Status::OK();
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (!s.ioc) return;
  s.ioc->stop();
  if (s.thread.joinable()) s.thread.join();
  // Destroying the io_context destroys the pending handlers and with them
  // every Session, while the Impl they point to is still alive.
  s.accept_retry.reset();
  s.acceptor.reset();
  s.ioc.reset();
}

uint16_t HttpServer::port() const { return impl_->bound_port; }
std::string HttpServer::url() const { return impl_->url; }
bool HttpServer::has_chart_js() const { return impl_->chart_js; }

HttpServerCounters HttpServer::counters() const {
  const AtomicCounters& c = impl_->state.counters;
  HttpServerCounters out;
  out.accepted = c.accepted;
  out.refused = c.refused;
  out.evicted = c.evicted;
  out.header_timeouts = c.header_timeouts;
  out.body_timeouts = c.body_timeouts;
  out.write_timeouts = c.write_timeouts;
  out.idle_timeouts = c.idle_timeouts;
  out.write_stalls = c.write_stalls;
  out.pipeline_refusals = c.pipeline_refusals;
  out.open = c.open;
  return out;
}

}  // namespace tune
