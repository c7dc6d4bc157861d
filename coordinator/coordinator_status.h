// The coordinator's status as the HTTP side serves it: the JSON documents
// of the dashboard and the /metrics exposition, rebuilt on the loop and
// swapped into an HttpSnapshot that the HTTP thread reads. Private to
// coordinator/; loop thread only, except HttpSnapshot (thread-safe).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator.h"
#include "coordinator_parts.h"
#include "coordinator_results.h"
#include "off_loop.h"
#include "scheduler.h"
#include "sweeps.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "worker_sessions.h"

namespace tune {

// What the HTTP thread serves: documents the coordinator loop rebuilds and
// swaps in under a mutex, so a slow browser never holds up the loop.
class HttpSnapshot final : public HttpStatusSource {
 public:
  std::string Json(const std::string& what) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = docs_.find(what);
    return it == docs_.end() ? "" : it->second;
  }
  std::string Metrics() override {
    std::lock_guard<std::mutex> lock(mu_);
    return metrics_;
  }
  void Publish(std::map<std::string, std::string> docs, std::string metrics) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, v] : docs) docs_[k] = std::move(v);
    metrics_ = std::move(metrics);
  }
  void PublishDocs(std::map<std::string, std::string> docs) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, v] : docs) docs_[k] = std::move(v);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> docs_;
  std::string metrics_;
};

class StatusPages {
 public:
  // Every pointer must outlive this object; the parts are only read.
  StatusPages(ResultStore* store, const Scheduler* scheduler, const Sweeps* sweeps, const WorkerSessions* sessions,
              const Ingestion* ingestion, const StoreHealth* health, const LoopCounters* counters)
      : store_(store),
        scheduler_(scheduler),
        sweeps_(sweeps),
        sessions_(sessions),
        ingestion_(ingestion),
        health_(health),
        counters_(counters) {}

  // Starts the thread that builds the store-scanning documents, and the
  // HTTP server when `opts.http_port` >= 0 (its first documents published
  // before it serves); the pages read the clocks of `opts.env`. Returns the
  // thread's or the server's error (a port that cannot be bound is named).
  Status Start(const CoordinatorOptions& opts);

  // "http://address:port/" of the dashboard; empty when HTTP is off.
  std::string url() const { return http_ ? http_->url() : ""; }

  // Rebuilds the documents and /metrics when a second passed since the last
  // time; nothing while HTTP is off.
  void Tick(double now);

 private:
  // Swaps in every document and /metrics: the loop's own figures now, the
  // store-scanning documents when their build is done.
  void Publish(double now);
  // docs["sweeps"] and each sweep's series.
  void AddSweeps(std::map<std::string, std::string>* docs, std::vector<Metric>* metrics) const;
  // docs["workers"] and the series of workers and their devices.
  void AddWorkers(double now, std::map<std::string, std::string>* docs, std::vector<Metric>* metrics) const;
  // The farm's counters and gauges: queues, leases, ingestion, the store,
  // the HTTP side, peers.
  void AddFarmMetrics(std::vector<Metric>* metrics) const;
  // Publishes the store-scanning documents built since the last call, and
  // posts the next build when one is due and none runs.
  void PostStoreDocuments(double now);
  // docs["best"] and how many best rows it holds; nullopt when the store
  // cannot be read. On the snapshotter's thread.
  std::optional<std::pair<std::string, size_t>> BestDocument() const;
  // docs["compare"]: the newest kernel of each key with its throughput and
  // roofline share (CompareArchitectures: every key's winners, the op specs
  // and the portability reads), the costliest document; no groups when
  // nothing is stored. On the snapshotter's thread.
  std::string CompareDocument() const;

  ResultStore* store_;
  const Scheduler* scheduler_;
  const Sweeps* sweeps_;
  const WorkerSessions* sessions_;
  const Ingestion* ingestion_;
  const StoreHealth* health_;
  const LoopCounters* counters_;
  Env* env_ = Env::Default();  // CoordinatorOptions::env once started
  double last_publish_ = 0, last_best_publish_ = 0, last_compare_publish_ = 0;
  size_t compare_keys_ = 0;  // best rows when the comparison was last published
  // Builds the documents that scan the store (best rows, the comparison):
  // their cost grows with what clients stored, which the loop must never
  // wait for. One build at a time (building_).
  std::unique_ptr<OffLoop> snapshotter_;
  bool building_ = false;
  HttpSnapshot snapshot_;
  std::unique_ptr<HttpServer> http_;  // after snapshot_: stops serving it before it goes
};

}  // namespace tune
