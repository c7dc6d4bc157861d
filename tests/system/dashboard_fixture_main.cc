// A stand-alone HttpServer over a scripted status source, for the browser
// test (tests/system/dashboard_browser_test.py) and for looking at the
// dashboard by hand. Its numbers move with wall time: a sweep advances by
// `--pairs-per-second`, results improve, a worker joins after a few seconds.
//
//   dashboard_fixture [--port N] [--address A] [--no-chartjs] [--pairs-per-second R]
//
// Prints "listening <url>" on stdout once the server is up; serves until
// SIGTERM or SIGINT, or until stdin closes when --exit-on-eof is given.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dashboard.h"
#include "serve/http_server.h"
#include "serve/metrics.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

using nlohmann::json;

class ScriptedSource : public tune::HttpStatusSource {
 public:
  explicit ScriptedSource(double pairs_per_second)
      : rate_(pairs_per_second), t0_(std::chrono::steady_clock::now()), start_unix_(std::time(nullptr)) {}

  std::string Json(const std::string& what) override {
    std::lock_guard<std::mutex> lock(mu_);
    const double t = Elapsed();
    if (what == "sweeps") return Sweeps(t).dump();
    if (what == "workers") return Workers(t).dump();
    if (what == "best") return Best(t).dump();
    if (what == "compare") return Compare(t).dump();
    return "";
  }

  std::string Metrics() override {
    std::lock_guard<std::mutex> lock(mu_);
    const double t = Elapsed();
    const auto done = static_cast<double>(PairsDone(t));
    const std::vector<tune::Metric> m = {
        tune::Metric::Gauge("tunefarm_workers", "Connected workers.", t > 3 ? 2 : 1),
        tune::Metric::Counter("tunefarm_results_ingested_total",
                              "Result rows stored (duplicates not counted).", done),
        tune::Metric::Gauge("tunefarm_sweep_pairs_done", "Config x shape pairs finished, per sweep.",
                            done, {{"sweep", "nightly-gemm"}}),
    };
    return tune::RenderMetrics(m);
  }

 private:
  static constexpr uint64_t kPairsTotal = 960;

  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  uint64_t PairsDone(double t) const {
    const auto done = static_cast<uint64_t>(t * rate_);
    return done < kPairsTotal ? done : kPairsTotal;
  }

  json Sweeps(double t) const {
    const uint64_t done = PairsDone(t);
    const uint64_t failed = (done + 24) / 25;
    json s = json::array();
    s.push_back({{"id", "66a1b2c3-0001"},
                 {"name", "nightly-gemm"},
                 {"state", done >= kPairsTotal ? "done" : "running"},
                 {"pairs_done", done},
                 {"pairs_total", kPairsTotal},
                 {"pairs_failed", failed},
                 {"failed_by_class", {{"compile_error", failed - failed / 3}, {"timeout", failed / 3}}},
                 {"units_done", done / 48},
                 {"units_total", kPairsTotal / 48},
                 {"gpu_models", json::array({"h100-80gb-hbm3", "a100-sxm4-80gb", "sim-l4"})},
                 {"started_unix", start_unix_ - 60},
                 {"finished_unix", 0}});
    s.push_back({{"id", "66a1b2c3-0000"},
                 {"name", "rmsnorm-<b>smoke</b>"},  // markup in a name must show as text
                 {"state", "done"},
                 {"pairs_done", 64},
                 {"pairs_total", 64},
                 {"pairs_failed", 5},
                 {"failed_by_class", {{"wrong_result", 3}, {"crash", 2}}},
                 {"units_done", 4},
                 {"units_total", 4},
                 {"gpu_models", json::array({"h100-80gb-hbm3"})},
                 {"started_unix", start_unix_ - 3600},
                 {"finished_unix", start_unix_ - 3000}});
    s.push_back({{"id", "66a1b2c3-000f"},
                 {"name", "elementwise-trial"},
                 {"state", "cancelled"},
                 {"pairs_done", 10},
                 {"pairs_total", 400},
                 {"pairs_failed", 0},
                 {"failed_by_class", json::object()},
                 {"units_done", 1},
                 {"units_total", 8},
                 {"gpu_models", json::array({"a100-sxm4-80gb"})},
                 {"started_unix", start_unix_ - 7200},
                 {"finished_unix", start_unix_ - 7100}});
    return {{"now_unix", start_unix_ + static_cast<int64_t>(t)}, {"sweeps", s}};
  }

