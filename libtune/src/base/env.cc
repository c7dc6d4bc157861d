#include "base/env.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "base/clock.h"

namespace tune {

Env* Env::Default() {
  static Env* host = new Env();  // never destroyed: usable from static destructors
  return host;
}

double Env::NowSeconds() { return tune::NowSeconds(); }

int64_t Env::NowUnixSeconds() { return tune::NowUnixSeconds(); }

Status Env::ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Error("read error");
  *out = ss.str();
  return Status::OK();
}

Status Env::WriteFileAtomically(const std::string& path, const std::string& bytes) {
  // A name of this call's own: threads of one process may write one path.
  static std::atomic<uint64_t> calls{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(calls.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error(tmp + ": cannot create: " + std::strerror(errno));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::Error(tmp + ": write failed: " + std::strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::Error(tmp + ": cannot flush: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::Error(path + ": cannot replace: " + std::strerror(err));
  }
  return Status::OK();
}

}  // namespace tune
