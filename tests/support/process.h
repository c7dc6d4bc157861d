// Child processes for multi-process tests: real `tunefarm` binaries on
// loopback, started, signalled and reaped by the test.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tune::testing {

class Child {
 public:
  // Starts `argv` with stdout/stderr appended to `log_path` ("" = inherit).
  Child(std::vector<std::string> argv, const std::string& log_path = "") {
    pid_ = fork();
    if (pid_ == 0) {
      if (!log_path.empty()) {
        int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig) { if (!reaped_) kill(pid_, sig); }
  // Waits up to `seconds`; returns the exit code, 128+signal, or -1 on timeout.
  int Wait(double seconds) {
    if (reaped_) return exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  // SIGTERM, then SIGKILL after `grace` seconds.
  int Stop(double grace = 5) {
    Signal(SIGTERM);
    int rc = Wait(grace);
    if (rc == -1) {
      Signal(SIGKILL);
      rc = Wait(5);
    }
    return rc;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
};

// A TCP port on loopback that was free a moment ago, never one this process
// was given before.
inline int FreePort() {
  // The kernel may hand the same ephemeral port out again at once: a test
  // that takes two (a ZeroMQ endpoint and an HTTP port) must get two.
  static std::set<int> handed_out;
  for (int attempt = 0;; ++attempt) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
    int port = ntohs(addr.sin_port);
    close(s);
    if (handed_out.insert(port).second || attempt >= 100) return port;
  }
}

inline std::string ReadFile(const std::string& path) {
  std::string out;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

}  // namespace tune::testing
