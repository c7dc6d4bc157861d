// Filesystem confinement of what an op's author controls on a worker: its
// compiles (NVRTC's preprocessor reads whatever an #include names, however
// it is spelled) and its programs (build, run and serve commands).
//
// Built on Landlock (Linux 5.13+, no privileges needed): a ruleset lists
// the folders a thread may read (and write), and a thread that enforces it
// keeps it for good and hands it to every process it starts. A confined
// process also loses ptrace-level access to processes outside its domain,
// so /proc/<worker>/{mem,environ,fd,cwd,root} answer "permission denied".
//
// Parsing sources stays the first line of defence (op_confine.h names the
// offending include); confinement is what holds when a spelling slips past
// the parser.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tune/status.h"

namespace tune::confine {

// The Landlock ABI version of the running kernel; 0 when it has none (or
// it is disabled, or a seccomp filter hides it).
int LandlockAbi();

// What a ruleset restricts beyond the filesystem, each where the kernel's
// Landlock ABI has it (older kernels silently leave it open: LandlockAbi()
// says which apply).
struct RulesetOptions {
  // TCP bind and connect refused, to every address (ABI 4+). UDP and other
  // socket families are not covered by Landlock.
  bool deny_tcp = false;
  // Connecting to abstract unix sockets made outside the domain refused
  // (ABI 6+): the worker's, other programs', a desktop bus's.
  bool scope_abstract_unix = false;
};

// A Landlock ruleset under construction. Movable, not copyable; closes its
// descriptor when destroyed.
class FsRuleset {
 public:
  // A ruleset that handles every filesystem right the kernel knows: what
  // no rule allows is denied. Error when Landlock is unavailable.
  static Result<FsRuleset> Create(const RulesetOptions& options = {});
  FsRuleset(FsRuleset&& other) noexcept;
  FsRuleset& operator=(FsRuleset&& other) noexcept;
  FsRuleset(const FsRuleset&) = delete;
  FsRuleset& operator=(const FsRuleset&) = delete;
  ~FsRuleset();

  // Read (and list, and execute) everything beneath `path`. A path that
  // does not exist is skipped (OK): nothing there can be read anyway.
  Status AllowRead(const std::string& path);
  // Read and write (create, remove, rename) everything beneath `path`.
  Status AllowReadWrite(const std::string& path);
  // Read, write and drive (ioctl: a GPU's device nodes are driven so) the
  // existing files beneath `path`, create nothing.
  Status AllowWriteFiles(const std::string& path);
  // Read (and, with `write`, write) access to everything beneath `root`
  // except the `denied` paths (files or folders) and what lies beneath
  // them. Landlock only grants, so this grants every sibling along the way
  // down to each denied path; entries created there later stay out of
  // reach. Denied paths that do not exist are ignored; a `root` inside a
  // denied path grants nothing.
  Status AllowExcept(const std::string& root, const std::vector<std::string>& denied, bool write);

  // AllowReadWrite of one folder, for a child between fork and exec (a
  // folder it mounted: a rule made before the mount would name the folder
  // the mount hides). Async-signal-safe; -1 and errno on failure. The
  // ruleset is shared with the parent: it should not be used again there.
  int AllowReadWriteRaw(const char* path) const;

  // Enforces the ruleset on the calling thread (and everything it starts
  // from now on), after setting no_new_privs on it. Irreversible.
  Status RestrictThisThread() const;
  // For a child between fork and exec: async-signal-safe, returns -1 on
  // failure (errno set).
  int RestrictThisThreadRaw() const;

  int fd() const { return fd_; }

 private:
  explicit FsRuleset(int fd, unsigned long long handled) : fd_(fd), handled_(handled) {}
  Status Add(const std::string& path, unsigned long long access);

  int fd_ = -1;
  unsigned long long handled_ = 0;
};

// For a child between fork and exec (async-signal-safe; -1 and errno on
// failure; no_new_privs must be set): a seccomp filter under which
// socket() fails with EACCES for every family but AF_UNIX, as does
// io_uring_setup (whose requests would open sockets beside the filter),
// and the process is killed on a system call of another ABI (32-bit,
// x32). Landlock covers TCP and abstract unix sockets at best; this closes
// UDP, raw, packet and netlink sockets too. Unix sockets stay because the
// CUDA driver will not start without one (cudaGetDeviceCount fails with
// "OS call failed"); PrivateShmRaw hides the host's under /run.
int DenySocketsRaw();

// For a child between fork and exec (async-signal-safe; false and errno
// on failure, and /dev/shm is then the host's): moves the process into a user and mount namespace of its own
// (mapping only its own uid and gid) with a fresh tmpfs of `shm_bytes`
// on /dev/shm, so that what it and its children make there (POSIX
// semaphores, shared memory) is theirs and the host's shared memory
// objects are out of sight; with `hide_run`, an empty read-only /run
// too, so that the host's daemons' unix sockets (a container runtime's,
// the system and session buses, systemd's) are out of reach. Fails where
// the kernel refuses unprivileged user namespaces (a sysctl, an AppArmor
// policy).
// 0: tmpfs's default size. Decide with CanMakePrivateShm first: after a
// failure the process may be left in a namespace of its own with no ids
// mapped, fit only to exit.
bool PrivateShmRaw(unsigned long long shm_bytes, bool hide_run);
// Whether PrivateShmRaw succeeds on this host (tried once, in a child
// process).
bool CanMakePrivateShm();

// Writes the decimal digits of `v` at `p` and returns the end (no stdio,
// no allocation: for code between fork and exec).
char* AppendDecimalRaw(char* p, unsigned long long v);

// Runs `fn` on a new thread confined by `ruleset`, waits for it and
// returns OK; the calling thread is not restricted. Error (and `fn` not
// run) when the thread cannot be confined.
Status RunOnConfinedThread(const FsRuleset& ruleset, const std::function<void()>& fn);

}  // namespace tune::confine
