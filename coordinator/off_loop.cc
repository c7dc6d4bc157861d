#include "off_loop.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace tune {

WakeFd::~WakeFd() {
  if (fd_ >= 0) close(fd_);
}

Status WakeFd::Open(const std::string& who) {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) return Status::Error(who + ": eventfd: " + std::strerror(errno));
  return Status::OK();
}

void WakeFd::Notify() {
  const uint64_t one = 1;
  (void)!write(fd_, &one, sizeof one);
}

void WakeFd::Drain() {
  uint64_t wakeups;
  (void)!read(fd_, &wakeups, sizeof wakeups);
}

OffLoop::OffLoop(std::string name) : name_(std::move(name)) {}

OffLoop::~OffLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status OffLoop::Start() {
  TUNE_RETURN_IF_ERROR(wake_.Open(name_));
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), name_.substr(0, 15).c_str());  // 15 bytes at most
  return Status::OK();
}

void OffLoop::Post(Work work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void OffLoop::RunCompletions() {
  wake_.Drain();
  std::vector<Completion> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(done_);
  }
  for (auto& c : done) {
    if (c) c();
  }
}

void OffLoop::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !work_.empty(); });
    if (stop_) return;
    Work work = std::move(work_.front());
    work_.pop_front();
    lock.unlock();
    Completion done = work();
    lock.lock();
    done_.push_back(std::move(done));
    wake_.Notify();
  }
}

}  // namespace tune
