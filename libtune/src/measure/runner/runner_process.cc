#include "measure/runner/runner_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "measure/runner/runner_protocol.h"

namespace tune::runner {
namespace {

// Only async-signal-safe calls between fork and exec: the worker has threads.
[[noreturn]] void ExecChild(int sock, const char* exe, char* const* argv, long max_fd) {
  int s = fcntl(sock, F_DUPFD, 3);  // never 0/1, so the dup2s below always act
  if (s < 0 || dup2(s, STDIN_FILENO) < 0 || dup2(s, STDOUT_FILENO) < 0) _exit(126);
  // Sockets, database files and pipes of the worker stay out of the runner.
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
#endif
  {
    for (long fd = 3; fd < max_fd; ++fd) close(int(fd));
  }
  execv(exe, argv);
  static const char kMsg[] = "tunefarm: exec of the runner failed\n";
  ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  (void)ignored;
  _exit(127);
}

}  // namespace

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    std::string s = "exit code " + std::to_string(code);
    switch (code) {
      case 0: return s + " (clean exit)";
      case 2: return s + " (runner could not start or lost the protocol)";
      case 3: return s + " (sticky CUDA error)";
      case 4: return s + " (orphaned)";
      case 126:
      case 127: return s + " (exec of the runner failed)";
      default: return s;
    }
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

RunnerProcess::RunnerProcess(std::string exe, std::vector<std::string> args)
    : exe_(std::move(exe)), args_(std::move(args)) {}

RunnerProcess::~RunnerProcess() {
  if (pid_ > 0) {
    CloseChannel();
    bool done = false;
    WaitFor(exit_wait_seconds_, &done);
    if (!done) Kill();
  }
  CloseChannel();
  ReapStragglers();
  // Killed runners still tearing down a context: reap them whenever they go,
  // so that they do not stay zombies for the worker's lifetime.
  for (pid_t pid : stragglers_) {
    std::thread([pid] {
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }).detach();
  }
}

Status RunnerProcess::Start() {
  ReapStragglers();
  if (pid_ > 0) return Status::Error("runner already started");
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::Error(std::string("socketpair: ") + std::strerror(errno));
  std::vector<char*> argv;
  argv.push_back(exe_.data());
  for (auto& a : args_) argv.push_back(a.data());
  argv.push_back(nullptr);
  long max_fd = sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(sv[0]);
    close(sv[1]);
    return Status::Error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) ExecChild(sv[1], exe_.c_str(), argv.data(), max_fd);
  close(sv[1]);
  pid_ = pid;
  fd_ = sv[0];
  inbox_.clear();
  return Status::OK();
}

Status RunnerProcess::Send(const std::string& payload) {
  if (fd_ < 0) return Status::Error("runner not running");
  return WriteFrame(fd_, payload);
}

RunnerProcess::ReadOutcome RunnerProcess::Read(double timeout_seconds, std::string* frame, std::string* why) {
  if (fd_ < 0) {
    *why = "runner not running";
    return ReadOutcome::kClosed;
  }
  const double deadline = NowSeconds() + std::max(0.0, timeout_seconds);
  for (;;) {
    if (inbox_.size() >= 4) {
      uint32_t n;
      std::memcpy(&n, inbox_.data(), 4);
      if (n == 0 || n > kMaxFrameBytes) {
        *why = "runner sent a frame of bad length " + std::to_string(n);
        return ReadOutcome::kClosed;
      }
      if (inbox_.size() >= 4 + size_t(n)) {
        *frame = inbox_.substr(4, n);
        inbox_.erase(0, 4 + size_t(n));
        return ReadOutcome::kFrame;
      }
    }
    // Whole milliseconds left, rounded down as a deadline must be.
    const long long left = static_cast<long long>(std::min((deadline - NowSeconds()) * 1e3, double(1 << 30)));
    if (left <= 0) return ReadOutcome::kTimeout;
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, int(std::min<long long>(left, 1 << 30)));
    if (r < 0) {
      if (errno == EINTR) continue;
      *why = std::string("poll: ") + std::strerror(errno);
      return ReadOutcome::kClosed;
    }
    if (r == 0) continue;  // the deadline check above decides
    char buf[1 << 16];
    ssize_t k = read(fd_, buf, sizeof(buf));
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *why = std::string("read: ") + std::strerror(errno);
      return ReadOutcome::kClosed;
    }
    if (k == 0) {
      *why = inbox_.empty() ? "runner closed its channel" : "runner closed its channel mid-frame";
      return ReadOutcome::kClosed;
    }
    inbox_.append(buf, size_t(k));
  }
}

void RunnerProcess::CloseChannel() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  inbox_.clear();
}

std::string RunnerProcess::WaitFor(double seconds, bool* done) {
  *done = false;
  const double deadline = NowSeconds() + seconds;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      *done = true;
      pid_ = -1;
      return r > 0 ? DescribeWaitStatus(status) : "already reaped";
    }
    if (NowSeconds() >= deadline) return "still running";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string RunnerProcess::Kill() {
  CloseChannel();
  if (pid_ <= 0) return "not running";
  pid_t pid = pid_;
  kill(pid, SIGKILL);
  bool done = false;
  // A process killed in the middle of a kernel lingers while the driver tears
  // its context down; do not let one stuck teardown stall the worker forever.
  std::string how = WaitFor(30.0, &done);
  if (!done) {
    stragglers_.push_back(pid);
    pid_ = -1;
    return "killed; not yet reaped";
  }
  return how;
}

std::string RunnerProcess::Reap() {
  CloseChannel();
  if (pid_ <= 0) return "not running";
  bool done = false;
  std::string how = WaitFor(5.0, &done);
  if (done) return how;
  return "closed its channel but did not exit; " + Kill();
}

void RunnerProcess::ReapStragglers() {
  for (auto it = stragglers_.begin(); it != stragglers_.end();) {
    int status = 0;
    pid_t r = waitpid(*it, &status, WNOHANG);
    if (r == *it || (r < 0 && errno == ECHILD)) {
      it = stragglers_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace tune::runner
