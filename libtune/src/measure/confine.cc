#include "measure/confine.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <thread>

namespace tune::confine {
namespace {

// Rights by the ABI that introduced them (the system's header may be older
// than the kernel: the numbers are the kernel's ABI, stable forever).
constexpr unsigned long long kExecute = 1ULL << 0, kWriteFile = 1ULL << 1, kReadFile = 1ULL << 2,
                             kReadDir = 1ULL << 3, kRefer = 1ULL << 13, kTruncate = 1ULL << 14,
                             kIoctlDev = 1ULL << 15;
constexpr unsigned long long kAbi1All = (1ULL << 13) - 1;  // EXECUTE .. MAKE_SYM
constexpr unsigned long long kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
constexpr unsigned long long kScopeAbstractUnix = 1ULL << 0, kScopeSignal = 1ULL << 1;  // ABI 6
constexpr unsigned long long kNetBindTcp = 1ULL << 0, kNetConnectTcp = 1ULL << 1;    // ABI 4

// The kernel's struct, whatever this header knows of it; its size tells
// the kernel which fields are there.
struct RulesetAttr {
  unsigned long long handled_access_fs = 0;
  unsigned long long handled_access_net = 0;
  unsigned long long scoped = 0;
};
struct __attribute__((packed)) PathBeneathAttr {
  unsigned long long allowed_access;
  int parent_fd;
};

unsigned long long HandledFs(int abi) {
  unsigned long long h = kAbi1All;
  if (abi >= 2) h |= kRefer;
  if (abi >= 3) h |= kTruncate;
  if (abi >= 5) h |= kIoctlDev;
  return h;
}

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) return "";
  return buf;
}

// True when `a` is `b` or lies beneath it.
bool Beneath(const std::string& a, const std::string& b) {
  if (b == "/") return true;
  return a == b || (a.size() > b.size() && a.compare(0, b.size(), b) == 0 && a[b.size()] == '/');
}

}  // namespace

int LandlockAbi() {
  static const int abi = [] {
    const long v = syscall(__NR_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? 0 : int(v);
  }();
  return abi;
}

Result<FsRuleset> FsRuleset::Create(const RulesetOptions& options) {
  const int abi = LandlockAbi();
  if (abi < 1) return Status::Unavailable("Landlock is not available in this kernel (Linux 5.13+ with lsm=landlock)");
  RulesetAttr attr;
  attr.handled_access_fs = HandledFs(abi);
  // Handled with no rule that allows them: refused to every port.
  if (abi >= 4 && options.deny_tcp) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  // Signals to processes outside the domain (the worker) are refused too.
  if (abi >= 6) attr.scoped = kScopeSignal | (options.scope_abstract_unix ? kScopeAbstractUnix : 0);
  const size_t size = abi >= 6 ? sizeof(RulesetAttr) : abi >= 4 ? 2 * sizeof(unsigned long long)
                                                                 : sizeof(unsigned long long);
  const long fd = syscall(__NR_landlock_create_ruleset, &attr, size, 0);
  if (fd < 0) return Status::Unavailable(std::string("landlock_create_ruleset: ") + std::strerror(errno));
  return FsRuleset(int(fd), attr.handled_access_fs);
}

FsRuleset::FsRuleset(FsRuleset&& other) noexcept : fd_(other.fd_), handled_(other.handled_) { other.fd_ = -1; }

FsRuleset& FsRuleset::operator=(FsRuleset&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    handled_ = other.handled_;
    other.fd_ = -1;
  }
  return *this;
}

FsRuleset::~FsRuleset() {
  if (fd_ >= 0) ::close(fd_);
}

