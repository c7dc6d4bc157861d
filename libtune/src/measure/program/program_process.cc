#include "measure/program/program_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "base/clock.h"

// The entries getdents64 returns (glibc's dirent64 has the same layout).
struct linux_dirent64_view {
  unsigned long long d_ino;
  long long d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

namespace tune::program {
namespace {

constexpr size_t kMaxLineBytes = size_t(4) << 20;
constexpr size_t kStderrTailBytes = 16 << 10;

int MillisUntil(double deadline) {
  const double left = deadline - NowSeconds();
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


// --- the box: what runs between the worker and a program ---
//
// A program op may start processes that leave its session (`setsid -f`),
// and must not reach the worker (its keys, its memory through /proc). So
// the worker forks a box, which
//   - is a child subreaper: whatever the program starts and orphans becomes
//     the box's child, however it detached;
//   - forks the program, which confines itself (Landlock: the worker's key
//     files and caches out of reach, and ptrace-level access to the box and
//     the worker refused, as they lie outside its domain; seccomp: no
//     socket of any family; a user and mount namespace: a /dev/shm of its
//     own) and execs
//     /bin/sh -c COMMAND in a session of its own;
//   - forks the program with its resource limits set (BoxLimits), and
//     counts the program's whole tree (its processes and their resident
//     memory) from /proc a few times a second, killing all of it past a
//     bound;
//   - when the program's first process ends, or the box is told to stop
//     (SIGTERM, sent by Kill and by the kernel when the worker dies), kills
//     every process left below it, then ends as the program did.
// The box is a fork of a threaded process: until it exits it calls only
// async-signal-safe functions (raw system calls, no allocation).
//
// Why these limits and not others: RLIMIT_AS would bound memory, but CUDA
// reserves terabytes of virtual address space at its start, so it breaks
// every GPU program; RLIMIT_DATA counts writable private mappings, which the
// driver's pinned buffers are. A cgroup would do it right, but a worker's
// cgroup is rarely writable (systemd's ProtectControlGroups, containers).
// So memory is counted (resident pages) by the box. RLIMIT_NPROC counts the
// tasks (threads too) of the user, all processes of it together, and root
// is never held by it: it is only a backstop against a program forking
// faster than the box counts, set to the user's tasks at the start plus
// kTasksPerProcess per allowed process.

constexpr uint64_t kTasksPerProcess = 64;
constexpr int kWatchMillis = 200;         // how often the box counts the tree
constexpr int kMaxProcEntries = 1 << 18;  // processes on the host the box can see at once

struct BoxPlan {
  char** argv;
  char** envp;
  const char* cwd;
  int in, out, err;  // the program's stdin (-1: /dev/null), stdout, stderr
  const confine::FsRuleset* rules;  // null: not confined
  bool private_shm, hide_run;
  unsigned long long shm_bytes;
  pid_t worker;
  // rlimits of the program; 0: left as they are.
  rlim_t fsize, nofile, nproc;
  uint64_t max_processes, max_rss_pages;  // 0: not counted
};

volatile sig_atomic_t box_stop = 0;
volatile sig_atomic_t box_tick = 0;
void OnBoxStop(int) { box_stop = 1; }
void OnBoxTick(int) { box_tick = 1; }

void SignalsAsAShellHasThem() {
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Parses a decimal at `p`, advancing it.
long ParseLong(const char*& p) {
  long v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
  return v;
}

char* PutText(char* p, const char* text) {
  while (*text) *p++ = *text++;
  return p;
}

// The fields of /proc/NAME/stat after "pid (comm) " (the state, then the
// ppid), read into `stat` (of `cap` bytes); nullptr when the process is
// gone or the line is not one. comm may hold anything, ')' included.
// Async-signal-safe: open, read and close only.
const char* ProcStatFields(const char* name, char* stat, size_t cap) {
  char path[64];
  char* e = PutText(PutText(path, "/proc/"), name);
  if (e - path > 40) return nullptr;
  *PutText(e, "/stat") = 0;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  const ssize_t got = read(fd, stat, cap - 1);
  close(fd);
  if (got <= 0) return nullptr;
  stat[got] = 0;
  const char* close_paren = nullptr;
  for (const char* c = stat; *c; ++c)
    if (*c == ')') close_paren = c;
  if (!close_paren || close_paren[1] != ' ' || !close_paren[2] || close_paren[3] != ' ') return nullptr;
  return close_paren + 2;
}

// SIGKILL to every child of this process, found in /proc. Returns how
// many were signalled.
int KillChildren(pid_t self) {
  int killed = 0;
  const int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  char buf[8192];
  for (;;) {
    const long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct linux_dirent64_view*>(buf + off);
      off += d->d_reclen;
      const char* name = d->d_name;
      if (*name < '1' || *name > '9') continue;
      const char* q = name;
      const long pid = ParseLong(q);
      char stat[512];
      const char* fields = ProcStatFields(name, stat, sizeof stat);
      if (!fields) continue;
      const char* pp = fields + 2;  // past the state
      if (ParseLong(pp) == self) {
        kill(pid_t(pid), SIGKILL);
        ++killed;
      }
    }
  }
  close(dir);
  return killed;
}

[[noreturn]] void ExitAs(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, nullptr);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    kill(getpid(), sig);
    _exit(128 + sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

[[noreturn]] void ProgramMain(const BoxPlan& plan) {
  SignalsAsAShellHasThem();
  if (plan.in >= 0) dup2(plan.in, STDIN_FILENO);
  else {
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0 && null != STDIN_FILENO) dup2(null, STDIN_FILENO);
  }
  dup2(plan.out, STDOUT_FILENO);
  dup2(plan.err, STDERR_FILENO);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (plan.fsize) {
    const rlimit l{plan.fsize, plan.fsize};
    setrlimit(RLIMIT_FSIZE, &l);
  }
  if (plan.nofile) {
    rlimit l{};
    getrlimit(RLIMIT_NOFILE, &l);
    if (l.rlim_max == RLIM_INFINITY || l.rlim_max > plan.nofile) l.rlim_max = plan.nofile;
    l.rlim_cur = l.rlim_max;
    setrlimit(RLIMIT_NOFILE, &l);
  }
  if (plan.nproc) {
    const rlimit l{plan.nproc, plan.nproc};
    setrlimit(RLIMIT_NPROC, &l);
  }
  // Before the capabilities go: mounting its /dev/shm takes those the
  // new user namespace grants.
  if (plan.private_shm &&
      (!confine::PrivateShmRaw(plan.shm_bytes, plan.hide_run) || plan.rules->AllowReadWriteRaw("/dev/shm") != 0)) {
    static const char kMsg[] = "tunefarm: cannot give the program a /dev/shm of its own (unshare or mount failed)\n";
    (void)!write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    _exit(126);
  }
  // A worker run as root would hand the program CAP_SYS_PTRACE, which
  // reaches the worker's /proc beside Landlock: none cross the exec.
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  __user_cap_header_struct cap_header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct no_caps[2] = {};
  syscall(SYS_capset, &cap_header, no_caps);
  if (plan.rules && (confine::DenySocketsRaw() != 0 || plan.rules->RestrictThisThreadRaw() != 0)) {
    static const char kMsg[] = "tunefarm: cannot confine the program (seccomp or landlock_restrict_self failed)\n";
    (void)!write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    _exit(126);
  }
  // Sockets, database files, pipes and the ruleset stay out of the program.
  syscall(SYS_close_range, 3U, ~0U, 0U);
  if (chdir(plan.cwd) != 0) _exit(126);
  execve("/bin/sh", plan.argv, plan.envp);
  _exit(127);
}

struct ProcEntry {
  int pid, ppid;
  uint64_t rss_pages;
  bool mine;
};

// Counts the processes below `self` (the box) and their resident pages,
// from /proc into `tab`; past a bound of `plan`, kills every one of them,
// says so on stderr and returns true.
bool WatchTree(const BoxPlan& plan, pid_t self, ProcEntry* tab) {
  const int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  int count = 0;
  char buf[8192];
  for (;;) {
    const long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n && count < kMaxProcEntries;) {
      auto* d = reinterpret_cast<struct linux_dirent64_view*>(buf + off);
      off += d->d_reclen;
      const char* name = d->d_name;
      if (*name < '1' || *name > '9') continue;
      char stat[1024];
      const char* fields = ProcStatFields(name, stat, sizeof stat);
      if (!fields) continue;
      // Fields from the 3rd (state): ppid is the 4th, rss the 24th.
      const char* q = fields + 2;
      const long ppid = ParseLong(q);
      for (int field = 5; field < 24 && *q; ++field) {  // past 5..23
        while (*q == ' ') ++q;
        while (*q && *q != ' ') ++q;
      }
      while (*q == ' ') ++q;
      const char* np = name;
      tab[count++] = ProcEntry{int(ParseLong(np)), int(ppid), uint64_t(ParseLong(q)), false};
    }
  }
  close(dir);
  // Below the box: marked level by level (orphans are the box's children,
  // so the tree stays whole); a tree deeper than the bound is past it.
  uint64_t procs = 0, pages = 0;
  for (bool grew = true; grew && (!plan.max_processes || procs <= plan.max_processes);) {
    grew = false;
    for (int i = 0; i < count; ++i) {
      if (tab[i].mine) continue;
      bool parent_mine = tab[i].ppid == self;
      if (!parent_mine) {  // /proc lists pids in ascending order
        int lo = 0, hi = count;
        while (lo < hi) {
          const int mid = lo + (hi - lo) / 2;
          if (tab[mid].pid < tab[i].ppid) lo = mid + 1;
          else hi = mid;
        }
        parent_mine = lo < count && tab[lo].pid == tab[i].ppid && tab[lo].mine;
      }
      if (!parent_mine) continue;
      tab[i].mine = grew = true;
      ++procs;
      pages += tab[i].rss_pages;
    }
  }
  const bool too_many = plan.max_processes && procs > plan.max_processes;
  const bool too_big = plan.max_rss_pages && pages > plan.max_rss_pages;
  if (!too_many && !too_big) return false;
  for (int i = 0; i < count; ++i)
    if (tab[i].mine) kill(tab[i].pid, SIGKILL);
  char msg[256];
  char* p = PutText(msg, "tunefarm: the program was stopped: ");
  if (too_many) {
    p = PutText(confine::AppendDecimalRaw(p, procs), " processes or more (the box allows ");
    p = PutText(confine::AppendDecimalRaw(p, plan.max_processes), ")\n");
  } else {
    p = PutText(confine::AppendDecimalRaw(p, pages), " pages resident (the box allows ");
    p = PutText(confine::AppendDecimalRaw(p, plan.max_rss_pages), ")\n");
  }
  (void)!write(STDERR_FILENO, msg, size_t(p - msg));
  return true;
}

[[noreturn]] void BoxMain(const BoxPlan& plan) {
  setsid();
  struct sigaction stop{};
  stop.sa_handler = OnBoxStop;  // no SA_RESTART: wait4 returns EINTR
  sigaction(SIGTERM, &stop, nullptr);
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != plan.worker) _exit(126);  // the worker died before the line above
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const pid_t main_pid = fork();
  if (main_pid == 0) ProgramMain(plan);
  // The box keeps the program's stderr only, to say why it stopped it.
  if (plan.err != STDERR_FILENO) dup2(plan.err, STDERR_FILENO);
  syscall(SYS_close_range, 0U, 1U, 0U);
  syscall(SYS_close_range, 3U, ~0U, 0U);
  ProcEntry* tab = nullptr;
  if (plan.max_processes || plan.max_rss_pages) {
    void* m = mmap(nullptr, sizeof(ProcEntry) * kMaxProcEntries, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED) {
      tab = static_cast<ProcEntry*>(m);
      struct sigaction tick{};
      tick.sa_handler = OnBoxTick;  // no SA_RESTART: wait4 returns EINTR
      sigaction(SIGALRM, &tick, nullptr);
      const itimerval every{{0, kWatchMillis * 1000}, {0, kWatchMillis * 1000}};
      setitimer(ITIMER_REAL, &every, nullptr);
    }
  }
  int main_status = 0;
  bool main_done = main_pid < 0;
  if (main_pid < 0) main_status = 127 << 8;
  const pid_t self = getpid();
  while (!main_done && !box_stop) {
    if (box_tick) {
      box_tick = 0;
      if (tab && WatchTree(plan, self, tab)) break;
    }
    int st = 0;
    const pid_t r = wait4(-1, &st, 0, nullptr);
    if (r == main_pid) {
      main_status = st;
      main_done = true;
    } else if (r < 0 && errno == ECHILD) {
      break;
    }
  }
  const itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  if (!main_done) {
    kill(main_pid, SIGKILL);
    main_status = SIGKILL;  // a wait status "killed by SIGKILL"
  }
  // Everything left: the program's leftovers and what they start while
  // being killed, reparented here as their parents die.
  for (int round = 0; round < 100000; ++round) {
    KillChildren(self);
    int st = 0;
    const pid_t r = wait4(-1, &st, 0, nullptr);
    if (r < 0 && errno == ECHILD) break;
    if (r == main_pid && !main_done) {
      main_status = st;
      main_done = true;
    }
  }
  ExitAs(main_status);
}
}  // namespace

ProgramProcess::~ProgramProcess() {
  if (pid_ > 0) Kill();
  CloseFds();
  RemoveTmp();
}

void ProgramProcess::CloseFds() {
  for (int* fd : {&in_, &out_, &err_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

namespace {

// The tasks (threads included) the kernel counts against this real user's
// RLIMIT_NPROC now.
uint64_t TasksOfThisUser() {
  const uid_t uid = getuid();
  uint64_t tasks = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] < '1' || name[0] > '9') continue;
    FILE* f = std::fopen((e.path() / "status").c_str(), "r");
    if (!f) continue;
    char line[256];
    long real_uid = -1, threads = 0;
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "Uid:", 4) == 0) real_uid = std::strtol(line + 4, nullptr, 10);
      else if (std::strncmp(line, "Threads:", 8) == 0) threads = std::strtol(line + 8, nullptr, 10);
    }
    std::fclose(f);
    if (real_uid == long(uid)) tasks += uint64_t(std::max(threads, 1L));
  }
  return tasks;
}