  json Workers(double t) const {
    json w = json::array();
    w.push_back({{"name", "gpu-node-1:4242"},
                 {"leases", 2},
                 {"last_seen_seconds", 0.4},
                 {"devices",
                  json::array({{{"index", 0}, {"name", "NVIDIA H100 80GB HBM3"},
                                {"model", "h100-80gb-hbm3"}, {"backend", "cuda"}, {"cc", "9.0"},
                                {"num_sms", 132}, {"total_mem_bytes", 85520809984LL}},
                               {{"index", 1}, {"name", "NVIDIA A100-SXM4-80GB"},
                                {"model", "a100-sxm4-80gb"}, {"backend", "cuda"}, {"cc", "8.0"},
                                {"num_sms", 108}, {"total_mem_bytes", 85899345920LL}}})}});
    if (t > 3) {
      w.push_back({{"name", "sim-host:77"},
                   {"leases", 1},
                   {"last_seen_seconds", 0.1},
                   {"devices",
                    json::array({{{"index", 0}, {"name", "Simulated NVIDIA L4"},
                                  {"model", "sim-l4"}, {"backend", "sim"}, {"cc", "8.9"},
                                  {"num_sms", 58}, {"total_mem_bytes", 24159191040LL}}})}});
    }
    return {{"workers", w}};
  }

  // Best latency per model improves as the sweep goes on, then settles.
  double Latency(double base, double t) const {
    const double progress = static_cast<double>(PairsDone(t)) / kPairsTotal;
    return base * (1.3 - 0.3 * progress);
  }

  struct Entry {
    const char* model;
    const char* backend;
    double speed;  // relative to the H100
  };
  std::vector<Entry> Entries(double t) const {
    std::vector<Entry> e = {{"h100-80gb-hbm3", "cuda", 1.0}, {"a100-sxm4-80gb", "cuda", 0.55}};
    if (t > 3) e.push_back({"sim-l4", "sim", 0.2});
    return e;
  }

  // The keys of the comparison: hundreds, as a fleet's nightly has. gemm is
  // compute-bound (TFLOP/s), the others memory-bound (GB/s).
  struct Key {
    std::string op, dtype, shape, unit;
    double work;  // FLOPs or bytes
  };
  static std::vector<Key> Keys() {
    std::vector<Key> keys;
    for (const char* dtype : {"f16", "bf16"})
      for (int i = 1; i <= kGemmShapes; ++i) {
        const double m = 256.0 * i;
        keys.push_back({"gemm", dtype, "M=" + std::to_string(256 * i) + ",N=4096,K=4096", "TFLOP/s", 2 * m * 4096 * 4096});
      }
    for (int i = 1; i <= kRmsnormShapes; ++i)
      keys.push_back({"rmsnorm", "f16", "ROWS=" + std::to_string(1024 * i) + ",N=4096", "GB/s", 4.0 * 1024 * i * 4096});
    return keys;
  }
  static constexpr int kGemmShapes = 60, kRmsnormShapes = 80;