Status FsRuleset::Add(const std::string& path, unsigned long long access) {
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == ELOOP) return Status::OK();
    return Status::IOError("confine: cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st{};
  if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= kFileRights;
  PathBeneathAttr rule{access & handled_, fd};
  const long r = syscall(__NR_landlock_add_rule, fd_, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  const int e = errno;
  ::close(fd);
  if (r < 0) return Status::IOError("confine: landlock_add_rule " + path + ": " + std::strerror(e));
  return Status::OK();
}

Status FsRuleset::AllowRead(const std::string& path) {
  return Add(path, kReadFile | kReadDir | kExecute);
}

Status FsRuleset::AllowReadWrite(const std::string& path) { return Add(path, handled_); }

Status FsRuleset::AllowWriteFiles(const std::string& path) {
  return Add(path, kReadFile | kReadDir | kExecute | kWriteFile | kTruncate | kIoctlDev);
}

Status FsRuleset::AllowExcept(const std::string& root, const std::vector<std::string>& denied, bool write) {
  const std::string top = RealPath(root);
  if (top.empty()) return Status::OK();
  auto grant = [&](const std::string& path) { return write ? AllowReadWrite(path) : AllowRead(path); };
  std::vector<std::string> deny;
  for (const std::string& d : denied) {
    std::string real = RealPath(d);
    if (real.empty()) continue;
    if (Beneath(top, real)) return Status::OK();  // all of `root` is denied
    if (Beneath(real, top)) deny.push_back(real);
  }
  if (deny.empty()) return grant(top);
  std::set<std::string> visited;
  // Grants every entry of `dir` that neither is nor holds a denied path,
  // and descends into those that hold one.
  std::function<Status(const std::string&)> walk = [&](const std::string& dir) -> Status {
    if (!visited.insert(dir).second) return Status::OK();
    DIR* d = ::opendir(dir.c_str());
    if (!d) return Status::OK();  // unreadable here, unreadable confined
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
    for (const std::string& name : names) {
      const std::string path = (dir == "/" ? "" : dir) + "/" + name;
      const std::string real = RealPath(path);
      if (real.empty()) continue;  // dangling link
      bool is_denied = false, holds_denied = false;
      for (const std::string& x : deny) {
        if (Beneath(real, x)) is_denied = true;
        else if (Beneath(x, real)) holds_denied = true;
      }
      if (is_denied) continue;
      // A link leading to an ancestor of a denied path is walked where
      // it leads (the walk of its real place grants the rest).
      if (holds_denied) {
        TUNE_RETURN_IF_ERROR(walk(real));
        continue;
      }
      TUNE_RETURN_IF_ERROR(grant(real));
    }
    return Status::OK();
  };
  return walk(top);
}

int FsRuleset::AllowReadWriteRaw(const char* path) const {
  const int fd = ::open(path, O_PATH | O_CLOEXEC | O_DIRECTORY);
  if (fd < 0) return -1;
  PathBeneathAttr rule{handled_, fd};
  const long r = syscall(__NR_landlock_add_rule, fd_, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  ::close(fd);
  return r < 0 ? -1 : 0;
}

int FsRuleset::RestrictThisThreadRaw() const {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return int(syscall(__NR_landlock_restrict_self, fd_, 0));
}

Status FsRuleset::RestrictThisThread() const {
  if (RestrictThisThreadRaw() != 0) return Status::IOError(std::string("landlock_restrict_self: ") + std::strerror(errno));
  return Status::OK();
}

Status RunOnConfinedThread(const FsRuleset& ruleset, const std::function<void()>& fn) {
  Status st = Status::OK();
  std::thread t([&] {
    st = ruleset.RestrictThisThread();
    if (st.ok()) fn();
  });
  t.join();
  return st;
}

// Written as raw BPF, not with libseccomp: the filter is a handful of
// instructions and is installed between fork and exec, where building one
// through a library (which allocates) is not allowed.
int DenySocketsRaw() {
#if defined(__x86_64__)
  constexpr unsigned kArch = AUDIT_ARCH_X86_64;
  constexpr unsigned kOtherAbiBit = 0x40000000;  // x32 system calls
#elif defined(__aarch64__)
  constexpr unsigned kArch = AUDIT_ARCH_AARCH64;
  constexpr unsigned kOtherAbiBit = 0;
#else
  errno = ENOSYS;
  return -1;
#endif
  constexpr unsigned kRefuse = SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA);
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, kOtherAbiBit, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, kRefuse),
      // socket(family, ...): the family is the low word of the first
      // argument (little-endian on both ABIs).
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, kRefuse),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
}

char* AppendDecimalRaw(char* p, unsigned long long v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = char('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = digits[--n];
  return p;
}

namespace {

bool WriteWhole(const char* path, const char* text, size_t size) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text, size) == ssize_t(size);
  close(fd);
  return ok;
}

// "<id> <id> 1": the id maps to itself, and nothing else is mapped.
bool MapOwnId(const char* path, unsigned long long id) {
  char line[64];
  char* p = AppendDecimalRaw(line, id);
  *p++ = ' ';
  p = AppendDecimalRaw(p, id);
  *p++ = ' ';
  *p++ = '1';
  return WriteWhole(path, line, size_t(p - line));
}

}  // namespace

bool PrivateShmRaw(unsigned long long shm_bytes, bool hide_run) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
  static const char kDeny[] = "deny";
  if (!MapOwnId("/proc/self/uid_map", uid) || !WriteWhole("/proc/self/setgroups", kDeny, sizeof kDeny - 1) ||
      !MapOwnId("/proc/self/gid_map", gid))
    return false;
  // Nothing mounted here reaches the host's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  char options[64] = "mode=1777";
  if (shm_bytes) {
    static const char kSize[] = ",size=";
    char* p = options + sizeof "mode=1777" - 1;
    for (const char* c = kSize; *c; ++c) *p++ = *c;
    *AppendDecimalRaw(p, shm_bytes) = '\0';
  }
  if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) return false;
  // The host's daemons listen under /run (/var/run leads there): an empty
  // folder in their place.
  return !hide_run || mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=755") == 0;
}

bool CanMakePrivateShm() {
  static const bool can = [] {
    const pid_t pid = fork();
    if (pid == 0) _exit(PrivateShmRaw(1 << 20, true) ? 0 : 1);
    if (pid < 0) return false;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }();
  return can;
}

}  // namespace tune::confine