// Removes `path` and everything beneath it without following links, making
// folders a program locked (chmod 000) removable first.
void ForceRemoveAll(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec) return;
  if (fs::is_directory(st)) {
    ::chmod(path.c_str(), 0700);
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(path, ec)) entries.push_back(e.path());
    for (const fs::path& e : entries) ForceRemoveAll(e);
  }
  fs::remove(path, ec);
}

}  // namespace

int RemoveLeftoverTmp(const std::string& tmp_parent) {
  if (tmp_parent.empty()) return 0;
  int removed = 0;
  std::error_code ec;
  std::vector<std::filesystem::path> gone;
  for (const auto& e : std::filesystem::directory_iterator(tmp_parent, ec)) {
    // "<worker pid>-XXXXXX" (ProgramProcess::Start).
    const std::string name = e.path().filename().string();
    const size_t dash = name.find('-');
    if (dash == 0 || dash == std::string::npos || name.find_first_not_of("0123456789") != dash) continue;
    const long owner = std::strtol(name.c_str(), nullptr, 10);
    if (owner <= 0 || (::kill(pid_t(owner), 0) != 0 && errno == ESRCH)) gone.push_back(e.path());
  }
  for (const auto& path : gone) {
    ForceRemoveAll(path);
    ++removed;
  }
  return removed;
}

