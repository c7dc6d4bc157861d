// HttpServer: the HTTP status side of a farm process (the coordinator's
// dashboard, JSON API and metrics; a worker's metrics).
//
// A small HTTP/1.1 server that runs on its own thread and never touches the
// process's state: every response body comes from an HttpStatusSource that
// the process implements over a snapshot it publishes now and then. The
// process's loop therefore never waits for a slow browser, and a hostile
// client can at worst cost the HTTP thread one bounded request.
//
// Endpoints (GET and HEAD; any other method is 405 with an Allow header):
//   /              HttpServerOptions::page, when not empty: one self-contained
//                  HTML page, sent with a CSP that allows no other origin;
//                  Chart.js is inlined at its <!--TUNEFARM_CHARTJS--> marker
//                  from the first readable file of chart_js_candidates.
//   /api/NAME      application/json: source->Json(NAME), for each NAME of
//                  HttpServerOptions::documents
//   /metrics       text/plain; version=0.0.4: source->Metrics()
//   /healthz       text/plain "ok" (does not call the source)
// A query string is ignored. Unknown paths are 404, malformed requests 400,
// oversized headers 431, oversized bodies 413; the connection is closed after
// an error and the server keeps serving others. Keep-alive and pipelining
// work as HTTP/1.1 says, up to max_pipelined_requests requests in a row that
// arrive before the answer to the one before is written; the next is
// answered 429 and the connection closed, so one connection cannot queue
// unbounded work behind answers it does not read.
//
// Slow clients. A connection is always in one of three phases, and each
// phase has a deadline that arriving bytes do not push back, so a client
// that trickles one byte at a time gains nothing over one that sends none:
//   waiting for a request  the request line and headers must be complete
//                          header_deadline_seconds after the accept, or
//                          after the end of the previous response on a
//                          keep-alive connection;
//   reading a body         the body must be complete body_deadline_seconds
//                          after the end of its headers;
//   writing a response     the whole response must be written within
//                          write_deadline_seconds.
// Within a phase a single read or write may also wait at most
// idle_timeout_seconds, and a single write at most write_stall_seconds: a
// response the client has stopped reading is dropped within a few seconds.
// A connection that misses any of these limits is closed without an answer
// (a client that sends or reads nothing would not see it); one closed while
// a response is being written is reset, so that the kernel drops what it
// still holds for a client that reads nothing rather than retry it for
// minutes.
//
// Connection slots. At most max_connections connections are open, at most
// max_connections_per_address of them from one address (an IPv4 address, or
// an IPv6 /64, since one host commonly owns a whole /64). A new connection
// that would exceed a cap takes the slot of the connection whose client has
// owed the server its part longest: from its own address when that address
// is at its cap, else from any address. A connection waiting for a request
// owes it since the accept or the end of the previous response (counted as
// for the header deadline; it may have sent part of its request); one whose
// response is being written owes a read since its last write made progress,
// so a client that reads its answer keeps owing nothing for more than a
// moment, and one that stopped reading owes more every second. The
// connection taken is closed without an answer (reset, if it was being
// written); one draining after an error answer is taken first. Only when no
// slot can be taken (max_connections is 0) is the new connection closed at
// once.
//
// Why taking a slot rather than refusing: with refusal, a few hundred
// connections that never finish a request (slowloris) hold every slot, and
// the deadlines do not help, because they reconnect as each one expires.
// Under this rule a client that sends its request right away is displaced
// only if max_connections newer connections (or, from its own address,
// max_connections_per_address) arrive before its request is complete, a
// few milliseconds on a LAN, while a slow client loses its slot as soon as
// that many connections arrive after it. A dashboard that polls every second
// over keep-alive has waited at most a second, so it is displaced last.
// The per-address cap keeps a flood from one address churning that
// address's own connections: other addresses lose slots only when the flood
// comes from max_connections / max_connections_per_address addresses or
// more. Clients that pipeline requests and never read the answers hold
// slots no better: their writes stall, they owe a read from then on, and
// the first newcomers take their slots (the rest go at write_stall_seconds).
// At the per-address cap the new connection also takes a slot instead
// of being refused, because honest clients often share an address with slow
// ones (a NAT, a proxy, loopback). counters() tells how often all this
// happens.
//
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/html.h"
#include "tune/status.h"

