#include "coordinator_status.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "dashboard.h"
#include "publish/publish.h"
#include "report/compare.h"
#include "report/pipeline.h"
#include "serve/metrics.h"
#include "base/json_text.h"

namespace tune {
namespace {

constexpr int64_t kFinishedSweepSeriesSeconds = 3600;

}  // namespace

Status StatusPages::Start(const CoordinatorOptions& opts) {
  env_ = opts.env;
  snapshotter_ = std::make_unique<OffLoop>("snapshot");
  TUNE_RETURN_IF_ERROR(snapshotter_->Start());
  if (opts.http_port < 0) return Status::OK();
  HttpServerOptions ho;
  ho.address = opts.http_address;
  ho.port = static_cast<uint16_t>(opts.http_port);
  ho.page = DashboardPage();
  ho.documents = DashboardDocuments();
  http_ = std::make_unique<HttpServer>(ho, &snapshot_);
  Publish(env_->NowSeconds());
  return http_->Start();
}

void StatusPages::Tick(double now) {
  if (http_ && now - last_publish_ >= 1.0) {
    Publish(now);
    last_publish_ = now;
  }
}

void StatusPages::Publish(double now) {
  std::map<std::string, std::string> docs;
  std::vector<Metric> metrics;
  metrics.push_back(Metric::Gauge("tunefarm_build_info", "this coordinator's version (always 1)", 1,
                                  {{"version", TUNEFARM_VERSION}}));
  AddSweeps(&docs, &metrics);
  AddWorkers(now, &docs, &metrics);
  AddFarmMetrics(&metrics);
  PostStoreDocuments(now);
  snapshot_.Publish(std::move(docs), RenderMetrics(metrics));
}

void StatusPages::AddSweeps(std::map<std::string, std::string>* docs, std::vector<Metric>* metrics) const {
  using nlohmann::json;
  json sweeps = json::array();
  const int64_t now_unix = env_->NowUnixSeconds();
  // The sweeps `status` lists: this run's and those ended before it.
  for (const auto& p : sweeps_->StatusOf("").sweeps) {
    sweeps.push_back({{"id", p.sweep_id}, {"name", p.name}, {"state", p.state},
                      {"pairs_done", p.pairs_done}, {"pairs_total", p.pairs_total},
                      {"pairs_failed", p.pairs_failed}, {"failed_by_class", p.failed_by_class},
                      {"units_done", p.units_done},
                      {"units_total", p.units_total}, {"gpu_models", p.gpu_models},
                      {"started_unix", p.started_unix}, {"finished_unix", p.finished_unix},
                      {"error", p.error}, {"waiting_for", p.waiting_for},
                      {"expanding", p.expanding}, {"waits", p.waits}, {"skipped", p.skipped},
                      {"priority", p.priority},
                      {"pipeline", PipelineJson(p.pipeline, p.in_flight, p.in_flight_depth)}});
    // A finished sweep's series go an hour after it ended: a long-lived
    // coordinator's /metrics does not grow with every sweep it ever ran.
    if (p.finished_unix > 0 && now_unix - p.finished_unix > kFinishedSweepSeriesSeconds) continue;
    const MetricLabels labels = {{"sweep", p.sweep_id}, {"name", p.name}};
    metrics->push_back(Metric::Gauge("tunefarm_sweep_pairs_done", "(config, shape) pairs stored",
                                     p.pairs_done, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_pairs", "(config, shape) pairs to measure",
                                     p.pairs_total, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_pairs_failed", "pairs stored as failures",
                                     p.pairs_failed, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_configs_compiled", "configs its units compiled",
                                     p.pipeline.compiled, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_configs_fetched",
                                     "configs its units took from the coordinator's stored images", p.pipeline.fetched,
                                     labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_configs_cached", "configs its units found in the cubin cache",
                                     p.pipeline.cached, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_compile_seconds", "compiler time of its units' configs",
                                     p.pipeline.compile_seconds, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_device_wait_seconds", "seconds its devices waited for compiles",
                                     p.pipeline.device_wait_seconds, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_devices_busy",
                                     "fraction of its devices' time on its units spent checking and timing",
                                     DevicesBusy(p.pipeline), labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_compile_busy",
                                     "fraction of its workers' compile threads' time since its first lease spent "
                                     "compiling its configs",
                                     CompileBusy(p.pipeline), labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_in_flight", "searched configs proposed and not yet measured",
                                     p.in_flight, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_in_flight_depth", "the most its searched keys keep in flight",
                                     p.in_flight_depth, labels));
    metrics->push_back(Metric::Gauge("tunefarm_sweep_running", "1 while the sweep runs; 0 once done, cancelled or failed",
                                     p.state == "running" ? 1 : 0, labels));
  }
  (*docs)["sweeps"] = DumpJson(json{{"now_unix", now_unix},
                                    {"sweeps", sweeps},
                                    {"store_fault", health_->fault()},
                                    {"kernel_image_conflicts", ingestion_->counters().kernel_image_conflicts},
                                    {"images_served", counters_->images_served}});
}

void StatusPages::AddWorkers(double now, std::map<std::string, std::string>* docs,
                             std::vector<Metric>* metrics) const {
  using nlohmann::json;
  json ws = json::array();
  size_t devices = 0;
  std::map<std::string, size_t> per_model;  // devices by GPU model
  const std::map<std::string, size_t> leases_held = scheduler_->LeasesPerWorker();
  const std::map<std::string, uint64_t>& reused = ingestion_->counters().reused_per_worker;
  size_t builders = 0;
  for (const auto& [id, peer] : sessions_->all()) {
    builders += peer.builder() ? 1 : 0;
    json devs = json::array();
    for (const auto& d : peer.devices) {
      devs.push_back({{"index", d.index}, {"name", d.name}, {"model", d.model},
                      {"backend", d.backend},
                      {"cc", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                      {"num_sms", d.num_sms}, {"total_mem_bytes", d.total_mem_bytes},
                      {"power_limit_w", d.power_limit_w}});
    }
    devices += peer.devices.size();
    for (const auto& d : peer.devices) per_model[d.model]++;
    const auto held = leases_held.find(id);
    metrics->push_back(Metric::Gauge("tunefarm_worker_leases", "units a worker holds",
                                     held == leases_held.end() ? 0 : held->second, {{"worker", peer.name}}));
    metrics->push_back(Metric::Gauge("tunefarm_worker_last_seen_seconds", "since the worker's last message",
                                     now - peer.last_seen, {{"worker", peer.name}}));
    metrics->push_back(Metric::Gauge("tunefarm_worker_clock_skew_seconds",
                                     "the worker's row times less the coordinator's clock (rows keep the latter)",
                                     peer.clock_skew_seconds, {{"worker", peer.name}}));
    ws.push_back({{"name", peer.name},
                  {"last_seen_seconds", now - peer.last_seen},
                  {"clock_skew_seconds", peer.clock_skew_seconds},
                  {"clock_off", std::abs(peer.clock_skew_seconds) > kClockSkewWarnSeconds},
                  {"leases", held == leases_held.end() ? 0 : held->second},
                  {"reused", reused.count(peer.name) ? reused.at(peer.name) : 0},
                  {"devices", devs}});
  }
  // Reuse rests on each worker's word for its host digest: counted by
  // worker, gone ones included, so an operator sees whose word it was.
  (*docs)["workers"] = DumpJson(json{{"workers", ws}, {"reused_by_worker", reused}});
  for (const auto& [name, n] : reused)
    metrics->push_back(Metric::Counter("tunefarm_rows_reused_total",
                                       "configs not measured again on a worker's word that its host digest has "
                                       "stored rows, by worker",
                                       n, {{"worker", name}}));
  metrics->push_back(Metric::Gauge("tunefarm_workers", "workers connected (builders apart)", sessions_->size() - builders));
  metrics->push_back(Metric::Gauge("tunefarm_builders", "builders connected (worker --compile-only)", builders));
  metrics->push_back(Metric::Gauge("tunefarm_devices", "devices of connected workers", devices));
  for (const auto& [model, n] : per_model)
    metrics->push_back(Metric::Gauge("tunefarm_model_devices", "devices of connected workers, by GPU model", n,
                                     {{"gpu_model", model}}));
}

void StatusPages::AddFarmMetrics(std::vector<Metric>* metrics) const {
  const IngestCounters& ic = ingestion_->counters();
  auto add = [metrics](Metric m) { metrics->push_back(std::move(m)); };
  for (const auto& [model, n] : scheduler_->QueuedConfigsPerModel())
    add(Metric::Gauge("tunefarm_configs_queued", "configs waiting to be leased, by GPU model", n,
                      {{"gpu_model", model}}));
  for (const auto& [model, n] : scheduler_->LeasedUnitsPerModel())
    add(Metric::Gauge("tunefarm_units_leased", "units leased now, by GPU model", n, {{"gpu_model", model}}));
  for (const auto& [cls, n] : ic.failures_by_class)
    add(Metric::Counter("tunefarm_results_failed_total", "failure rows stored, by class", n, {{"class", cls}}));
  add(Metric::Gauge("tunefarm_store_bytes", "bytes of the result store (RocksDB's estimate)",
                    static_cast<double>(store_->ApproximateBytes())));
  add(Metric::Counter("tunefarm_results_stored_total", "measurements stored", ic.results_stored));
  add(Metric::Counter("tunefarm_results_duplicate_total", "measurements received again and not stored twice",
                      ic.results_duplicate));
  add(Metric::Counter("tunefarm_results_reused_total",
                      "configs a worker did not measure again: a row under its host digest was stored", ic.results_reused));
  add(Metric::Counter("tunefarm_kernel_images_total",
                      "Measured cubins received with results (each stored once per key)", ic.kernel_images));
  add(Metric::Counter("tunefarm_kernel_image_conflicts_total",
                      "cubins that differ from another worker's image of the same kernel, config "
                      "and arch (none of them ships unverified)",
                      ic.kernel_image_conflicts));
  add(Metric::Counter("tunefarm_kernel_images_served_total",
                      "stored cubins (two worker keys' word, or a builder's) sent to workers instead of a compile",
                      counters_->images_served));
  add(Metric::Counter("tunefarm_image_requests_refused_total",
                      "image requests refused: not of a unit leased to the sender, or over its rate",
                      counters_->image_requests_refused));
  add(Metric::Counter("tunefarm_build_works_total", "works handed to builders (configs of one op, dtype and arch each)",
                      counters_->build_works));
  add(Metric::Counter("tunefarm_builder_images_total", "builders' cubins stored (new, or a new witness of one)",
                      counters_->builder_images_stored));
  add(Metric::Counter("tunefarm_builder_image_conflicts_total",
                      "builders' cubins that differ from the stored image of their key (the stored one stays)",
                      counters_->builder_image_conflicts));
  add(Metric::Counter("tunefarm_builder_configs_failed_total", "configs builders could not compile",
                      counters_->builder_configs_failed));
  add(Metric::Counter("tunefarm_builds_refused_total",
                      "builders' image batches refused: not of work handed to them, or images that fail a check",
                      counters_->builds_refused));
  add(Metric::Counter("tunefarm_leases_total", "work units leased", ic.leases));
  add(Metric::Counter("tunefarm_leases_retried_total", "leases of units that went back to the queue once or more",
                      ic.leases_retried));
  add(Metric::Counter("tunefarm_leases_expired_total",
                      "leases that ran past their deadline (the unit went back to the queue)",
                      counters_->leases_expired));
  add(Metric::Counter("tunefarm_worker_deaths_total", "workers dropped for missing their heartbeats",
                      sessions_->worker_deaths()));
  for (const auto& [model, n] : ic.stored_per_model)
    add(Metric::Counter("tunefarm_model_results_stored_total",
                        "measurements stored, by GPU model (its rate is the model's throughput)", n,
                        {{"gpu_model", model}}));
  add(Metric::FromHistogram("tunefarm_ingest_seconds", "a results batch from its arrival to its acknowledgement",
                            ic.ingest_seconds));
  for (const auto& [model, h] : ic.unit_seconds)
    add(Metric::FromHistogram("tunefarm_unit_seconds", "a work unit from its lease to its stored final batch", h,
                              {{"gpu_model", model}}));
  add(Metric::Gauge("tunefarm_store_writable", "1 while store writes succeed; 0 while they fail and leasing stops",
                    health_->fault().empty() ? 1 : 0));
  add(Metric::Gauge("tunefarm_ingest_queue_bytes", "bytes of results received and not yet stored",
                    ingestion_->queued_bytes()));
  add(Metric::Counter("tunefarm_results_refused_total",
                      "results batches refused: not what was leased to their sender", ic.batches_refused));
  add(Metric::Counter("tunefarm_protocol_errors_total", "frames that failed to decode (framing, version, text)",
                      counters_->protocol_errors));
  if (http_) {
    const HttpServerCounters c = http_->counters();
    add(Metric::Gauge("tunefarm_http_connections", "HTTP connections open", c.open));
    add(Metric::Counter("tunefarm_http_evicted_total", "HTTP connections closed to give their slot to a newer one",
                        c.evicted));
    add(Metric::Counter("tunefarm_http_refused_total", "HTTP connections closed at once: caps full, no slot to take",
                        c.refused));
    add(Metric::Counter("tunefarm_http_timeouts_total", "HTTP connections that missed a deadline",
                        c.header_timeouts + c.body_timeouts + c.write_timeouts + c.idle_timeouts + c.write_stalls));
  }
  add(Metric::Counter("tunefarm_peers_disconnected_total", "peers disconnected for bad or unexpected messages",
                      counters_->dropped_messages));
}

void StatusPages::PostStoreDocuments(double now) {
  // Best rows scan the store, and the comparison plans every winner's
  // launch: both grow with what was stored, so they are built on the
  // snapshotter's thread (the store is thread-safe), one build at a time,
  // and published when done.
  snapshotter_->RunCompletions();
  const bool best_due = now - last_best_publish_ >= 5.0, compare_due = now - last_compare_publish_ >= 30.0;
  if (building_ || !(best_due || compare_due)) return;
  building_ = true;
  last_best_publish_ = now;
  if (compare_due) last_compare_publish_ = now;
  snapshotter_->Post([this, keys = compare_keys_, compare_due]() -> OffLoop::Completion {
    auto built = std::make_shared<std::map<std::string, std::string>>();
    size_t best_keys = keys;
    if (auto best = BestDocument(); best) {
      (*built)["best"] = std::move(best->first);
      best_keys = best->second;
    }
    // The comparison is the costliest document: built the least often, or
    // at once when a key is new.
    const bool compare_now = compare_due || best_keys != keys;
    if (compare_now) (*built)["compare"] = CompareDocument();
    return [this, built, best_keys, compare_now] {
      snapshot_.PublishDocs(std::move(*built));
      compare_keys_ = best_keys;
      if (compare_now) last_compare_publish_ = env_->NowSeconds();
      building_ = false;
    };
  });
}

std::optional<std::pair<std::string, size_t>> StatusPages::BestDocument() const {
  using nlohmann::json;
  // The winners `best`, `compare`, `publish` and Python name.
  auto best = Winners(*store_, {});
  if (!best.ok()) return std::nullopt;
  json rows = json::array();
  for (const auto& m : *best) {
    rows.push_back({{"op", m.op}, {"dtype", m.dtype}, {"shape", m.shape},
                    {"gpu_model", m.gpu_model}, {"config", m.config.Canonical()},
                    {"config_id", m.config_id}, {"kernel_hash", m.kernel_hash},
                    {"median_us", m.median_us}, {"stdev_us", m.stdev_us},
                    {"samples", m.samples}, {"backend", m.backend}, {"sweep_id", m.sweep_id}});
    if (auto c = store_->GetCoverage(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash); c.ok() && *c)
      rows.back()["coverage"] = CoverageJson(**c);
  }
  return std::make_pair(DumpJson(json{{"best", rows}}), best->size());
}

std::string StatusPages::CompareDocument() const {
  using nlohmann::json;
  json groups = json::array();
  if (auto c = CompareArchitectures(*store_, {}); c.ok()) {
    for (const auto& row : c->rows) {
      json gpus = json::array();
      for (size_t i = 0; i < row.winners.size(); ++i) {
        const ModelWinner& w = row.winners[i];
        if (!w.present) continue;
        gpus.push_back({{"gpu_model", c->models[i].gpu_model}, {"median_us", w.best.median_us},
                        {"config", w.best.config.Canonical()}, {"backend", w.best.backend},
                        {"throughput", w.throughput}, {"unit", w.unit}, {"roofline_share", w.roofline_share},
                        {"vs_baseline", w.vs_baseline > 0 ? json(w.vs_baseline) : json(nullptr)},
                        {"baseline", w.baseline ? json(w.baseline->baseline) : json(nullptr)}});
      }
      groups.push_back({{"op", row.op}, {"dtype", row.dtype}, {"shape", row.shape}, {"gpus", gpus}});
    }
  }
  return DumpJson(json{{"groups", groups}});
}

}  // namespace tune
