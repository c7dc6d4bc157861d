#include "coordinator_status.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "dashboard.h"
#include "base/clock.h"
#include "report/compare.h"
#include "serve/metrics.h"
#include "base/json_text.h"

namespace tune {
namespace {

constexpr int64_t kFinishedSweepSeriesSeconds = 3600;

}  // namespace

Status StatusPages::Start(const CoordinatorOptions& opts) {
  snapshotter_ = std::make_unique<OffLoop>("snapshot");
  TUNE_RETURN_IF_ERROR(snapshotter_->Start());
  if (opts.http_port < 0) return Status::OK();
  HttpServerOptions ho;
  ho.address = opts.http_address;
  ho.port = static_cast<uint16_t>(opts.http_port);
  ho.page = DashboardPage();
  ho.documents = DashboardDocuments();
  http_ = std::make_unique<HttpServer>(ho, &snapshot_);
  Publish(NowSeconds());
  return http_->Start();
}

void StatusPages::Tick(double now) {
  if (http_ && now - last_publish_ >= 1.0) {
    Publish(now);
    last_publish_ = now;
  }
}

void StatusPages::Publish(double now) {
  using nlohmann::json;
  const IngestCounters& ic = ingestion_->counters();
  const std::string& store_fault = health_->fault();
  std::map<std::string, std::string> docs;
  json sweeps = json::array();
  std::vector<Metric> metrics;
  metrics.push_back(Metric::Gauge("tunefarm_build_info", "this coordinator's version (always 1)", 1,
                                  {{"version", TUNEFARM_VERSION}}));
  const int64_t now_unix = std::time(nullptr);
  for (const auto& p : scheduler_->Progress("", now)) {
    sweeps.push_back({{"id", p.sweep_id}, {"name", p.name}, {"state", p.state},
                      {"pairs_done", p.pairs_done}, {"pairs_total", p.pairs_total},
                      {"pairs_failed", p.pairs_failed}, {"failed_by_class", p.failed_by_class},
                      {"units_done", p.units_done},
                      {"units_total", p.units_total}, {"gpu_models", p.gpu_models},
                      {"started_unix", p.started_unix}, {"finished_unix", p.finished_unix},
                      {"error", p.error}, {"waiting_for", p.waiting_for},
                      {"expanding", p.expanding}, {"waits", p.waits}, {"skipped", p.skipped}});
    // A finished sweep's series go an hour after it ended: a long-lived
    // coordinator's /metrics does not grow with every sweep it ever ran.
    if (p.finished_unix > 0 && now_unix - p.finished_unix > kFinishedSweepSeriesSeconds) continue;
    const MetricLabels labels = {{"sweep", p.sweep_id}, {"name", p.name}};
    metrics.push_back(Metric::Gauge("tunefarm_sweep_pairs_done", "(config, shape) pairs stored",
                                    p.pairs_done, labels));
    metrics.push_back(Metric::Gauge("tunefarm_sweep_pairs", "(config, shape) pairs to measure",
                                    p.pairs_total, labels));
    metrics.push_back(Metric::Gauge("tunefarm_sweep_pairs_failed", "pairs stored as failures",
                                    p.pairs_failed, labels));
  }
  docs["sweeps"] = DumpJson(json{{"now_unix", std::time(nullptr)},
                                 {"sweeps", sweeps},
                                 {"store_fault", store_fault},
                                 {"kernel_image_conflicts", ic.kernel_image_conflicts}});
  json ws = json::array();
  size_t devices = 0;
  std::map<std::string, size_t> per_model;  // devices by GPU model
  const std::map<std::string, size_t> leases_held = scheduler_->LeasesPerWorker();
  for (const auto& [id, peer] : sessions_->all()) {
    json devs = json::array();
    for (const auto& d : peer.devices) {
      devs.push_back({{"index", d.index}, {"name", d.name}, {"model", d.model},
                      {"backend", d.backend},
                      {"cc", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                      {"num_sms", d.num_sms}, {"total_mem_bytes", d.total_mem_bytes}});
    }
    devices += peer.devices.size();
    for (const auto& d : peer.devices) per_model[d.model]++;
    const auto held = leases_held.find(id);
    metrics.push_back(Metric::Gauge("tunefarm_worker_leases", "units a worker holds", held == leases_held.end() ? 0 : held->second,
                                    {{"worker", peer.name}}));
    metrics.push_back(Metric::Gauge("tunefarm_worker_last_seen_seconds", "since the worker's last message",
                                    now - peer.last_seen, {{"worker", peer.name}}));
    metrics.push_back(Metric::Gauge("tunefarm_worker_clock_skew_seconds",
                                    "the worker's row times less the coordinator's clock (rows keep the latter)",
                                    peer.clock_skew_seconds, {{"worker", peer.name}}));
    ws.push_back({{"name", peer.name},
                  {"last_seen_seconds", now - peer.last_seen},
                  {"clock_skew_seconds", peer.clock_skew_seconds},
                  {"clock_off", std::abs(peer.clock_skew_seconds) > kClockSkewWarnSeconds},
                  {"leases", held == leases_held.end() ? 0 : held->second},
                  {"devices", devs}});
  }
  docs["workers"] = DumpJson(json{{"workers", ws}});
  metrics.push_back(Metric::Gauge("tunefarm_workers", "workers connected", sessions_->size()));
  metrics.push_back(Metric::Gauge("tunefarm_devices", "devices of connected workers", devices));
  for (const auto& [model, n] : per_model)
    metrics.push_back(Metric::Gauge("tunefarm_model_devices", "devices of connected workers, by GPU model", n,
                                    {{"gpu_model", model}}));
  for (const auto& [model, n] : scheduler_->QueuedConfigsPerModel())
    metrics.push_back(Metric::Gauge("tunefarm_configs_queued", "configs waiting to be leased, by GPU model", n,
                                    {{"gpu_model", model}}));
  for (const auto& [model, n] : scheduler_->LeasedUnitsPerModel())
    metrics.push_back(Metric::Gauge("tunefarm_units_leased", "units leased now, by GPU model", n,
                                    {{"gpu_model", model}}));
  for (const auto& [cls, n] : ic.failures_by_class)
    metrics.push_back(Metric::Counter("tunefarm_results_failed_total", "failure rows stored, by class", n,
                                      {{"class", cls}}));
  metrics.push_back(Metric::Gauge("tunefarm_store_bytes", "bytes of the result store (RocksDB's estimate)",
                                  static_cast<double>(store_->ApproximateBytes())));
  metrics.push_back(Metric::Counter("tunefarm_results_stored_total", "measurements stored", ic.results_stored));
  metrics.push_back(Metric::Counter("tunefarm_results_duplicate_total",
                                    "measurements received again and not stored twice",
                                    ic.results_duplicate));
  metrics.push_back(Metric::Counter("tunefarm_kernel_images_total",
                                    "Measured cubins received with results (each stored once per key)",
                                    ic.kernel_images));
  metrics.push_back(Metric::Counter("tunefarm_kernel_image_conflicts_total",
                                    "cubins that differ from another worker's image of the same kernel, config "
                                    "and arch (none of them ships unverified)",
                                    ic.kernel_image_conflicts));
  metrics.push_back(Metric::Counter("tunefarm_leases_total", "work units leased", ic.leases));
  metrics.push_back(Metric::Counter("tunefarm_leases_retried_total",
                                    "leases of units that went back to the queue once or more", ic.leases_retried));
  metrics.push_back(Metric::Counter("tunefarm_leases_expired_total",
                                    "leases that ran past their deadline (the unit went back to the queue)",
                                    counters_->leases_expired));
  metrics.push_back(Metric::Counter("tunefarm_worker_deaths_total",
                                    "workers dropped for missing their heartbeats", sessions_->worker_deaths()));
  for (const auto& [model, n] : ic.stored_per_model)
    metrics.push_back(Metric::Counter("tunefarm_model_results_stored_total",
                                      "measurements stored, by GPU model (its rate is the model's throughput)", n,
                                      {{"gpu_model", model}}));
  metrics.push_back(Metric::FromHistogram("tunefarm_ingest_seconds",
                                          "a results batch from its arrival to its acknowledgement", ic.ingest_seconds));
  for (const auto& [model, h] : ic.unit_seconds)
    metrics.push_back(Metric::FromHistogram("tunefarm_unit_seconds",
                                            "a work unit from its lease to its stored final batch", h,
                                            {{"gpu_model", model}}));
  metrics.push_back(Metric::Gauge("tunefarm_store_writable",
                                  "1 while store writes succeed; 0 while they fail and leasing stops",
                                  store_fault.empty() ? 1 : 0));
  metrics.push_back(Metric::Gauge("tunefarm_ingest_queue_bytes",
                                  "bytes of results received and not yet stored",
                                  ingestion_->queued_bytes()));
  metrics.push_back(Metric::Counter("tunefarm_results_refused_total",
                                    "results batches refused: not what was leased to their sender",
                                    ic.batches_refused));
  metrics.push_back(Metric::Counter("tunefarm_protocol_errors_total",
                                    "frames that failed to decode (framing, version, text)",
                                    counters_->protocol_errors));
  if (http_) {
    const HttpServerCounters c = http_->counters();
    metrics.push_back(Metric::Gauge("tunefarm_http_connections", "HTTP connections open", c.open));
    metrics.push_back(Metric::Counter("tunefarm_http_evicted_total",
                                      "HTTP connections closed to give their slot to a newer one", c.evicted));
    metrics.push_back(Metric::Counter("tunefarm_http_refused_total",
                                      "HTTP connections closed at once: caps full, no slot to take", c.refused));
    metrics.push_back(Metric::Counter("tunefarm_http_timeouts_total", "HTTP connections that missed a deadline",
                                      c.header_timeouts + c.body_timeouts + c.write_timeouts + c.idle_timeouts +
                                          c.write_stalls));
  }
  metrics.push_back(Metric::Counter("tunefarm_peers_disconnected_total",
                                    "peers disconnected for bad or unexpected messages",
                                    counters_->dropped_messages));
  // Best rows scan the store, and the comparison plans every winner's
  // launch: both grow with what was stored, so they are built on the
  // snapshotter's thread (the store is thread-safe), one build at a time,
  // and published when done.
  snapshotter_->RunCompletions();
  const bool best_due = now - last_best_publish_ >= 5.0, compare_due = now - last_compare_publish_ >= 30.0;
  if (!building_ && (best_due || compare_due)) {
    building_ = true;
    last_best_publish_ = now;
    if (compare_due) last_compare_publish_ = now;
    snapshotter_->Post([this, keys = compare_keys_, compare_due]() -> OffLoop::Completion {
      auto built = std::make_shared<std::map<std::string, std::string>>();
      size_t best_keys = keys;
      auto best = store_->Best({});
      if (best.ok()) {
        json rows = json::array();
        for (const auto& m : *best) {
          rows.push_back({{"op", m.op}, {"dtype", m.dtype}, {"shape", m.shape},
                          {"gpu_model", m.gpu_model}, {"config", m.config.Canonical()},
                          {"config_id", m.config_id}, {"kernel_hash", m.kernel_hash},
                          {"median_us", m.median_us}, {"stdev_us", m.stdev_us},
                          {"samples", m.samples}, {"backend", m.backend}, {"sweep_id", m.sweep_id}});
        }
        (*built)["best"] = DumpJson(json{{"best", rows}});
        best_keys = best->size();
      }
      // The newest kernel of each key, with its throughput and roofline
      // share (CompareArchitectures: every key's winners, the op specs and
      // the portability reads): the costliest document, so the least often,
      // or at once when a key is new. It fails only when nothing is stored.
      const bool compare_now = compare_due || best_keys != keys;
      if (compare_now) {
        json groups = json::array();
        if (auto c = CompareArchitectures(*store_, {}); c.ok()) {
          for (const auto& row : c->rows) {
            json gpus = json::array();
            for (size_t i = 0; i < row.winners.size(); ++i) {
              const ModelWinner& w = row.winners[i];
              if (!w.present) continue;
              gpus.push_back({{"gpu_model", c->models[i].gpu_model}, {"median_us", w.best.median_us},
                              {"config", w.best.config.Canonical()}, {"backend", w.best.backend},
                              {"throughput", w.throughput}, {"unit", w.unit}, {"roofline_share", w.roofline_share}});
            }
            groups.push_back({{"op", row.op}, {"dtype", row.dtype}, {"shape", row.shape}, {"gpus", gpus}});
          }
        }
        (*built)["compare"] = DumpJson(json{{"groups", groups}});
      }
      return [this, built, best_keys, compare_now] {
        snapshot_.PublishDocs(std::move(*built));
        compare_keys_ = best_keys;
        if (compare_now) last_compare_publish_ = NowSeconds();
        building_ = false;
      };
    });
  }
  snapshot_.Publish(std::move(docs), RenderMetrics(metrics));
}

}  // namespace tune