void ProgramProcess::RemoveTmp() {
  if (tmp_dir_.empty()) return;
  ForceRemoveAll(tmp_dir_);
  tmp_dir_.clear();
}

Status ProgramProcess::Start(const std::string& command, const std::string& cwd,
                             const std::vector<std::string>& env, bool keep_stdin, const Box& box) {
  if (pid_ > 0) return Status::Error("program already running");
  RemoveTmp();
  std::map<std::string, std::string> vars;
  for (const std::string& kv : env) vars[kv.substr(0, kv.find('='))] = kv;
  if (!box.tmp_parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(box.tmp_parent, ec);
    std::string tmpl = box.tmp_parent + "/" + std::to_string(getpid()) + "-XXXXXX";
    if (!::mkdtemp(tmpl.data()))  // mode 0700
      return Status::Error("cannot create a TMPDIR in " + box.tmp_parent + ": " + std::strerror(errno));
    tmp_dir_ = tmpl;
    for (const char* name : {"TMPDIR", "TMP", "TEMP"}) vars[name] = std::string(name) + "=" + tmp_dir_;
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
      if (fd >= 0) close(fd);
  };
  if ((keep_stdin && pipe2(in, O_CLOEXEC) != 0) || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    RemoveTmp();
    return Status::Error(std::string("pipe: ") + std::strerror(e));
  }
  std::vector<char*> envp;
  for (auto& [name, kv] : vars) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
  const BoxLimits& l = box.limits;
  const long page = sysconf(_SC_PAGESIZE);
  BoxPlan plan{argv, envp.data(), cwd.c_str(), keep_stdin ? in[0] : -1, out[1], err[1], box.rules,
               box.rules && box.private_shm, box.hide_run, l.max_memory_bytes, getpid(),
               rlim_t(l.max_file_bytes), rlim_t(l.max_open_files),
               rlim_t(l.max_processes && getuid() != 0 ? TasksOfThisUser() + kTasksPerProcess * l.max_processes : 0),
               l.max_processes, l.max_memory_bytes ? std::max<uint64_t>(1, l.max_memory_bytes / uint64_t(page > 0 ? page : 4096)) : 0};
  // fork, not posix_spawn: the box runs code of its own before the
  // program's exec, all of it async-signal-safe (BoxMain).
  const pid_t pid = fork();
  if (pid == 0) BoxMain(plan);
  if (pid < 0) {
    const int e = errno;
    close_all();
    RemoveTmp();
    return Status::Error("cannot start /bin/sh in " + cwd + ": " + std::strerror(e));
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
  const double deadline = NowSeconds() + timeout_seconds;
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
    if (NowSeconds() >= deadline) {
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
      RemoveTmp();
      return "ended (reaped elsewhere)";
    }
    if (r < 0 && errno != EINTR) break;
    if (NowSeconds() >= deadline) return Kill();
    DrainStderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(-pid_, SIGKILL);
  DrainStderr();
  const std::string how = Reap(pid_, clean);
  pid_ = -1;
  CloseFds();
  RemoveTmp();
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
  // The box kills what the program left, detached or not, then ends; the
  // group's SIGKILL is for a box that does not (it cannot clean up then).
  kill(pid_, SIGTERM);
  for (int i = 0; i < 400 && !Exited(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  DrainStderr();
  const std::string how = Reap(pid_, nullptr);
  pid_ = -1;
  CloseFds();
  RemoveTmp();
  return how;
}

}  // namespace tune::program
