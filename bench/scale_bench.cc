// Scale benchmark (sim): N simulated workers, each with its own DEALER socket,
// against one real `tunefarm coordinator` process on loopback with its own
// RocksDB store. The workers measure nothing: they answer each unit with
// synthetic rows at once (or after --unit-seconds), so the figures are the
// coordinator's (and the loopback transport's) limits, never a GPU's.
// bench/scale.md records runs and what limits them.
//
//   bench_scale [--workers 1000] [--threads 4] [--shapes 100] [--batch 64] ...
//   TUNEFARM_BIN=/opt/tunefarm/bin/tunefarm bench_scale ...   # or --tunefarm PATH
//   bench_scale --workers 10 --shapes 20 --coordinator-wrapper "valgrind --tool=callgrind"
//
// Prints a table and one JSON line (prefixed "JSON ") for scripts.
// Long on purpose: a self-contained benchmark program (simulated fleet,
// measurements, report) that its write-up (bench/scale.md) reproduces.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "opspec/op_definition.h"
#include "protocol/protocol.h"
#include "base/types.h"

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

struct Options {
  std::string tunefarm;
  std::string op_dir;
  int workers = 1000;
  int threads = 4;
  int io_threads = 1;
  int shapes = 100;
  int sweeps = 1;
  // 200 rows per unit (units hold one shape): what a GPU unit of a few
  // seconds holds of a small kernel.
  uint32_t configs_per_unit = 200;
  size_t batch = 64;
  uint32_t heartbeat_ms = 1000;
  double timeout_s = 600;
  double idle_s = 1;  // connected and polling before the sweep: the lease path without a backlog
  double unit_s = 0;  // simulated time to measure one unit; 0 = answer at once (stress)
  bool keep = false;
  std::string coordinator_wrapper;  // e.g. "valgrind --tool=callgrind": profiling runs
};

// ---------------------------------------------------------------------------
// The coordinator child process.

class CoordinatorProcess {
 public:
  CoordinatorProcess(const std::vector<std::string>& argv, const std::string& log_path) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
  }
  ~CoordinatorProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool Alive() {
    if (reaped_) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) reaped_ = true;
    return !reaped_;
  }
  int Stop(double grace) {
    if (reaped_) return 0;
    kill(pid_, SIGTERM);
    const double deadline = Now() + grace;
    int status = 0;
    while (Now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return 128 + SIGKILL;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

int FreePort() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  close(s);
  return ntohs(addr.sin_port);
}

// What /proc says about a process: peak and current resident memory, CPU
// seconds in total and per thread name (the coordinator's poll loop is its
// main thread; ZeroMQ's I/O thread and RocksDB's background threads are
// named), so a saturated loop shows as ~1.0 core on one line.
struct ProcSample {
  double t = 0;
  double cpu_s = 0;
  double main_cpu_s = 0;
  double main_wait_s = 0;  // runnable but not running (schedstat): CPU contention
  // The thread that stores rows: "ingest" where the coordinator has one,
  // else the poll loop (coordinators that ingest inline).
  double ingest_cpu_s = 0;
  bool has_ingest_thread = false;

  int64_t vm_hwm_kb = 0, vm_rss_kb = 0;
  std::map<std::string, double> cpu_by_thread_name;
};

bool ReadStatCpu(const std::string& path, std::string* comm, double* cpu_s) {
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line)) return false;
  const auto open = line.find('(');
  const auto close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return false;
  *comm = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> fields;
  std::string tok;
  while (rest >> tok) fields.push_back(tok);
  // Fields after "(comm)" start at field 3 (state); utime is 14, stime 15.
  if (fields.size() < 13) return false;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  *cpu_s = (std::stod(fields[11]) + std::stod(fields[12])) / hz;
  return true;
}

ProcSample SampleProc(pid_t pid) {
  ProcSample s;
  s.t = Now();
  const std::string base = "/proc/" + std::to_string(pid);
  std::string comm;
  ReadStatCpu(base + "/stat", &comm, &s.cpu_s);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(base + "/task", ec)) {
    double cpu = 0;
    if (!ReadStatCpu(e.path().string() + "/stat", &comm, &cpu)) continue;
    if (e.path().filename() == std::to_string(pid)) {
      s.main_cpu_s = cpu;
      comm = "main (poll loop)";
      std::ifstream sched(e.path().string() + "/schedstat");
      double on_cpu_ns = 0, wait_ns = 0;
      if (sched >> on_cpu_ns >> wait_ns) s.main_wait_s = wait_ns / 1e9;
    }
    if (comm == "ingest") {
      s.ingest_cpu_s += cpu;
      s.has_ingest_thread = true;
    }
    s.cpu_by_thread_name[comm] += cpu;
  }
  if (!s.has_ingest_thread) s.ingest_cpu_s = s.main_cpu_s;
  std::ifstream status(base + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) s.vm_hwm_kb = std::atoll(line.c_str() + 6);
    if (line.rfind("VmRSS:", 0) == 0) s.vm_rss_kb = std::atoll(line.c_str() + 6);
  }
  return s;
}

