// The coordinator's status as the HTTP side serves it: the JSON documents
// of the dashboard and the /metrics exposition, rebuilt on the loop and
// swapped into an HttpSnapshot that the HTTP thread reads. Private to
// coordinator/; loop thread only, except HttpSnapshot (thread-safe).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "coordinator.h"
#include "coordinator_parts.h"
#include "coordinator_results.h"
#include "off_loop.h"
#include "scheduler.h"
#include "serve/http_server.h"
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
  StatusPages(ResultStore* store, const Scheduler* scheduler, const WorkerSessions* sessions,
              const Ingestion* ingestion, const StoreHealth* health, const LoopCounters* counters)
      : store_(store),
        scheduler_(scheduler),
        sessions_(sessions),
        ingestion_(ingestion),
        health_(health),
        counters_(counters) {}

  // Starts the thread that builds the store-scanning documents, and the
  // HTTP server when `opts.http_port` >= 0 (its first documents published
  // before it serves). Returns the thread's or the server's error (a port
  // that cannot be bound is named).
  Status Start(const CoordinatorOptions& opts);

  // "http://address:port/" of the dashboard; empty when HTTP is off.
  std::string url() const { return http_ ? http_->url() : ""; }

  // Rebuilds the documents and /metrics when a second passed since the last
  // time; nothing while HTTP is off.
  void Tick(double now);

 private:
  void Publish(double now);

  ResultStore* store_;
  const Scheduler* scheduler_;
  const WorkerSessions* sessions_;
  const Ingestion* ingestion_;
  const StoreHealth* health_;
  const LoopCounters* counters_;
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
