// Off the coordinator's loop: the wake-up descriptor that a helper thread
// uses to tell the loop that it has something to hand back (WakeFd), and a
// helper thread for work the loop must never wait for (OffLoop).
//
// Thread safety: WakeFd::Notify from any thread, Drain from the loop's.
// OffLoop::Post and RunCompletions from the loop's thread only.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tune/status.h"

namespace tune {

// An eventfd: readable while a notification waits. Drain before taking what
// was posted, so a post in between wakes the loop again.
class WakeFd {
 public:
  WakeFd() = default;
  ~WakeFd();
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;

  // `who` names the owner in the error.
  Status Open(const std::string& who);
  void Notify();
  void Drain();
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// One thread that runs posted work in order. Each piece of work returns a
// completion, which the loop runs on its own thread (RunCompletions, when
// wake_fd() is readable): the work computes, the completion applies.
class OffLoop {
 public:
  using Completion = std::function<void()>;
  using Work = std::function<Completion()>;

  // `name` names the thread (top, /proc) and the owner in errors.
  explicit OffLoop(std::string name);
  // Finishes the work in hand; drops the queued work and the completions
  // not yet run.
  ~OffLoop();
  OffLoop(const OffLoop&) = delete;
  OffLoop& operator=(const OffLoop&) = delete;

  Status Start();
  void Post(Work work);
  // Runs the completions posted since the last call, in posting order.
  void RunCompletions();
  int wake_fd() const { return wake_.fd(); }

 private:
  void Loop();

  std::string name_;
  WakeFd wake_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> work_;
  std::vector<Completion> done_;
  bool stop_ = false;
};

}  // namespace tune
