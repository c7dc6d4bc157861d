#include "measure/program/program_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

extern char** environ;

namespace tune::program {
namespace {

constexpr size_t kMaxLineBytes = size_t(4) << 20;
constexpr size_t kStderrTailBytes = 16 << 10;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int MillisUntil(double deadline) {
  const double left = deadline - Now();
  if (left <= 0) return 0;
  return static_cast<int>(std::min(left * 1000.0 + 1, 1e9));
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// Reaps `pid` within a second, else on a thread of its own: a process killed
// inside a CUDA call can take a while to leave the driver.
std::string Reap(pid_t pid, bool* clean) {
  int status = 0;
  for (int i = 0; i < 100; ++i) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (clean) *clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      return Describe(status);
    }
    if (r < 0 && errno != EINTR) return "not reaped: " + std::string(std::strerror(errno));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::thread([pid] {
    int s = 0;
    while (waitpid(pid, &s, 0) < 0 && errno == EINTR) {
    }
  }).detach();
  return "killed; still leaving the driver";
}

}  // namespace

ProgramProcess::~ProgramProcess() {
  if (pid_ > 0) Kill();
  CloseFds();
}

void ProgramProcess::CloseFds() {
  for (int* fd : {&in_, &out_, &err_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

Status ProgramProcess::Start(const std::string& command, const std::string& cwd,
                             const std::vector<std::string>& env, bool keep_stdin) {
  if (pid_ > 0) return Status::Error("program already running");
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
      if (fd >= 0) close(fd);
  };
  if ((keep_stdin && pipe2(in, O_CLOEXEC) != 0) || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    return Status::Error(std::string("pipe: ") + std::strerror(e));
  }
  // The environment: the worker's, then the program's variables over it.
  std::map<std::string, std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    vars[kv.substr(0, kv.find('='))] = kv;
  }
  for (const std::string& kv : env) vars[kv.substr(0, kv.find('='))] = kv;
  std::vector<char*> envp;
  for (auto& [name, kv] : vars) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  if (keep_stdin) posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  else posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
  // Sockets, database files and pipes of the worker stay out of the program.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  // Its own session, so that a kill reaches everything it started; signals
  // as a shell would have them (the worker ignores SIGPIPE).
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, sig);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    close_all();
    return Status::Error("cannot start /bin/sh in " + cwd + ": " + std::strerror(rc));
  }
  for (int fd : {in[0], out[1], err[1]})
    if (fd >= 0) close(fd);
  pid_ = pid;
  in_ = in[1];
  out_ = out[0];
  err_ = err[0];
  fcntl(out_, F_SETFL, O_NONBLOCK);
  fcntl(err_, F_SETFL, O_NONBLOCK);
  if (in_ >= 0) fcntl(in_, F_SETFL, O_NONBLOCK);
  out_buf_.clear();
  stderr_tail_.clear();
  return Status::OK();
}

void ProgramProcess::DrainStderr() {
  if (err_ < 0) return;
  char buf[8192];
  // Bounded per call: a program that floods stderr must not keep the reader
  // from its deadline.
  for (int reads = 0; reads < 32; ++reads) {
    const ssize_t n = read(err_, buf, sizeof buf);
    if (n > 0) {
      stderr_tail_.append(buf, size_t(n));
      if (stderr_tail_.size() > 2 * kStderrTailBytes)
        stderr_tail_.erase(0, stderr_tail_.size() - kStderrTailBytes);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      close(err_);
      err_ = -1;
    }
    return;
  }
}

Status ProgramProcess::WriteLine(const std::string& line, double timeout_seconds) {
  if (in_ < 0) return Status::Error("the program's stdin is closed");
  const std::string data = line + "\n";
  const double deadline = Now() + timeout_seconds;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(in_, data.data() + done, data.size() - done);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      // A program that does not read its stdin would fill the pipe; its
      // stderr is drained meanwhile so that it cannot block on that either.
      pollfd p[2] = {{in_, POLLOUT, 0}, {err_, POLLIN, 0}};
      const int ms = MillisUntil(deadline);
      if (ms == 0) return Status::Error("the program does not read its stdin");
      if (poll(p, err_ >= 0 ? 2 : 1, ms) < 0 && errno != EINTR) return Status::Error(std::strerror(errno));
      DrainStderr();
      continue;
    }
    return Status::Error(std::string("write to the program: ") + std::strerror(errno));
  }
  return Status::OK();
}

ProgramProcess::ReadOutcome ProgramProcess::ReadLine(double deadline, std::string* line) {
  for (;;) {
    // The deadline holds even for a program that never stops printing.
    if (Now() >= deadline) {
      DrainStderr();
      return ReadOutcome::kTimeout;
    }
    const size_t nl = out_buf_.find('\n');
    if (skipping_ && nl == std::string::npos) {
      out_buf_.clear();  // the rest of a line that was cut: not a line of its own
    } else if (skipping_) {
      out_buf_.erase(0, nl + 1);
      skipping_ = false;
      continue;
    } else if (nl != std::string::npos || out_buf_.size() >= kMaxLineBytes) {
      const size_t end = std::min(nl, kMaxLineBytes);
      *line = out_buf_.substr(0, end);
      out_buf_.erase(0, nl == std::string::npos ? end : nl + 1);
      skipping_ = nl == std::string::npos;
      return ReadOutcome::kLine;
    }
    if (out_ < 0) {
      if (out_buf_.empty()) return ReadOutcome::kClosed;
      *line = std::move(out_buf_);
      out_buf_.clear();
      return ReadOutcome::kLine;
    }
    char buf[65536];
    const ssize_t n = read(out_, buf, sizeof buf);
    if (n > 0) {
      out_buf_.append(buf, size_t(n));
      continue;
    }
    if (n == 0) {
      close(out_);
      out_ = -1;
      DrainStderr();
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      close(out_);
      out_ = -1;
      continue;
    }
    pollfd p[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    const int ms = MillisUntil(deadline);
    if (ms == 0) {
      DrainStderr();
      return ReadOutcome::kTimeout;
    }
    if (poll(p, err_ >= 0 ? 2 : 1, ms) < 0 && errno != EINTR) {
      close(out_);
      out_ = -1;
    }
    DrainStderr();
  }
}

std::string ProgramProcess::Finish(double deadline, bool* clean) {
  *clean = false;
  if (pid_ <= 0) return "not running";
  // Seen without reaping (the pid stays ours), so that the group's leftovers
  // can be killed before the pid is given back.
  for (;;) {
    siginfo_t info{};
    const int r = waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid_) break;
    if (r < 0 && errno == ECHILD) {
      // Reaped elsewhere (SIGCHLD ignored): its group id may be another's now.
      pid_ = -1;
      CloseFds();
      return "ended (reaped elsewhere)";
    }
    if (r < 0 && errno != EINTR) break;
    if (Now() >= deadline) return Kill();
    DrainStderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(-pid_, SIGKILL);
  DrainStderr();
  const std::string how = Reap(pid_, clean);
  pid_ = -1;
  CloseFds();
  return how;
}

bool ProgramProcess::Exited() const {
  if (pid_ <= 0) return true;
  siginfo_t info{};
  const int r = waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  return (r == 0 && info.si_pid == pid_) || (r < 0 && errno == ECHILD);
}

std::string ProgramProcess::Kill() {
  if (pid_ <= 0) return "not running";
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  DrainStderr();
  const std::string how = Reap(pid_, nullptr);
  pid_ = -1;
  CloseFds();
  return how;
}

}  // namespace tune::program