// With --coordinator-wrapper (perf record, ...) the coordinator may be a
// child of the process we started: measure the innermost one.
pid_t InnermostChild(pid_t pid) {
  for (int depth = 0; depth < 4; ++depth) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    pid_t child = 0;
    if (!(f >> child) || child <= 0) break;
    pid = child;
  }
  return pid;
}

// ---------------------------------------------------------------------------
// Simulated workers.

struct Shared {
  const Options* opts = nullptr;
  std::string endpoint;
  std::string kernel_hash;
  zmq::context_t* ctx = nullptr;
  std::atomic<bool> stop{false};
  std::atomic<int> greeted{0};
  std::atomic<uint64_t> acked_stored{0};
  std::atomic<uint64_t> acked_rows{0};
  std::atomic<uint64_t> rows_sent{0};
  std::atomic<uint64_t> batches_sent{0};
  std::atomic<uint64_t> batches_acked{0};
};

struct ThreadStats {
  std::vector<double> lease_us;     // RequestWork sent -> WorkUnit received
  std::vector<double> lease_at;     // when each of those WorkUnits arrived (Now())
  std::vector<double> nowork_us;    // RequestWork sent -> NoWork received
  std::vector<double> ack_us;       // Results sent -> ResultsAck received
  uint64_t units = 0, batches = 0, rows = 0, stored = 0, nowork = 0;
  uint64_t heartbeats_in = 0, heartbeats_out = 0, disconnects = 0, send_failures = 0;
  uint64_t encode_ns = 0;           // wall time building and encoding Results
  uint64_t sweep_catches = 0;       // messages found by the safety sweep, not by epoll
};

struct SimWorker {
  std::unique_ptr<zmq::socket_t> sock;
  std::string name;
  uint64_t seq = 0;
  bool greeted = false;
  bool outstanding = false;
  double request_sent = 0;
  double next_request = 0;
  double last_sent = 0;
  double hb_interval = 1.0;
  std::optional<tune::WorkUnit> running;  // the unit being "measured"
  double running_until = 0;
  bool answer_queued = false;             // running is done and waits in WorkerThread::due_
  struct PendingAck {
    uint64_t unit, batch;
    double sent;
  };
  std::vector<PendingAck> pending;
};

class WorkerThread {
 public:
  WorkerThread(Shared* shared, int first, int count) : sh_(shared), first_(first), count_(count) {}

