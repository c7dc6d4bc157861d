// The backend's handle on one runner process: fork+exec, framed I/O with
// deadlines, kill and reap. Knows nothing about CUDA.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "tune/status.h"

namespace tune::runner {

class RunnerProcess {
 public:
  // argv = {exe, args...}; nothing runs until Start().
  RunnerProcess(std::string exe, std::vector<std::string> args);
  // Closes the channel (the runner exits on EOF), then kills what is left.
  ~RunnerProcess();
  RunnerProcess(const RunnerProcess&) = delete;
  RunnerProcess& operator=(const RunnerProcess&) = delete;

  // Starts the process with a socket pair as its stdin and stdout. Error when
  // fork or the socket pair fails (an exec failure shows up as exit code 127
  // at the first read).
  Status Start();
  pid_t pid() const { return pid_; }
  // How long the destructor waits for the process to exit after closing its
  // channel before it kills it (2 s; a profiler writing its report needs
  // more).
  void set_exit_wait_seconds(double s) { exit_wait_seconds_ = s; }
  bool started() const { return pid_ > 0; }

  Status Send(const std::string& payload);

  enum class ReadOutcome { kFrame, kTimeout, kClosed };
  // Waits up to `timeout_seconds` for one whole frame. kClosed covers EOF and
  // any channel error; `why` says which.
  ReadOutcome Read(double timeout_seconds, std::string* frame, std::string* why);

  // SIGKILL and reap; returns how the process ended.
  std::string Kill();
  // After kClosed: waits (bounded) for the process to end; returns how it
  // ended, e.g. "killed by signal 11 (Segmentation fault)". Kills it if it
  // lingers.
  std::string Reap();

 private:
  void CloseChannel();
  // Non-blocking reap of processes that would not die in time earlier.
  void ReapStragglers();
  std::string WaitFor(double seconds, bool* done);

  std::string exe_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
  double exit_wait_seconds_ = 2.0;
  int fd_ = -1;
  std::string inbox_;                 // bytes read but not yet framed
  std::vector<pid_t> stragglers_;
};

// "exit code 3 (sticky CUDA error)" / "killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int status);

}  // namespace tune::runner