namespace tune {

// What the HTTP thread reads. Both methods are called on the HTTP thread,
// concurrently with whatever the coordinator's thread does, so an
// implementation must be thread-safe (the intended one copies strings out of
// a snapshot under a mutex). They should be quick: the HTTP thread serves one
// request at a time.
class HttpStatusSource {
 public:
  virtual ~HttpStatusSource();
  // `what` is one of HttpServerOptions::documents; returns that JSON
  // document. An empty string means "nothing published yet" and is answered
  // 503. An exception is answered 500.
  virtual std::string Json(const std::string& what) = 0;
  // The Prometheus text exposition (RenderMetrics, metrics.h, builds one).
  virtual std::string Metrics() = 0;
};


struct HttpServerOptions {
  std::string address = "127.0.0.1";  // IPv4 or IPv6 literal; "0.0.0.0" = every interface
  uint16_t port = 0;                  // 0 = an ephemeral port (see HttpServer::port())
  size_t max_header_bytes = 8 * 1024;      // request line + headers; more is 431
  size_t max_body_bytes = 64 * 1024;       // a GET has no use for a body; more is 413
  // The slot rule (file comment): a connection beyond a cap takes the slot
  // of the longest-waiting one, or is closed at once when none can be taken.
  size_t max_connections = 64;
  size_t max_connections_per_address = 16;  // 0 = no per-address cap
  // Deadlines per phase (file comment), in seconds; never reset by a byte.
  double header_deadline_seconds = 10;  // request line + headers
  double body_deadline_seconds = 10;    // request body, from the end of the headers
  double write_deadline_seconds = 30;   // a whole response (a page with Chart.js is ~200 KiB)
  double idle_timeout_seconds = 15;     // the longest wait for any one read or write
  // The longest wait for any one write: a response the client stops
  // reading is dropped (the connection reset) this long after its last
  // progress. <= 0: idle_timeout_seconds alone.
  double write_stall_seconds = 5;
  // Requests in a row that may arrive before the previous answer is
  // written (pipelining); the next is answered 429 and the connection
  // closed. 0 = no cap.
  size_t max_pipelined_requests = 8;
  // The HTML served at `/`; empty = no page (`/` is 404).
  std::string page;
  // The names served at /api/NAME through HttpStatusSource::Json.
  std::vector<std::string> documents;
  // The first readable file is inlined into the page (read once, in
  // Start()); empty or none readable = no Chart.js.
  std::vector<std::string> chart_js_candidates = DefaultChartJsPaths();
};

// What the connection limits have done since the server was constructed.
struct HttpServerCounters {
  uint64_t accepted = 0;        // connections given a slot
  uint64_t refused = 0;         // closed at once: a cap was full and no slot could be taken (max_connections 0)
  uint64_t evicted = 0;         // closed to give their slot to a newer connection
  uint64_t header_timeouts = 0;  // missed header_deadline_seconds
  uint64_t body_timeouts = 0;    // missed body_deadline_seconds
  uint64_t write_timeouts = 0;   // missed write_deadline_seconds
  uint64_t idle_timeouts = 0;    // one read or write waited idle_timeout_seconds
  uint64_t write_stalls = 0;     // one write waited write_stall_seconds: the client stopped reading
  uint64_t pipeline_refusals = 0;  // answered 429: more than max_pipelined_requests in a row
  uint64_t open = 0;             // connections open now (a gauge, not a counter)
};

class HttpServer {
 public:
  // `source` is not owned and must outlive the server (or at least Stop()).
  HttpServer(HttpServerOptions opts, HttpStatusSource* source);
  // Stops the server if it runs.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the HTTP thread. Errors name the address and port
  // (unparsable address, port in use). Calling it twice is an error.
  Status Start();
  // Closes the listener and every connection and joins the thread. Safe to
  // call more than once, and without a successful Start(); never from inside
  // an HttpStatusSource method (it would join its own thread).
  void Stop();

  // The port actually bound (resolves port 0); 0 before Start() succeeds.
  uint16_t port() const;
  // "http://address:port/" for logs and links; empty before Start().
  std::string url() const;
  // True when the page inlines Chart.js (a candidate file was readable).
  bool has_chart_js() const;
  // A copy of the counters; safe from any thread, before Start() and after
  // Stop(). Each field is read on its own, so one copy is not an atomic
  // snapshot (e.g. `open` may lag `accepted` by a connection).
  HttpServerCounters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