  void Run() {
    device_.index = 0;
    device_.name = "sim-h100";
    device_.model = "sim-h100";
    device_.backend = "sim";
    device_.max_threads_per_block = 1024;
    device_.nvrtc_version = "sim";
    device_.driver_version = "sim";
    workers_.resize(count_);
    // zmq::poll over hundreds of sockets costs O(sockets) per wake-up, which
    // on a small machine takes CPU from the coordinator under test; epoll on
    // each socket's ZMQ_FD costs O(ready). ZMQ_FD is edge-triggered and
    // reset by any send or recv, so every operation on a socket is followed
    // by draining it until recv says EAGAIN, and a slow sweep catches
    // anything missed (counted in sweep_catches, which also counts messages
    // that merely arrived while the sweep ran; a truly missed edge would
    // show as a latency outlier near the sweep period).
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < count_; ++i) {
      SimWorker& w = workers_[i];
      w.name = "sim-" + std::to_string(first_ + i);
      w.sock = std::make_unique<zmq::socket_t>(*sh_->ctx, zmq::socket_type::dealer);
      w.sock->set(zmq::sockopt::linger, 0);
      w.sock->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(tune::kMaxFrameBytes));
      w.sock->connect(sh_->endpoint);
      Send(w, tune::Hello{w.name, TUNEFARM_VERSION, {device_}});
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLET;
      ev.data.u32 = static_cast<uint32_t>(i);
      epoll_ctl(ep, EPOLL_CTL_ADD, w.sock->get(zmq::sockopt::fd), &ev);
      Drain(w);
    }
    std::vector<epoll_event> events(256);
    double last_timers = 0, last_sweep = Now();
    while (!sh_->stop.load(std::memory_order_relaxed)) {
      const int wait_ms = due_.empty() ? 5 : 0;
      const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), wait_ms);
      for (int e = 0; e < n; ++e) Drain(workers_[events[e].data.u32]);
      const double now = Now();
      if (now - last_timers >= 0.005) {
        last_timers = now;
        for (auto& w : workers_) {
          if (Timers(w, now)) Drain(w);
        }
      }
      if (now - last_sweep >= 0.1) {
        last_sweep = now;
        const int ready = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 0);
        for (int e = 0; e < ready; ++e) Drain(workers_[events[e].data.u32]);
        for (auto& w : workers_) stats.sweep_catches += Drain(w);
      }
      // One unit answered per turn: messages for this thread's other
      // workers are read (and timed) between answers, not after all of
      // them, as a real worker's socket thread never waits on its GPU.
      if (!due_.empty()) {
        SimWorker& w = workers_[due_.front()];
        due_.pop_front();
        Answer(w, *w.running);
        w.running.reset();
        w.answer_queued = false;
        RequestWork(w);  // the device is free again, as a real worker would be
        Drain(w);
      }
    }
    close(ep);
    for (auto& w : workers_) {
      if (w.greeted) Send(w, tune::Disconnect{"benchmark over"});
    }
    workers_.clear();
  }

  // Moves the NoWork latencies recorded so far to *out. Safe while Run()
  // is active: both sides hold nowork_mu_.
  void TakeNoWorkSamples(std::vector<double>* out) {
    std::lock_guard<std::mutex> lock(nowork_mu_);
    out->insert(out->end(), stats.nowork_us.begin(), stats.nowork_us.end());
    stats.nowork_us.clear();
  }

  ThreadStats stats;

 private:
  void Send(SimWorker& w, tune::Command cmd) {
    tune::Envelope env;
    env.seq = ++w.seq;
    env.sender = w.name;
    env.command = std::move(cmd);
    SendFrame(w, tune::EncodeEnvelope(env));
  }
  void SendFrame(SimWorker& w, const std::string& frame) {
    if (!w.sock->send(zmq::buffer(frame), zmq::send_flags::dontwait)) stats.send_failures++;
    w.last_sent = Now();
  }
  void RequestWork(SimWorker& w) {
    w.outstanding = true;
    Send(w, tune::RequestWork{0});
    w.request_sent = w.last_sent;
  }

  // Returns true when it sent something.
  bool Timers(SimWorker& w, double now) {
    if (!w.greeted) return false;
    bool sent = false;
    if (w.running && !w.answer_queued && now >= w.running_until) QueueAnswer(w);
    if (!w.running && !w.outstanding && now >= w.next_request) {
      RequestWork(w);
      sent = true;
    }
    if (now - w.last_sent >= w.hb_interval) {
      Send(w, tune::Heartbeat{});
      stats.heartbeats_out++;
      sent = true;
    }
    return sent;
  }

  // Handles every queued message; returns how many there were.
  int Drain(SimWorker& w) {
    zmq::message_t msg;
    int handled = 0;
    while (w.sock->recv(msg, zmq::recv_flags::dontwait)) {
      ++handled;
      const double now = Now();
      auto env = tune::DecodeEnvelope(msg.data(), msg.size());
      if (!env.ok()) continue;
      std::visit(
          [&](auto& cmd) {
            using T = std::decay_t<decltype(cmd)>;
            if constexpr (std::is_same_v<T, tune::HelloAck>) {
              if (!w.greeted) sh_->greeted.fetch_add(1);
              w.greeted = true;
              w.hb_interval = cmd.heartbeat_ms / 1000.0;
              RequestWork(w);
            } else if constexpr (std::is_same_v<T, tune::NoWork>) {
              if (w.outstanding) {
                std::lock_guard<std::mutex> lock(nowork_mu_);
                stats.nowork_us.push_back((now - w.request_sent) * 1e6);
              }
              w.outstanding = false;
              w.next_request = now + cmd.retry_ms / 1000.0 * jitter_(rng_);  // as worker.cc does
              stats.nowork++;
            } else if constexpr (std::is_same_v<T, tune::WorkUnit>) {
              if (w.outstanding) {
                stats.lease_us.push_back((now - w.request_sent) * 1e6);
                stats.lease_at.push_back(now);
              }
              w.outstanding = false;
              w.running = std::move(cmd);
              if (sh_->opts->unit_s > 0) {
                w.running_until = now + sh_->opts->unit_s * jitter_(rng_);
              } else {
                QueueAnswer(w);
              }
            } else if constexpr (std::is_same_v<T, tune::ResultsAck>) {
              for (size_t i = 0; i < w.pending.size(); ++i) {
                if (w.pending[i].unit == cmd.unit_id && w.pending[i].batch == cmd.batch) {
                  stats.ack_us.push_back((now - w.pending[i].sent) * 1e6);
                  w.pending[i] = w.pending.back();
                  w.pending.pop_back();
                  break;
                }
              }
              stats.stored += cmd.stored;
              sh_->batches_acked.fetch_add(1, std::memory_order_relaxed);
              sh_->acked_stored.fetch_add(cmd.stored, std::memory_order_relaxed);
            } else if constexpr (std::is_same_v<T, tune::Heartbeat>) {
              stats.heartbeats_in++;
            } else if constexpr (std::is_same_v<T, tune::Disconnect>) {
              // Say hello again at once, as worker.cc does.
              stats.disconnects++;
              w.greeted = false;
              w.outstanding = false;
              sh_->greeted.fetch_sub(1);
              Send(w, tune::Hello{w.name, TUNEFARM_VERSION, {device_}});
            }
          },
          env->command);
    }
    return handled;
  }

  void QueueAnswer(SimWorker& w) {
    w.answer_queued = true;
    due_.push_back(static_cast<size_t>(&w - workers_.data()));
  }

  // Deterministic, plausible figures: a function of (config, shape) only, so
  // a duplicated lease reports the same row.
  static double MedianUs(const std::string& config_id, const std::string& shape) {
    uint64_t h = 1469598103934665603ull;
    for (char c : config_id) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    for (char c : shape) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return 5.0 + static_cast<double>(h % 100000) / 100.0;
  }

  void Answer(SimWorker& w, const tune::WorkUnit& unit) {
    const auto t0 = Clock::now();
    std::vector<std::string> shapes;
    shapes.reserve(unit.shapes.size());
    for (const auto& s : unit.shapes) shapes.push_back(s.Canonical());
    const size_t total = unit.configs.size() * shapes.size();
    const int64_t unix_now = std::time(nullptr);
    tune::Results r;
    r.sweep_id = unit.sweep_id;
    r.unit_id = unit.unit_id;
    r.measurements.reserve(sh_->opts->batch);
    size_t done = 0;
    uint64_t batch = 0;
    for (const auto& c : unit.configs) {
      const std::string id = c.Id();
      for (const auto& shape : shapes) {
        tune::Measurement m;
        m.gpu_model = device_.model;
        m.op = unit.op;
        m.dtype = unit.dtype;
        m.shape = shape;
        m.config = c;
        m.config_id = id;
        m.kernel_hash = sh_->kernel_hash;
        m.backend = "sim";
        m.device_name = device_.name;
        m.driver_version = device_.driver_version;
        m.nvrtc_version = device_.nvrtc_version;
        m.farm_version = TUNEFARM_VERSION;
        m.worker = w.name;
        m.unix_time = unix_now;
        m.median_us = MedianUs(id, shape);
        m.mean_us = m.median_us * 1.01;
        m.min_us = m.median_us * 0.98;
        m.max_us = m.median_us * 1.05;
        m.stdev_us = m.median_us * 0.01;
        m.ci95_us = m.median_us * 0.02;
        m.samples = 5;
        m.check_passed = true;
        r.measurements.push_back(std::move(m));
        ++done;
        if (r.measurements.size() >= sh_->opts->batch || done == total) {
          r.batch = batch++;
          r.final = done == total;
          const size_t n = r.measurements.size();
          tune::Envelope env;
          env.seq = ++w.seq;
          env.sender = w.name;
          env.command = std::move(r);
          const std::string frame = tune::EncodeEnvelope(env);
          r = std::move(std::get<tune::Results>(env.command));
          SendFrame(w, frame);
          w.pending.push_back({unit.unit_id, r.batch, w.last_sent});
          r.measurements.clear();
          stats.batches++;
          sh_->batches_sent.fetch_add(1, std::memory_order_relaxed);
          stats.rows += n;
          sh_->rows_sent.fetch_add(n, std::memory_order_relaxed);
        }
      }
    }
    if (total == 0) {  // an empty unit still completes with a final batch
      r.batch = batch;
      r.final = true;
      Send(w, r);
      w.pending.push_back({unit.unit_id, r.batch, w.last_sent});
      stats.batches++;
      sh_->batches_sent.fetch_add(1, std::memory_order_relaxed);
    }
    stats.units++;
    stats.encode_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  }

  Shared* sh_;
  int first_, count_;
  tune::DeviceInfo device_;
  std::vector<SimWorker> workers_;
  std::deque<size_t> due_;  // workers whose unit is "measured", in order
  // Unit durations and NoWork retries spread +-25% so that workers leased
  // (or turned away) together do not all report (or ask again) together.
  std::mt19937 rng_{static_cast<unsigned>(first_) + 1};
  std::uniform_real_distribution<double> jitter_{0.75, 1.25};
  std::mutex nowork_mu_;
};

