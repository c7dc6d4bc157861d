// Coordinator: the farm's ROUTER endpoint.
//
// Accepts sweeps from clients, registers workers by their hello, leases work
// units to workers whose GPU model a sweep targets, keeps heartbeats flowing
// both ways, ingests results into the ResultStore (idempotently) and answers
// status requests. One poll loop owns the socket and the scheduler; results
// are decoded and stored on an Ingester thread, so that a backlog of rows
// never delays a lease or a heartbeat.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/env.h"
#include "scheduler.h"
#include "store/result_store.h"
#include "tune/status.h"

namespace tune {

struct CoordinatorOptions {
  std::string endpoint = "tcp://*:5555";
  std::string store_path = "tunefarm.db";
  // Writes stop (and leasing with them) while the store's filesystem has
  // less free space than this; both resume by themselves once it has more.
  uint64_t store_reserve_bytes = kDefaultStoreReserveBytes;
  // Open a store that would be refused for a corrupt write-ahead log or a
  // sequence number below its durable marker, keeping what is readable
  // (StoreOpenOptions::recover); the coordinator logs what was kept.
  bool store_recover = false;
  uint32_t heartbeat_ms = 1000;
  uint32_t liveness = 5;            // missed heartbeats before a worker is dead
  // No new leases (NoWork instead) while this many bytes of results wait to
  // be stored: work handed out now would only queue behind them, and the
  // queue is coordinator memory.
  size_t max_ingest_backlog_bytes = 64u << 20;
  // A results frame that would take the queue past this is not queued: its
  // sender is disconnected and resends the batch (it keeps every batch
  // until acknowledged) once it has said hello again, after its backoff.
  // Bounds coordinator memory whatever peers send; a frame finding the
  // queue empty is always queued, so the bound may be below a frame's size.
  size_t max_ingest_queue_bytes = 256u << 20;
  SchedulerOptions scheduler;
  // Sweeps one client (CURVE key, or address without CURVE) may submit in
  // any 60 s; 0: no limit (SubmitRate).
  uint32_t max_sweeps_per_minute = kDefaultMaxSweepsPerMinute;
  // Op package bytes the store keeps in all; a submit past it is refused
  // once what nothing needs is pruned (ResultStore::MakeRoomForOps).
  uint64_t max_stored_package_bytes = kDefaultMaxStoredPackageBytes;
  // New op package bytes one client may bring per hour.
  uint64_t max_package_bytes_per_client_hour = kDefaultMaxPackageBytesPerClientHour;
  // The bytes one remote read's export may take, counted while it is
  // written (StoreReads).
  uint64_t max_read_bytes = kDefaultMaxReadBytes;
  // CURVE: on when a secret key is given; required (unless insecure) for
  // endpoints other than loopback. Workers must be on the allow-list.
  std::string curve_secret_key;     // file written by `tunefarm keys curve`
  std::string curve_allow_list;     // one worker public key per line
  // Optional: one client public key per line. Client keys submit sweeps and
  // ask for status; worker keys say hello, lease and send results; a key
  // that sends what its role may not is disconnected. Both lists are
  // re-read when they change: a key taken off loses its connection.
  std::string curve_client_allow_list;
  // Optional: one builder public key per line (`worker --compile-only`):
  // builder keys say hello, ask for configs to compile and send their
  // images, which are served on the key's word while it is on this list
  // (coordinator/build_service.h).
  std::string curve_builder_allow_list;
  bool insecure_plaintext = false;  // allow a non-loopback endpoint without CURVE
  // Dashboard, JSON API and /metrics (HttpServer); off when http_port < 0.
  std::string http_address = "127.0.0.1";
  int http_port = -1;               // 0 = an ephemeral port
  bool verbose = false;
  // Called by Run's loop on every turn (at least every 50 ms), on its
  // thread: a service manager's watchdog hears from the loop itself, so a
  // loop that hangs is restarted. May be empty.
  std::function<void()> alive;
  // Where the loop, the worker sessions, ingestion and the status pages
  // read the clocks (a test's fake); must outlive the coordinator.
  Env* env = Env::Default();
};

// The retry_ms of a NoWork reply when `workers` workers are connected: how
// long an idle worker waits before asking again. New units appear when
// others complete (refine units once a shape is screened, a confirm
// phase once a model is measured), and a device that waits out a long retry
// idles meanwhile: four H200s lost 0.2 s each at such a step of a 7 s sweep.
// 20 ms for small farms, growing with the farm so that idle polling stays
// under about 5,000 requests/s: 200 ms at 1,000 workers, at most 1 s.
uint32_t NoWorkRetryMs(size_t workers);

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions opts);
  ~Coordinator();

  // Opens the store and binds. Errors name the endpoint or store path.
  Status Start();
  // Serves until *stop becomes true. Start() must have succeeded.
  Status Run(const std::atomic<bool>* stop);
  // The endpoint actually bound (resolves "tcp://127.0.0.1:*").
  std::string bound_endpoint() const;
  // "http://address:port/" of the dashboard; empty when HTTP is off.
  std::string http_url() const;
  ResultStore* store();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