  // One key's figures on one model: H100 peaks 989 TFLOP/s and 3350 GB/s.
  json Winner(const Key& k, const Entry& e, double t) const {
    const double peak = k.unit == "TFLOP/s" ? 989 : 3350;
    const double share = 0.6 * e.speed;
    const double throughput = peak * share;  // in its unit
    const double us = Latency(k.work / (throughput * (k.unit == "TFLOP/s" ? 1e6 : 1e3)), t);
    return {{"gpu_model", e.model},
            {"median_us", us},
            {"config", "BK=32,BM=128,BN=128,STAGES=3,WM=2,WN=2"},
            {"backend", e.backend},
            {"throughput", k.work / us / (k.unit == "TFLOP/s" ? 1e6 : 1e3)},
            {"unit", k.unit},
            {"roofline_share", k.work / us / (k.unit == "TFLOP/s" ? 1e6 : 1e3) / peak}};
  }

  json Best(double t) const {
    json b = json::array();
    for (const auto& k : Keys()) {
      if (k.op != "gemm" || k.dtype != "f16") continue;  // the running sweep's
      for (const auto& e : Entries(t)) {
        const json w = Winner(k, e, t);
        b.push_back({{"op", k.op}, {"dtype", k.dtype}, {"shape", k.shape}, {"gpu_model", e.model},
                     {"config", w["config"]}, {"config_id", "3f2a9c1d00e4b7a1"},
                     {"kernel_hash", "9d8c7b6a5f4e3d2c"}, {"median_us", w["median_us"]},
                     {"stdev_us", w["median_us"].get<double>() * 0.01}, {"samples", 50},
                     {"backend", e.backend}, {"sweep_id", "66a1b2c3-0001"}});
      }
    }
    // One row of the finished rmsnorm sweep.
    b.push_back({{"op", "rmsnorm"}, {"dtype", "f16"}, {"shape", "ROWS=1024,N=4096"},
                 {"gpu_model", "h100-80gb-hbm3"}, {"config", "TPR=4,VEC=8"}, {"config_id", "77aa"},
                 {"kernel_hash", "5e5e"}, {"median_us", 9.5}, {"stdev_us", 0.1}, {"samples", 80},
                 {"backend", "cuda"}, {"sweep_id", "66a1b2c3-0000"}});
    return {{"best", b}};
  }

  json Compare(double t) const {
    json groups = json::array();
    for (const auto& k : Keys()) {
      json gpus = json::array();
      for (const auto& e : Entries(t)) gpus.push_back(Winner(k, e, t));
      groups.push_back({{"op", k.op}, {"dtype", k.dtype}, {"shape", k.shape}, {"gpus", gpus}});
    }
    return {{"groups", groups}};
  }

  std::mutex mu_;
  double rate_;
  std::chrono::steady_clock::time_point t0_;
  int64_t start_unix_;
};

}  // namespace

int main(int argc, char** argv) {
  tune::HttpServerOptions opts;
  opts.page = tune::DashboardPage();
  opts.documents = tune::DashboardDocuments();
  double rate = 20;
  bool exit_on_eof = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "dashboard_fixture: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--port") opts.port = static_cast<uint16_t>(std::stoi(next()));
    else if (a == "--address") opts.address = next();
    else if (a == "--no-chartjs") opts.chart_js_candidates.clear();
    else if (a == "--pairs-per-second") rate = std::stod(next());
    else if (a == "--exit-on-eof") exit_on_eof = true;
    else {
      std::fprintf(stderr,
                   "usage: dashboard_fixture [--port N] [--address A] [--no-chartjs] "
                   "[--pairs-per-second R] [--exit-on-eof]\n");
      return 2;
    }
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);

  ScriptedSource source(rate);
  tune::HttpServer server(opts, &source);
  tune::Status st = server.Start();
  if (!st.ok()) {
    std::fprintf(stderr, "dashboard_fixture: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("listening %s chartjs=%d\n", server.url().c_str(), server.has_chart_js() ? 1 : 0);
  std::fflush(stdout);
  if (exit_on_eof) {
    // The parent holds our stdin: when it dies, so do we.
    std::thread([] {
      char c;
      while (read(0, &c, 1) > 0) {
      }
      g_stop = true;
    }).detach();
  }
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.Stop();
  return 0;
}