// ---------------------------------------------------------------------------
// The client: submit and status, one request at a time.

class Client {
 public:
  Client(zmq::context_t& ctx, const std::string& endpoint) : sock_(ctx, zmq::socket_type::dealer) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.connect(endpoint);
  }
  std::optional<tune::Command> Call(tune::Command cmd, double timeout_s) {
    tune::Envelope env;
    env.seq = ++seq_;
    env.sender = "bench-client";
    env.command = std::move(cmd);
    const std::string frame = tune::EncodeEnvelope(env);
    // A reply to an earlier call that timed out must not pass for this one.
    zmq::message_t stale;
    while (sock_.recv(stale, zmq::recv_flags::dontwait)) {
    }
    sock_.send(zmq::buffer(frame), zmq::send_flags::dontwait);
    const double deadline = Now() + timeout_s;
    while (Now() < deadline) {
      zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t msg;
      while (sock_.recv(msg, zmq::recv_flags::dontwait)) {
        auto reply = tune::DecodeEnvelope(msg.data(), msg.size());
        if (!reply.ok()) continue;
        // The coordinator heartbeats only workers, but be tolerant.
        if (std::holds_alternative<tune::Heartbeat>(reply->command)) continue;
        return std::move(reply->command);
      }
    }
    return std::nullopt;
  }

 private:
  zmq::socket_t sock_;
  uint64_t seq_ = 0;
};

struct Percentiles {
  size_t n = 0;
  double p50 = 0, p99 = 0, max = 0, mean = 0;
};

Percentiles Summarise(std::vector<double> v) {
  Percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))]; };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  p.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / v.size();
  return p;
}

std::vector<std::string> Split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string tok;
  while (in >> tok) out.push_back(tok);
  return out;
}

int RaiseFdLimit(int workers) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  // Each DEALER holds a TCP socket and a mailbox eventfd here; the
  // coordinator (which inherits the limit) holds one TCP socket per worker.
  const rlim_t want = static_cast<rlim_t>(workers) * 3 + 256;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  return static_cast<int>(rl.rlim_cur);
}

