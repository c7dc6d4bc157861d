#include "ingester.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tune {
Result<std::vector<Measurement>> RowsToStore(const IngestJob& job, const Results& results) {
  const bool unit_known = !job.unit_op.empty();
  std::vector<Measurement> rows;
  rows.reserve(results.measurements.size());
  for (const auto& m : results.measurements) {
    if (!job.gpu_models.count(m.gpu_model)) {
      return Status::Error("results for GPU model '" + m.gpu_model +
                           "' that this worker does not have");
    }
    if (unit_known && (m.op != job.unit_op || m.dtype != job.unit_dtype)) {
      return Status::Error("results for " + m.op + "/" + m.dtype + " in a unit of " + job.unit_op +
                           "/" + job.unit_dtype);
    }
    rows.push_back(m);
    rows.back().sweep_id = results.sweep_id;
    rows.back().worker = job.worker;
    rows.back().confirmed = m.confirmed && job.unit_confirms;
    rows.back().refined = m.refined && job.unit_refines;
  }
  return rows;
}

Ingester::Ingester(ResultStore* store) : store_(store) {}

Ingester::~Ingester() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status Ingester::Start() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return Status::Error(std::string("ingester: eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "ingest");  // for top and /proc
  return Status::OK();
}

void Ingester::Submit(IngestJob job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_bytes_ += job.frame.size();
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

std::vector<IngestOutcome> Ingester::TakeOutcomes() {
  uint64_t wakeups;
  // Reset before taking: an outcome posted in between wakes the loop again.
  (void)!read(wake_fd_, &wakeups, sizeof wakeups);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<IngestOutcome> out;
  out.swap(outcomes_);
  return out;
}

size_t Ingester::queued_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_;
}

void Ingester::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    IngestJob job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    IngestOutcome outcome = Store(job);
    lock.lock();
    queued_bytes_ -= job.frame.size();
    outcomes_.push_back(std::move(outcome));
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }
}

IngestOutcome Ingester::Store(const IngestJob& job) {
  IngestOutcome out;
  out.identity = job.identity;
  out.head = job.head;
  auto reject = [&](const std::string& why) {
    out.kind = IngestOutcome::Kind::kRejected;
    out.error = why;
    return out;
  };
  auto env = DecodeEnvelope(job.frame.data(), job.frame.size());
  if (!env.ok()) return reject("malformed message: " + env.status().message());
  auto* results = std::get_if<Results>(&env->command);
  if (!results) return reject("expected results");
  auto rows = RowsToStore(job, *results);
  if (!rows.ok()) return reject(rows.status().message());
  out.rows = rows->size();
  Status st = store_->PutBatch(*rows, &out.stored);
  if (!st.ok()) {
    out.kind = IngestOutcome::Kind::kStoreFailed;
    out.error = st.message();
    return out;
  }
  // The failure count is exact only when every row is new; a batch with
  // duplicates counts none rather than guess which rows were new.
  if (out.stored == out.rows) {
    for (const auto& m : *rows) out.failed += m.Valid() ? 0 : 1;
  }
  return out;
}

}  // namespace tune
