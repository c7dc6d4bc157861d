#include "local_farm.h"

#include <cstdio>

#include "coordinator_client.h"

namespace tune {

Result<std::unique_ptr<LocalFarm>> LocalFarm::Start(const LocalFarmOptions& opts) {
  std::unique_ptr<LocalFarm> farm(new LocalFarm());
  // Workers first: their backend decides what the farm measures.
  WorkerOptions wopts = opts.worker;
  auto first = std::make_unique<Worker>(wopts);
  Status st = first->Start();
  // No silent simulation: without a GPU, auto fails (the worker's line
  // says how to ask for sim).
  if (!st.ok()) return st;
  farm->simulated_ = first->devices().front().backend == "sim";
  farm->workers_.push_back(std::move(first));
  for (unsigned i = 1; farm->simulated_ && i < opts.sim_workers; ++i) {
    WorkerOptions o = wopts;
    o.name = wopts.name.empty() ? "" : wopts.name + "-" + std::to_string(i);
    farm->workers_.push_back(std::make_unique<Worker>(o));
    TUNE_RETURN_IF_ERROR(farm->workers_.back()->Start());
  }
  for (const auto& d : farm->devices()) {
    std::fprintf(stderr, "tunefarm: device %d %s (%s)%s\n", d.index, d.name.c_str(), d.model.c_str(),
                 d.backend == "sim" ? " [SIMULATED]" : "");
  }
  CoordinatorOptions copts;
  copts.endpoint = "tcp://127.0.0.1:*";
  copts.store_path = opts.store;
  copts.scheduler.refine_within = opts.worker.timing.refine_within;
  farm->coordinator_ = std::make_unique<Coordinator>(copts);
  TUNE_RETURN_IF_ERROR(farm->coordinator_->Start());
  return farm;
}

LocalFarm::~LocalFarm() { Stop(); }

Result<SweepProgress> LocalFarm::Run(const SweepSubmit& sweep, const WaitFn& wait) {
  const std::string endpoint = coordinator_->bound_endpoint();
  threads_.emplace_back([this] { (void)coordinator_->Run(&stop_); });
  CoordinatorClient client(endpoint);
  auto reply = client.Call(sweep);
  StartWorkers(endpoint);
  if (!reply.ok()) return reply.status();
  const auto* accepted = std::get_if<SweepAccepted>(&*reply);
  if (!accepted) {
    const auto* error = std::get_if<ErrorReply>(&*reply);
    return Status::Error(error ? error->message : "coordinator sent an unexpected reply");
  }
  return wait(endpoint, accepted->sweep_id);
}

void LocalFarm::Serve() {
  threads_.emplace_back([this] { (void)coordinator_->Run(&stop_); });
  StartWorkers(endpoint());
}

void LocalFarm::StartWorkers(const std::string& endpoint) {
  for (auto& w : workers_) {
    w->set_endpoint(endpoint);
    threads_.emplace_back([this, worker = w.get()] { (void)worker->Run(&stop_); });
  }
}

void LocalFarm::Stop() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
}

std::vector<DeviceInfo> LocalFarm::devices() const {
  std::vector<DeviceInfo> out;
  for (const auto& w : workers_) {
    for (const auto& d : w->devices()) out.push_back(d);
  }
  return out;
}

std::set<std::string> LocalFarm::models() const {
  std::set<std::string> out;
  for (const auto& d : devices()) out.insert(d.model);
  return out;
}

WorkerStats LocalFarm::stats() const {
  WorkerStats total;
  for (const auto& w : workers_) total += w->stats();
  return total;
}

}  // namespace tune