// Default paths of the tunefarm binary and the op to sweep: $TUNEFARM_BIN;
// else those of a packed tree holding this program (scripts/pack.sh:
// libexec/bench_scale, bin/tunefarm, share/tunefarm/bench/ops/synthetic);
// else those of the build and source trees it was built from.
void SetDefaultPaths(Options* o) {
  std::error_code ec;
  const fs::path packed = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  if (!ec && fs::exists(packed / "bin" / "tunefarm")) {
    o->tunefarm = (packed / "bin" / "tunefarm").string();
    o->op_dir = (packed / "share" / "tunefarm" / "bench" / "ops" / "synthetic").string();
  } else {
#ifdef TUNEFARM_BINARY
    o->tunefarm = TUNEFARM_BINARY;
#endif
#ifdef TUNEFARM_SOURCE_DIR
    o->op_dir = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic";
#endif
  }
  if (const char* env = std::getenv("TUNEFARM_BIN"); env && *env) o->tunefarm = env;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  SetDefaultPaths(&o);
  CLI::App app{"tunefarm scale benchmark (simulated workers against a real coordinator)"};
  app.add_option("--tunefarm", o.tunefarm,
                 "Path of the tunefarm binary; default: $TUNEFARM_BIN, else bin/tunefarm of the "
                 "packed tree holding this program, else the build tree's")
      ->capture_default_str();
  app.add_option("--op-dir", o.op_dir, "Op folder to sweep (tests/data/ops/synthetic)")
      ->capture_default_str();
  app.add_option("--workers", o.workers, "Simulated workers (one DEALER socket each)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "Threads driving the worker sockets")->capture_default_str();
  app.add_option("--io-threads", o.io_threads, "ZeroMQ I/O threads on the benchmark side")
      ->capture_default_str();
  app.add_option("--shapes", o.shapes, "Shapes per sweep (N values)")->capture_default_str();
  app.add_option("--sweeps", o.sweeps, "Sweeps submitted at once, with disjoint shapes")
      ->capture_default_str();
  app.add_option("--configs-per-unit", o.configs_per_unit, "Configs per work unit")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "Measurements per Results message")->capture_default_str();
  app.add_option("--heartbeat-ms", o.heartbeat_ms, "Coordinator heartbeat interval")
      ->capture_default_str();
  app.add_option("--idle-seconds", o.idle_s,
                 "Seconds between all workers greeted and the submit (NoWork round trips)")
      ->capture_default_str();
  app.add_option("--unit-seconds", o.unit_s,
                 "Mean simulated time per unit (+-25%); 0 answers every unit at once")
      ->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "Give up after this many seconds")->capture_default_str();
  app.add_option("--coordinator-wrapper", o.coordinator_wrapper,
                 "Command prefix for the coordinator, e.g. \"valgrind --tool=callgrind\"");
  app.add_flag("--keep", o.keep, "Keep the temp dir (store, coordinator log)");
  CLI11_PARSE(app, argc, argv);
  if (o.tunefarm.empty() || o.op_dir.empty() || o.workers < 1 || o.threads < 1 || o.batch < 1) {
    std::fprintf(stderr, "bench_scale: need --tunefarm, --op-dir, workers/threads/batch >= 1\n");
    return 2;
  }
  o.threads = std::min(o.threads, o.workers);

  auto package = tune::ReadOpPackage(o.op_dir);
  if (!package.ok()) {
    std::fprintf(stderr, "bench_scale: %s\n", package.status().message().c_str());
    return 2;
  }
  auto spec = tune::ParseOpSpec(*package, o.op_dir);
  if (!spec.ok()) {
    std::fprintf(stderr, "bench_scale: %s\n", spec.status().message().c_str());
    return 2;
  }
  if (spec->dims.size() != 1) {
    std::fprintf(stderr, "bench_scale: the op must have one dim (synthetic has N)\n");
    return 2;
  }

  const int fd_limit = RaiseFdLimit(o.workers);
  char tmpl[] = "/tmp/tunefarm-scale-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 2;
  }
  const fs::path dir = tmpl;
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(FreePort());
  std::vector<std::string> cargv = Split(o.coordinator_wrapper);
  for (const std::string& a :
       {o.tunefarm, std::string("coordinator"), std::string("--bind"), endpoint,
        std::string("--store"), (dir / "store").string(), std::string("--heartbeat-ms"),
        std::to_string(o.heartbeat_ms)}) {
    cargv.push_back(a);
  }
  auto coordinator = std::make_unique<CoordinatorProcess>(cargv, (dir / "coordinator.log").string());

  zmq::context_t ctx(o.io_threads);
  ctx.set(zmq::ctxopt::max_sockets, o.workers + 64);

  int rc = 0;
  Client client(ctx, endpoint);
  const double t_start = Now();
  bool up = false;
  while (Now() - t_start < 120 && coordinator->Alive()) {
    if (client.Call(tune::SweepStatusRequest{}, 0.5)) {
      up = true;
      break;
    }
  }
  if (!up) {
    std::fprintf(stderr, "bench_scale: coordinator did not answer; log in %s\n", dir.c_str());
    return 1;
  }
  const double t_listening = Now();
  const pid_t measured_pid = InnermostChild(coordinator->pid());

  Shared shared;
  shared.opts = &o;
  shared.endpoint = endpoint;
  shared.kernel_hash = tune::KernelHash(*spec, "sim");
  shared.ctx = &ctx;
  std::vector<std::unique_ptr<WorkerThread>> wts;
  std::vector<std::thread> threads;
  const int per = o.workers / o.threads, extra = o.workers % o.threads;
  for (int t = 0, first = 0; t < o.threads; ++t) {
    const int count = per + (t < extra ? 1 : 0);
    wts.push_back(std::make_unique<WorkerThread>(&shared, first, count));
    first += count;
  }
  for (auto& wt : wts) threads.emplace_back([&wt] { wt->Run(); });

  while (shared.greeted.load() < o.workers && Now() - t_listening < 120) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double t_greeted = Now();
  const int greeted = shared.greeted.load();
  // What N connected, idle workers cost the coordinator: RequestWork ->
  // NoWork every retry_ms plus heartbeats both ways.
  const ProcSample idle_start = SampleProc(measured_pid);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_s));
  const ProcSample idle_end = SampleProc(measured_pid);
  const double idle_cores =
      idle_end.t > idle_start.t ? (idle_end.cpu_s - idle_start.cpu_s) / (idle_end.t - idle_start.t) : 0;
  // Round trips so far met an idle coordinator; keep them apart.
  std::vector<double> idle_nowork_us;
  for (auto& wt : wts) wt->TakeNoWorkSamples(&idle_nowork_us);

  // Submit the sweeps: disjoint N values, so every sweep's pairs are new rows.
  std::vector<std::string> sweep_ids;
  for (int s = 0; s < o.sweeps; ++s) {
    tune::SweepSubmit sub;
    sub.name = "scale-" + std::to_string(s);
    sub.ops = {spec->name};
    sub.op_packages = {*package};
    sub.dtypes = {"f32", "f16"};
    sub.gpu_models = {"*"};
    sub.configs_per_unit = o.configs_per_unit;
    for (int i = 0; i < o.shapes; ++i) {
      tune::Shape shape;
      shape.dims = {{spec->dims[0], 256 * static_cast<int64_t>(s * o.shapes + i + 1)}};
      sub.shapes.push_back(shape);
    }
    auto reply = client.Call(sub, 30);
    if (!reply || !std::holds_alternative<tune::SweepAccepted>(*reply)) {
      std::fprintf(stderr, "bench_scale: sweep not accepted%s\n",
                   reply && std::holds_alternative<tune::ErrorReply>(*reply)
                       ? (": " + std::get<tune::ErrorReply>(*reply).message).c_str()
                       : "");
      shared.stop = true;
      for (auto& t : threads) t.join();
      std::fprintf(stderr, "bench_scale: kept %s\n", dir.c_str());
      return 1;
    }
    sweep_ids.push_back(std::get<tune::SweepAccepted>(*reply).sweep_id);
  }
  const double t_submit = Now();

  // Poll status; sample acknowledged rows and the coordinator's /proc figures.
  struct Sample {
    double t;
    uint64_t stored;
    ProcSample proc;
  };
  std::vector<Sample> samples;
  samples.push_back({t_submit, shared.acked_stored.load(), SampleProc(measured_pid)});
  uint64_t pairs_total = 0, pairs_done = 0, pairs_failed = 0, units_total = 0;
  uint32_t coordinator_workers = 0;
  double t_done = 0;
  int status_failures = 0;
  while (Now() - t_submit < o.timeout_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto reply = client.Call(tune::SweepStatusRequest{}, 5);
    samples.push_back({Now(), shared.acked_stored.load(), SampleProc(measured_pid)});
    if (!reply || !std::holds_alternative<tune::SweepStatus>(*reply)) {
      if (++status_failures > 10 || !coordinator->Alive()) break;
      continue;
    }
    const auto& st = std::get<tune::SweepStatus>(*reply);
    coordinator_workers = st.workers;
    pairs_total = pairs_done = pairs_failed = units_total = 0;
    bool all_done = !st.sweeps.empty();
    for (const auto& p : st.sweeps) {
      pairs_total += p.pairs_total;
      pairs_done += p.pairs_done;
      pairs_failed += p.pairs_failed;
      units_total += p.units_total;
      if (p.state != "done") all_done = false;
    }
    if (all_done) {
      t_done = Now();
      break;
    }
  }
  // Let the last acks arrive (the status reply can overtake them, and
  // duplicate leases may still be answering).
  const double ack_deadline = Now() + 30;
  while (shared.batches_acked.load() < shared.batches_sent.load() && Now() < ack_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const ProcSample end = SampleProc(measured_pid);
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  shared.stop = true;
  for (auto& t : threads) t.join();
  const int coordinator_rc = coordinator->Stop(10);
  if (t_done == 0) {
    std::fprintf(stderr, "bench_scale: sweep not done after %.0f s (%" PRIu64 "/%" PRIu64
                 " pairs); log in %s\n",
                 o.timeout_s, pairs_done, pairs_total, dir.c_str());
    rc = 1;
  }

  // Steady state: from the sample where 10% of the pairs were acknowledged
  // to the one where 90% were, which leaves out connection ramp-up and the
  // tail where only a few units are still out.
  const uint64_t total_acked = shared.acked_stored.load();
  const Sample* s10 = nullptr;
  const Sample* s90 = nullptr;
  for (const auto& s : samples) {
    if (!s10 && s.stored >= pairs_total / 10) s10 = &s;
    if (!s90 && s.stored >= pairs_total * 9 / 10) s90 = &s;
  }
  double steady_rate = 0, steady_cpu = 0, steady_main_cpu = 0, steady_main_wait = 0;
  double steady_ingest_cpu = 0;
  std::map<std::string, double> steady_threads;
  if (s10 && s90 && s90->t > s10->t) {
    const double dt = s90->t - s10->t;
    steady_rate = (s90->stored - s10->stored) / dt;
    steady_cpu = (s90->proc.cpu_s - s10->proc.cpu_s) / dt;
    steady_main_cpu = (s90->proc.main_cpu_s - s10->proc.main_cpu_s) / dt;
    steady_ingest_cpu = (s90->proc.ingest_cpu_s - s10->proc.ingest_cpu_s) / dt;
    steady_main_wait = (s90->proc.main_wait_s - s10->proc.main_wait_s) / dt;
    for (const auto& [name, cpu] : s90->proc.cpu_by_thread_name) {
      auto it = s10->proc.cpu_by_thread_name.find(name);
      steady_threads[name] = (cpu - (it == s10->proc.cpu_by_thread_name.end() ? 0 : it->second)) / dt;
    }
  }
  const double run_s = (t_done ? t_done : Now()) - t_submit;
  const double whole_rate = run_s > 0 ? total_acked / run_s : 0;

  ThreadStats all;
  for (auto& wt : wts) {
    auto& s = wt->stats;
    all.lease_us.insert(all.lease_us.end(), s.lease_us.begin(), s.lease_us.end());
    all.lease_at.insert(all.lease_at.end(), s.lease_at.begin(), s.lease_at.end());
    all.nowork_us.insert(all.nowork_us.end(), s.nowork_us.begin(), s.nowork_us.end());
    all.ack_us.insert(all.ack_us.end(), s.ack_us.begin(), s.ack_us.end());
    all.units += s.units;
    all.batches += s.batches;
    all.rows += s.rows;
    all.stored += s.stored;
    all.nowork += s.nowork;
    all.heartbeats_in += s.heartbeats_in;
    all.heartbeats_out += s.heartbeats_out;
    all.disconnects += s.disconnects;
    all.send_failures += s.send_failures;
    all.encode_ns += s.encode_ns;
    all.sweep_catches += s.sweep_catches;
  }
  const Percentiles lease = Summarise(all.lease_us);
  // Leases in the steady window: without the burst at each submit, where
  // every idle worker asks at once and the last in line waits for all the
  // others' leases.
  std::vector<double> steady_lease_us;
  for (size_t i = 0; i < all.lease_us.size(); ++i) {
    if (s10 && s90 && all.lease_at[i] >= s10->t && all.lease_at[i] <= s90->t) steady_lease_us.push_back(all.lease_us[i]);
  }
  const Percentiles steady_lease = Summarise(steady_lease_us);
  const Percentiles nowork = Summarise(all.nowork_us);
  const Percentiles idle = Summarise(idle_nowork_us);
  const Percentiles ack = Summarise(all.ack_us);
  const double coord_cpu = end.cpu_s;
  const double bench_cpu = self.ru_utime.tv_sec + self.ru_utime.tv_usec / 1e6 +
                           self.ru_stime.tv_sec + self.ru_stime.tv_usec / 1e6;

  std::printf("tunefarm scale benchmark (sim workers; coordinator = %s)\n", o.tunefarm.c_str());
  std::printf("  workers %d (greeted %d in %.2f s, coordinator counts %u), threads %d, fd limit %d\n",
              o.workers, greeted, t_greeted - t_listening, coordinator_workers, o.threads, fd_limit);
  std::printf("  sweeps %d x (%zu dtypes x %d shapes), configs/unit %u, batch %zu -> %" PRIu64
              " units, %" PRIu64 " pairs\n",
              o.sweeps, static_cast<size_t>(2), o.shapes, o.configs_per_unit, o.batch, units_total,
              pairs_total);
  if (o.unit_s > 0) std::printf("  simulated unit time %.2f s +-25%%\n", o.unit_s);
  std::printf("  %-34s %s\n", "sweep state", t_done ? "done" : "NOT DONE");
  std::printf("  %-34s %.2f s\n", "submit -> done", run_s);
  std::printf("  %-34s %" PRIu64 " stored (%" PRIu64 " rows sent in %" PRIu64 " units, %" PRIu64
              " failed)\n",
              "results acknowledged", total_acked, all.rows, all.units, pairs_failed);
  std::printf("  %-34s %.0f /s\n", "ingest, steady (10%..90%)", steady_rate);
  std::printf("  %-34s %.0f /s\n", "ingest, whole run", whole_rate);
  // What the ingesting thread would store with a core to itself: on this
  // shared machine it often gets less, so this is the figure to compare runs by.
  const double per_ingest_cpu = steady_ingest_cpu > 0 ? steady_rate / steady_ingest_cpu : 0;
  std::printf("  %-34s %.0f /s\n",
              end.has_ingest_thread ? "ingest per ingest-thread CPU second"
                                    : "ingest per poll-loop CPU second",
              per_ingest_cpu);
  std::printf("  %-34s p50 %.0f  p99 %.0f  max %.0f us  (n=%zu)\n", "lease latency (WorkUnit)",
              lease.p50, lease.p99, lease.max, lease.n);
  std::printf("  %-34s p50 %.0f  p99 %.0f  max %.0f us  (n=%zu)\n", "lease latency, steady (10%..90%)",
              steady_lease.p50, steady_lease.p99, steady_lease.max, steady_lease.n);
  std::printf("  %-34s p50 %.0f  p99 %.0f  max %.0f us  (n=%zu)\n", "NoWork latency, idle",
              idle.p50, idle.p99, idle.max, idle.n);
  std::printf("  %-34s p50 %.0f  p99 %.0f  max %.0f us  (n=%zu)\n", "NoWork latency, during sweep",
              nowork.p50, nowork.p99, nowork.max, nowork.n);
  std::printf("  %-34s p50 %.0f  p99 %.0f  max %.0f us  (n=%zu)\n", "ResultsAck latency", ack.p50,
              ack.p99, ack.max, ack.n);
  std::printf("  %-34s %.2f cores (%.0f s sample)\n", "coordinator CPU, idle workers", idle_cores,
              o.idle_s);
  std::printf("  %-34s %.1f MiB (VmRSS at end %.1f MiB)\n", "coordinator peak RSS (VmHWM)",
              end.vm_hwm_kb / 1024.0, end.vm_rss_kb / 1024.0);
  std::printf("  %-34s %.2f s total; steady %.2f cores\n", "coordinator CPU", coord_cpu,
              steady_cpu);
  // on-CPU + waiting-for-a-CPU near 1.0 means the loop never blocked in poll:
  // it is CPU-bound, and the waiting part is what other processes took.
  std::printf("  %-34s %.2f on CPU + %.2f runnable, waiting for a CPU\n",
              "coordinator poll loop, steady", steady_main_cpu, steady_main_wait);
  for (const auto& [name, cores] : steady_threads) {
    if (cores >= 0.005) std::printf("  %-34s %.2f cores\n", ("  thread " + name).c_str(), cores);
  }
  std::printf("  %-34s %.2f s (building Results: %.2f s wall)\n", "benchmark CPU (simulated workers)",
              bench_cpu, all.encode_ns / 1e9);
  std::printf("  %-34s in %" PRIu64 ", out %" PRIu64 "; disconnects %" PRIu64
              ", send failures %" PRIu64 ", caught by sweep %" PRIu64 "\n",
              "heartbeats", all.heartbeats_in, all.heartbeats_out, all.disconnects,
              all.send_failures, all.sweep_catches);
  std::printf("  %-34s %d\n", "coordinator exit", coordinator_rc);

  nlohmann::json j = {
      {"workers", o.workers}, {"greeted", greeted}, {"threads", o.threads},
      {"sweeps", o.sweeps}, {"shapes", o.shapes}, {"configs_per_unit", o.configs_per_unit},
      {"batch", o.batch}, {"unit_seconds", o.unit_s}, {"units", units_total}, {"pairs_total", pairs_total},
      {"done", t_done != 0}, {"run_s", run_s}, {"stored", total_acked},
      {"ingest_steady_per_s", steady_rate}, {"ingest_whole_per_s", whole_rate},
      {"ingest_per_ingest_cpu_s", per_ingest_cpu},
      {"lease_us", {{"p50", lease.p50}, {"p99", lease.p99}, {"max", lease.max}, {"n", lease.n}}},
      {"lease_steady_us",
       {{"p50", steady_lease.p50}, {"p99", steady_lease.p99}, {"max", steady_lease.max}, {"n", steady_lease.n}}},
      {"nowork_us", {{"p50", nowork.p50}, {"p99", nowork.p99}, {"max", nowork.max}}},
      {"idle_nowork_us", {{"p50", idle.p50}, {"p99", idle.p99}, {"max", idle.max}, {"n", idle.n}}},
      {"ack_us", {{"p50", ack.p50}, {"p99", ack.p99}, {"max", ack.max}, {"n", ack.n}}},
      {"coordinator_vmhwm_kb", end.vm_hwm_kb}, {"coordinator_idle_cores", idle_cores}, {"coordinator_cpu_s", coord_cpu},
      {"coordinator_steady_cores", steady_cpu}, {"coordinator_loop_steady_cores", steady_main_cpu},
      {"coordinator_loop_steady_wait_cores", steady_main_wait}, {"rows_sent", all.rows},
      {"leases", all.units},
      {"bench_cpu_s", bench_cpu}, {"disconnects", all.disconnects},
      {"connect_s", t_greeted - t_listening}};
  std::printf("JSON %s\n", j.dump().c_str());

  if (o.keep || rc != 0) {
    std::fprintf(stderr, "bench_scale: kept %s\n", dir.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  if (greeted < o.workers) rc = 1;
  return rc;
}
