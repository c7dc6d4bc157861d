// The coordinator's insides, private to coordinator/: Coordinator::Impl
// keeps the socket loop (receive, route, send, tick) and wires the parts,
// each with a file of its own:
//   worker_sessions.{h,cc}      the peer registry: hello, heartbeats, liveness
//   sweeps.{h,cc}               submit, cancel, status answers, persistence
//   coordinator_results.{h,cc}  ingestion: leases, results batches, outcomes
//   coordinator_status.{h,cc}   status pages: HTTP documents and /metrics
//   store_reads.{h,cc}          remote reads of the store (StoreRead)
//   image_service.{h,cc}        stored cubins served to workers (ImageRequest)
//   build_service.{h,cc}        configs handed to builders, their images stored
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "build_service.h"
#include "coordinator.h"
#include "coordinator_parts.h"
#include "coordinator_results.h"
#include "coordinator_status.h"
#include "image_service.h"
#include "scheduler.h"
#include "store_reads.h"
#include "sweeps.h"
#include "protocol/protocol.h"
#include "store/result_store.h"
#include "wire/link.h"
#include "worker_sessions.h"
#include "zap_authenticator.h"

namespace tune {

struct Coordinator::Impl final : PeerLink {
  CoordinatorOptions opts;
  zmq::context_t ctx{1};
  std::unique_ptr<ZapAuthenticator> zap;  // declared before router: outlives it
  std::unique_ptr<Link> router;  // the workers', builders' and clients' peer (wire/link.h)
  EnvelopeFramer framer{"coordinator"};
  std::unique_ptr<ResultStore> store;
  StoreHealth health;
  Scheduler scheduler;
  LoopCounters counters;
  WorkerSessions sessions{&scheduler, opts.env};
  // The parts that need the store, made once it is open (Start); declared
  // after it, so their threads stop before it closes.
  std::unique_ptr<Ingestion> ingestion;
  std::unique_ptr<Sweeps> sweeps;
  std::unique_ptr<StatusPages> status;
  std::unique_ptr<StoreReads> reads;
  std::unique_ptr<ImageService> images;
  std::unique_ptr<BuildService> builds;
  double last_key_check = 0;
  // New package bytes each client brought in the last hour: (when, bytes).
  std::map<std::string, std::deque<std::pair<double, uint64_t>>> package_bytes_by_client;

  explicit Impl(CoordinatorOptions o) : opts(std::move(o)), scheduler(opts.scheduler) {}

  void Send(const std::string& identity, Command cmd) override;
  void Disconnect(const std::string& identity, const std::string& reason) override;
  void ProtocolError(const std::string& identity, const std::string& reason) override;

  // `client`: who a submit counts against (SubmitRate): the CURVE key, or
  // the peer's address without CURVE.
  void Handle(const std::string& identity, const std::string& key, const std::string& client, Envelope env);

  // A device's request for work: a lease, or NoWork with when to ask again.
  void HandleRequestWork(const std::string& identity, WorkerSession& session, int device_index, double now);

  void Tick(double now);
};

}  // namespace tune
