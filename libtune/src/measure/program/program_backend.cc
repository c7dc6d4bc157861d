// The backend of program ops (measure/program/program_backend.h).
#include "measure/program/program_backend.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "measure/package_dir.h"
#include "base/clock.h"
#include "measure/program/program_process.h"
#include "measure/program/program_protocol.h"

extern char** environ;

namespace tune {
namespace {

namespace fs = std::filesystem;
using program::Outcome;
using program::ProgramProcess;

// The last `max` bytes of `text`, cut at a line start.
std::string Tail(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t from = text.size() - max;
  const size_t nl = text.find('\n', from);
  if (nl != std::string::npos && nl + 1 < text.size()) from = nl + 1;
  return "[...]\n" + text.substr(from);
}

constexpr size_t kLogTailBytes = 8192;

// The inputs of a shape: the same for every config, so that all of them are
// checked against the same data.
uint64_t SeedOf(const std::string& op, const std::string& dtype, const Shape& shape) {
  uint64_t h = 1469598103934665603ull;
  for (char c : op + "|" + dtype + "|" + shape.Canonical()) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h >> 11;  // exact in a double, for programs that read JSON numbers so
}

// flock(2) on a file, held for the object's life (none when it cannot be
// opened: the build then runs unguarded rather than not at all).
class BuildLock {
 public:
  explicit BuildLock(const fs::path& path) : fd_(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~BuildLock() {
    if (fd_ >= 0) close(fd_);
  }
  BuildLock(const BuildLock&) = delete;
  BuildLock& operator=(const BuildLock&) = delete;

 private:
  int fd_;
};

class ProgramBackend : public Backend {
 public:
  ProgramBackend(const DeviceInfo& device, std::string toolchain, ProgramBackendOptions options)
      : device_(device), toolchain_(std::move(toolchain)), options_(std::move(options)) {
    if (options_.allowed) MakeBox();
  }

  const DeviceInfo& device() const override { return device_; }
  std::string toolchain() const override { return toolchain_; }

  Result<std::string> HostDigest(const OpSpec& spec) override {
    if (!spec.program || spec.program->version.empty() || !options_.allowed) return std::string();
    auto dir = PackageDir(spec);
    if (!dir.ok()) return dir.status();
    return VersionDigest(spec, *dir);
  }

  CompiledKernel Compile(const OpSpec& spec, const std::string& dtype, const Config& config) override {
    CompiledKernel k;
    k.config = config;
    k.config_id = config.Id();
    const double start = NowSeconds();
    auto fail = [&](const std::string& why, const std::string& log) {
      k.failure = FailureClass::kCompileError;
      k.failure_message = why;
      k.log = log;
      k.compile_seconds = NowSeconds() - start;
      return k;
    };
    if (!spec.program) return fail("op '" + spec.name + "' is not a program op", "");
    if (!options_.allowed)
      return fail("program ops are not allowed on this worker (its operator starts it with --allow-programs)", "");
    if (!box_status_.ok()) return fail(box_status_.message(), "");
    auto dir = PackageDir(spec);
    if (!dir.ok()) return fail(dir.status().message(), "");
    if (!spec.program->version.empty()) {
      auto digest = VersionDigest(spec, *dir);
      if (!digest.ok()) return fail(digest.status().message(), "");
      k.include_digest = *digest;
      k.kernel_hash = KernelHashWithIncludes(OpHash(spec, toolchain_), *digest);
    }
    const fs::path build = BuildDir(*dir, dtype, config);
    std::error_code ec;
    fs::create_directories(build, ec);
    if (ec) return fail("cannot create " + build.string() + ": " + ec.message(), "");
    if (spec.program->build.empty()) return k;
    // One build of a config at a time on this host: the device backends (and
    // workers sharing the cache) would otherwise write the same folder.
    BuildLock lock(build / ".tunefarm-lock");
    const fs::path done = build / ".tunefarm-built";
    if (fs::exists(done, ec)) {
      k.from_cache = true;
      return k;
    }
    // A build that failed fails again for the same package, dtype and config
    // (the next shape's unit, another device): its outcome is kept, as a
    // cubin's is. A timeout is not (a loaded host may build in time).
    const fs::path failed = build / ".tunefarm-failed";
    if (fs::exists(failed, ec)) {
      std::ifstream in(failed);
      std::string why;
      std::getline(in, why);
      const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      k = fail(why, log);
      k.from_cache = true;
      return k;
    }
    program::Request r = RequestFor(spec, dtype, config, Shape{});
    r.build_dir = build.string();
    ProgramProcess p;
    Status st = Start(p, spec.program->build, *dir, Environment(r), false);
    if (!st.ok()) return fail("build: " + st.message(), "");
    const double deadline = NowSeconds() + spec.program->build_timeout_seconds;
    bool timed_out = false;
    const std::string out = OutputUntilExit(p, deadline, &timed_out);
    if (timed_out)
      return fail("build timed out after " + std::to_string(int(spec.program->build_timeout_seconds)) + " s",
                  Tail(out + p.stderr_tail(), kLogTailBytes));
    bool clean = false;
    const std::string how = p.Finish(deadline, &clean);
    const std::string log = Tail(out + p.stderr_tail(), kLogTailBytes);
    if (!clean) {
      const std::string why = "build failed (" + how + ")";
      std::ofstream(failed) << why << "\n" << log;
      return fail(why, log);
    }
    if (!(std::ofstream(done) << "built\n")) return fail("cannot write " + done.string(), log);
    k.log = log;
    k.compile_seconds = NowSeconds() - start;
    return k;
  }

  void Plan(const OpSpec& spec, const std::string& dtype, const std::vector<Config>& configs,
            const std::vector<Shape>& shapes) override {
    if (!spec.program || spec.program->serve.empty() || !options_.allowed) return;
    // A queued unit of another op waits: its plan would replace the serve
    // process that the running unit still needs.
    if (serve_.running() && !serve_.Exited() && serve_digest_ != PackageDigest(spec.package)) return;
    if (!EnsureServe(spec).ok()) return;
    // A new process reads its first line once its imports are done.
    const double limit = serve_fresh_ ? spec.program->start_timeout_seconds : 10;
    if (!serve_.WriteLine(program::PlanLine(spec.name, dtype, configs, shapes), limit).ok()) serve_.Kill();
  }

  Measurement Measure(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel,
                      const Shape& shape, const TimingPolicy& policy, double best_so_far_us) override {
    Measurement m;
    auto fail = [&](FailureClass c, const std::string& why) {
      m.failure = c;
      m.failure_message = why;
      return m;
    };
    if (!spec.program || !options_.allowed) return fail(FailureClass::kLaunchError, "not a program op here");
    auto dir = PackageDir(spec);
    if (!dir.ok()) return fail(FailureClass::kLaunchError, dir.status().message());
    program::Request r = RequestFor(spec, dtype, kernel.config, shape);
    r.build_dir = BuildDir(*dir, dtype, kernel.config).string();
    r.timing = policy;
    r.best_so_far_us = best_so_far_us;
    r.baseline = kernel.baseline;
    Measurement got = spec.program->serve.empty() ? RunOnce(spec, *dir, r) : AskServe(spec, r);
    // ToMeasurement leaves the version a baseline's answer gave in
    // `baseline`; a config's answer has none.
    got.baseline = kernel.baseline.empty() ? ""
                   : got.baseline.empty()  ? kernel.baseline
                                           : kernel.baseline + " " + got.baseline;
    return got;
  }

 private:
  program::Request RequestFor(const OpSpec& spec, const std::string& dtype, const Config& config,
                              const Shape& shape) {
    program::Request r;
    r.id = ++next_id_;
    r.op = spec.name;
    r.dtype = dtype;
    r.config = config;
    r.shape = shape;
    r.check = spec.check;
    r.default_config = spec.default_config;
    r.seed = SeedOf(spec.name, dtype, shape);
    r.l2 = spec.timing;
    return r;
  }

  std::vector<std::string> Environment(const program::Request& r) const {
    std::vector<std::string> env = program::DeviceEnvironment(device_, options_.cpus, options_.python_path);
    for (std::string& kv : program::RequestEnvironment(r)) env.push_back(std::move(kv));
    return env;
  }

  static fs::path BuildDir(const std::string& package_dir, const std::string& dtype, const Config& config) {
    return fs::path(package_dir) / ".tunefarm" / "build" / (dtype + "-" + config.Id());
  }

  // The box of every program this backend starts: it reads the whole
  // filesystem but the protected paths (the worker's keys and
  // configuration, the coordinator's store and state), and writes only its
  // work folder (packages, builds, the per-process TMPDIRs), the framework
  // caches of the home folder (not the home itself: a service user's home
  // may hold a store), /dev/shm (POSIX semaphores: Python's
  // multiprocessing needs them; with private_namespace a fresh tmpfs in a
  // user and mount namespace of the program's, so the host's shared memory
  // objects stay out of sight; where the kernel refuses such namespaces,
  // the host's)
  // and the existing files of /dev, never a protected path; no socket but
  // unix ones (seccomp: no TCP, UDP, raw or netlink; the CUDA driver needs
  // a unix socket), the host's daemons' sockets under /run out of sight,
  // no abstract unix socket of another domain, no signal to the worker where the kernel's Landlock has it
  // (no op declares network use, so none gets it). A cubin planted in a
  // cache is checked as every image is (CheckCubin) and never ships on
  // this worker's word alone: publish recompiles or corroborates. Without Landlock, programs are refused
  // unless the operator allows them unconfined.
  void MakeBox() {
    tmp_dir_ = (fs::path(options_.work_dir) / "tmp").string();
    std::error_code ec;
    fs::create_directories(tmp_dir_, ec);
    ::chmod(tmp_dir_.c_str(), 0700);
    program::RemoveLeftoverTmp(tmp_dir_);  // a worker killed mid-run left these
    no_access_ = options_.protected_paths;
    for (std::string& p : DefaultProtectedPaths()) no_access_.push_back(std::move(p));
    // Made before the ruleset: a grant is of an existing folder.
    writable_ = ProgramCacheFolders();
    const char* log = std::getenv("TUNEFARM_HARNESS_LOG");
    for (const std::string& path : writable_) {
      if (log && path == log) std::ofstream(path, std::ios::app);  // a file: made so that its grant holds
      else fs::create_directories(path, ec);
    }
    writable_.push_back(options_.work_dir);
    private_shm_ = options_.private_namespace && confine::CanMakePrivateShm();
    // Without a namespace of its own, a program shares the host's.
    if (!private_shm_) writable_.push_back("/dev/shm");
    auto rules = BoxRules();
    if (!rules.ok() && confine::LandlockAbi() < 1) {
      private_shm_ = false;  // an unconfined program gets no box at all
      if (options_.allow_unconfined) return;
      box_status_ = Status::Unavailable("program ops need confinement and " + rules.status().message() +
                                        " (a worker may run them unconfined with --allow-unconfined-programs)");
      return;
    }
    box_status_ = rules.status();
    confined_ = rules.ok();
    private_shm_ = private_shm_ && confined_;
    // A work folder under /run stays in sight (and /run with it).
    hide_run_ = private_shm_;
    for (const std::string& dir : writable_)
      if (dir == "/run" || dir.rfind("/run/", 0) == 0 || dir.rfind("/var/run/", 0) == 0) hide_run_ = false;
  }

  // A fresh ruleset per program: the program adds its own /dev/shm to it.
  Result<confine::FsRuleset> BoxRules() const {
    confine::RulesetOptions net;
    net.deny_tcp = true;
    net.scope_abstract_unix = true;
    auto created = confine::FsRuleset::Create(net);
    if (!created.ok()) return created.status();
    confine::FsRuleset rules = std::move(*created);
    TUNE_RETURN_IF_ERROR(rules.AllowExcept("/", no_access_, false));
    for (const std::string& dir : writable_) TUNE_RETURN_IF_ERROR(rules.AllowExcept(dir, no_access_, true));
    // Devices: the GPU's nodes are opened read-write and driven by ioctl;
    // nothing is created in /dev.
    TUNE_RETURN_IF_ERROR(rules.AllowWriteFiles("/dev"));
    // The CUDA driver writes its threads' names through /proc (a process's
    // own entries, which come and go with it, so no narrower rule holds
    // them). Another process's entries stay behind ptrace checks, which
    // the Landlock domain fails; root-owned ones behind the uid (workers
    // run as a user of their own: docs/program-ops.md).
    TUNE_RETURN_IF_ERROR(rules.AllowWriteFiles("/proc"));
    return rules;
  }

  Status Start(ProgramProcess& p, const std::string& command, const std::string& dir,
               const std::vector<std::string>& farm_env, bool keep_stdin) {
    TUNE_RETURN_IF_ERROR(box_status_);
    std::vector<std::string> env = ProgramEnvironment();
    env.insert(env.end(), farm_env.begin(), farm_env.end());
    program::Box box;
    std::optional<confine::FsRuleset> rules;
    if (confined_) {
      auto made = BoxRules();
      if (!made.ok()) return made.status();
      rules.emplace(std::move(*made));
      box.rules = &*rules;
    }
    box.private_shm = private_shm_;
    box.hide_run = hide_run_;
    box.tmp_parent = tmp_dir_;
    box.limits = options_.limits;
    return p.Start(command, dir, env, keep_stdin, box);
  }

  // The op's package unpacked once per digest under the work folder.
  Result<std::string> PackageDir(const OpSpec& spec) {
    const std::string digest = PackageDigest(spec.package);
    std::lock_guard<std::mutex> lock(dir_mu_);
    auto known = dirs_.find(digest);
    if (known != dirs_.end()) return known->second;
    auto dir = UnpackedPackage(spec, (fs::path(options_.work_dir) / "packages").string());
    if (!dir.ok()) return dir.status();
    return dirs_[digest] = *dir;
  }

  // What `p` prints until it closes its output (the last kLogTailBytes), or
  // until `deadline`, when it is killed and *timed_out set.
  static std::string OutputUntilExit(ProgramProcess& p, double deadline, bool* timed_out) {
    std::string out;
    for (std::string line;;) {
      const auto got = p.ReadLine(deadline, &line);
      if (got == ProgramProcess::ReadOutcome::kLine) {
        out = Tail(out + line + "\n", kLogTailBytes);
        continue;
      }
      if (got == ProgramProcess::ReadOutcome::kTimeout) {
        p.Kill();
        *timed_out = true;
      }
      return out;
    }
  }

  // The digest of what the op's [program] version prints on this host, run
  // once per package (a framework upgrade means a new worker process). A
  // version that fails fails every config of the op on this host: its
  // failure is kept too, so that the rest of a sweep fails at once with the
  // same cause instead of running the command again per config (a timeout
  // is not kept: a loaded host may answer in time).
  Result<std::string> VersionDigest(const OpSpec& spec, const std::string& dir) {
    const std::string package = PackageDigest(spec.package);
    std::lock_guard<std::mutex> lock(version_mu_);
    auto known = versions_.find(package);
    if (known != versions_.end()) return known->second;
    ProgramProcess p;
    Status st = Start(p, spec.program->version, dir, program::DeviceEnvironment(device_, options_.cpus, options_.python_path), false);
    if (!st.ok()) return versions_.emplace(package, Status::Error("version: " + st.message())).first->second;
    const double deadline = NowSeconds() + spec.program->build_timeout_seconds;
    bool timed_out = false;
    const std::string out = OutputUntilExit(p, deadline, &timed_out);
    if (timed_out)
      return Status::Error("version: no answer within " + std::to_string(int(spec.program->build_timeout_seconds)) + " s");
    bool clean = false;
    const std::string how = p.Finish(deadline, &clean);
    if (!clean)
      return versions_.emplace(package, Status::Error("version: " + how + ": " + Tail(out + p.stderr_tail(), 400)))
          .first->second;
    return versions_.emplace(package, PackageDigest({{"version", out}})).first->second;
  }

  Measurement RunOnce(const OpSpec& spec, const std::string& dir, const program::Request& r) {
    ProgramProcess p;
    Measurement m;
    if (Status st = Start(p, spec.program->run, dir, Environment(r), false); !st.ok()) {
      m.failure = FailureClass::kLaunchError;
      m.failure_message = st.message();
      return m;
    }
    Outcome o;
    const double deadline = NowSeconds() + spec.program->timeout_seconds;
    for (std::string line;;) {
      const auto got = p.ReadLine(deadline, &line);
      if (got == ProgramProcess::ReadOutcome::kLine) {
        program::ReadLine(line, 0, &o);
        continue;
      }
      if (got == ProgramProcess::ReadOutcome::kTimeout) {
        p.Kill();
        return TimedOut(spec, p.stderr_tail());
      }
      break;
    }
    bool clean = false;
    const std::string how = p.Finish(NowSeconds() + 5, &clean);
    if (!clean) {
      m.failure = FailureClass::kCrash;
      m.failure_message = "the program ended with " + how + "\n" + Tail(p.stderr_tail(), kLogTailBytes);
      return m;
    }
    return program::ToMeasurement(o, spec.check.mode, Tail(p.stderr_tail(), kLogTailBytes));
  }

  Status EnsureServe(const OpSpec& spec) {
    const std::string digest = PackageDigest(spec.package);
    // A process that ended since its last answer (it may exit on purpose
    // after a lost CUDA context) is replaced before a request goes to it.
    if (serve_.running() && serve_.Exited()) serve_.Kill();
    if (serve_.running() && serve_digest_ == digest) return Status::OK();
    if (serve_.running()) serve_.Kill();
    auto dir = PackageDir(spec);
    if (!dir.ok()) return dir.status();
    std::vector<std::string> env = program::DeviceEnvironment(device_, options_.cpus, options_.python_path);
    env.push_back("TUNEFARM_OP=" + spec.name);
    TUNE_RETURN_IF_ERROR(Start(serve_, spec.program->serve, *dir, env, true));
    serve_digest_ = digest;
    serve_fresh_ = true;
    return Status::OK();
  }

  // A request the process ended on before saying anything is asked again of
  // a new process, once: a process gone between requests is not this
  // config's fault.
  Measurement AskServe(const OpSpec& spec, const program::Request& r) {
    bool silent = false;
    Measurement m = AskServeOnce(spec, r, &silent);
    if (!silent) return m;
    return AskServeOnce(spec, r, &silent);
  }

  Measurement AskServeOnce(const OpSpec& spec, const program::Request& r, bool* silent) {
    *silent = false;
    Measurement m;
    if (Status st = EnsureServe(spec); !st.ok()) {
      m.failure = FailureClass::kLaunchError;
      m.failure_message = st.message();
      return m;
    }
    // A new process may first import its framework and warm its compiler.
    const double deadline =
        NowSeconds() + spec.program->timeout_seconds + (serve_fresh_ ? spec.program->start_timeout_seconds : 0);
    serve_fresh_ = false;
    if (Status st = serve_.WriteLine(program::MeasureLine(r), 30); !st.ok()) {
      *silent = true;
      return Ended(st.message());
    }
    Outcome o;
    bool heard = false;
    for (std::string line;;) {
      const auto got = serve_.ReadLine(deadline, &line);
      if (got == ProgramProcess::ReadOutcome::kLine) {
        heard = true;
        if (program::ReadLine(line, r.id, &o)) break;
        continue;
      }
      if (got == ProgramProcess::ReadOutcome::kTimeout) {
        const std::string tail = serve_.stderr_tail();
        serve_.Kill();
        return TimedOut(spec, tail);
      }
      *silent = !heard && serve_.stderr_tail().empty();
      return Ended("its output ended");
    }
    return program::ToMeasurement(o, spec.check.mode, o.failure != FailureClass::kNone ? Tail(serve_.stderr_tail(), 2048) : "");
  }

  // The serve process is gone: the request is a crash, and the next one
  // starts a new process.
  Measurement Ended(const std::string& why) {
    bool clean = false;
    const std::string how = serve_.running() ? serve_.Finish(NowSeconds() + 5, &clean) : "not running";
    Measurement m;
    m.failure = FailureClass::kCrash;
    m.failure_message = "the serve process stopped answering (" + why + "; " + how + ")\n" +
                        Tail(serve_.stderr_tail(), kLogTailBytes);
    serve_.Kill();
    return m;
  }

  static Measurement TimedOut(const OpSpec& spec, const std::string& stderr_tail) {
    Measurement m;
    m.failure = FailureClass::kTimeout;
    m.failure_message = "no result within " + std::to_string(int(spec.program->timeout_seconds)) +
                        " s ([program] timeout); killed\n" + Tail(stderr_tail, kLogTailBytes);
    return m;
  }

  DeviceInfo device_;
  std::string toolchain_;
  ProgramBackendOptions options_;
  Status box_status_ = Status::OK();
  // What programs read and write (MakeBox, BoxRules).
  std::vector<std::string> no_access_, writable_;
  bool confined_ = false;
  bool private_shm_ = false;  // programs get a /dev/shm of their own
  bool hide_run_ = false;     // and the host's /run out of sight
  std::string tmp_dir_;
  std::mutex dir_mu_;
  std::map<std::string, std::string> dirs_;  // package digest -> folder
  std::mutex version_mu_;
  std::map<std::string, Result<std::string>> versions_;  // package digest -> VersionDigest or its failure
  std::atomic<uint64_t> next_id_{0};
  ProgramProcess serve_;
  std::string serve_digest_;
  bool serve_fresh_ = false;
};

}  // namespace

std::unique_ptr<Backend> MakeProgramBackend(const DeviceInfo& device, const std::string& toolchain,
                                            ProgramBackendOptions options) {
  return std::make_unique<ProgramBackend>(device, toolchain, std::move(options));
}

std::string ProgramBackendConfinement() { return confine::LandlockAbi() >= 1 ? "landlock" : "none"; }

program::BoxLimits DefaultProgramLimits() {
  program::BoxLimits l;
  l.max_file_bytes = uint64_t(4) << 30;
  l.max_open_files = 65536;
  l.max_processes = 1024;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  l.max_memory_bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : 0;
  return l;
}

std::vector<std::string> DefaultProtectedPaths() {
  std::vector<std::string> paths = {"/etc/tunefarm", "/var/lib/tunefarm"};
  std::error_code ec;
  const fs::path prefix = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  if (!ec && !prefix.empty() && prefix != "/" && prefix != "/usr") {
    paths.push_back((prefix / "etc" / "tunefarm").string());
    paths.push_back((prefix / "var" / "lib" / "tunefarm").string());
  }
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  if (xdg && *xdg) paths.push_back(std::string(xdg) + "/tunefarm");
  if (home && *home) paths.push_back(std::string(home) + "/.config/tunefarm");
  if (const char* key = std::getenv("TUNEFARM_SIGN_KEY"); key && *key) paths.push_back(key);
  return paths;
}

std::vector<std::string> ProgramCacheFolders() {
  // The frameworks' own cache folders: Triton, TileLang, cuTile, TVM, torch
  // (inductor keeps its cache under TMPDIR), and CUDA's JIT cache.
  static const char* const kHome[] = {".triton", ".tilelang", ".nv"};
  static const char* const kCache[] = {"triton", "tilelang", "cutile", "tvm", "torch"};
  // Where the worker's environment moves them (programs inherit these
  // variables: ProgramEnvironment), and the harness's log file.
  static const char* const kNamed[] = {"TRITON_CACHE_DIR", "TRITON_HOME", "TORCHINDUCTOR_CACHE_DIR",
                                       "CUDA_CACHE_PATH", "TILELANG_CACHE_DIR", "TUNEFARM_HARNESS_LOG"};
  const char* home = std::getenv("HOME");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  std::vector<std::string> dirs;
  if (home && *home && std::string(home) != "/") {
    for (const char* d : kHome) dirs.push_back(std::string(home) + "/" + d);
  }
  std::string cache = xdg && *xdg ? std::string(xdg) : home && *home && std::string(home) != "/" ? std::string(home) + "/.cache" : "";
  if (!cache.empty()) {
    for (const char* d : kCache) dirs.push_back(cache + "/" + d);
  }
  for (const char* name : kNamed) {
    const char* path = std::getenv(name);
    if (!path || *path != '/' || std::string(path) == "/") continue;
    // Triton keeps its folder beneath TRITON_HOME, not the folder itself.
    dirs.push_back(std::string(name) == "TRITON_HOME" ? std::string(path) + "/.triton" : std::string(path));
  }
  return dirs;
}

std::vector<std::string> ProgramEnvironment() {
  // Names, and prefixes ending in '*'. What programs need to find their
  // tools and devices, their locale, and their frameworks' settings.
  static const char* const kAllowed[] = {
      "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM",
      "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "XDG_CACHE_HOME",
      "CC", "CXX", "OMP_NUM_THREADS", "CUDA_*", "NVIDIA_*", "TRITON_*", "TILELANG_*", "TVM_*", "CUTILE_*",
      "TORCH_*", "TORCHINDUCTOR_*", "PYTORCH_*", "TUNEFARM_HARNESS_*"};
  std::set<std::string> extra;
  if (const char* more = std::getenv("TUNEFARM_PROGRAM_ENV"); more && *more) {
    std::string names(more);
    for (char& c : names)
      if (c == ',') c = ' ';
    std::istringstream list(names);
    for (std::string n; list >> n;) extra.insert(n);
  }
  auto allowed = [&](const std::string& name) {
    if (extra.count(name)) return true;
    for (const char* a : kAllowed) {
      const std::string rule(a);
      if (rule.back() == '*' ? name.compare(0, rule.size() - 1, rule, 0, rule.size() - 1) == 0 : name == rule)
        return true;
    }
    return false;
  };
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0 && allowed(kv.substr(0, eq))) env.push_back(kv);
  }
  return env;
}

std::string TunefarmPythonPath() {
  auto holds = [](const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / "tunefarm" / "__init__.py", ec);
  };
  if (const char* env = std::getenv("TUNEFARM_PYTHON"); env && *env && holds(env)) return env;
  std::error_code ec;
  // The file this code is in: the program, or the farm's library inside a
  // Python process (whose /proc/self/exe is python3).
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&TunefarmPythonPath), &info) && info.dli_fname && *info.dli_fname == '/')
    self = info.dli_fname;
  if (!self.empty()) {
    const fs::path above = self.parent_path().parent_path();
    for (const fs::path& dir : {above / "python", above / "share" / "tunefarm" / "python"})
      if (holds(dir)) return dir.string();
  }
  // A process started with the package on its PYTHONPATH (programs inherit it).
  if (const char* pp = std::getenv("PYTHONPATH"); pp && *pp) {
    std::istringstream list(pp);
    for (std::string dir; std::getline(list, dir, ':');)
      if (!dir.empty() && dir[0] == '/' && holds(dir)) return dir;
  }
#if defined(TUNEFARM_SOURCE_DIR) && defined(TUNEFARM_BUILD_DIR)
  // Only a binary still in its build tree: a moved or copied one would run
  // the harness of whatever tree sits at the path it was built from.
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path build = fs::weakly_canonical(TUNEFARM_BUILD_DIR, ec);
  const bool in_build = !ec && !build.empty() &&
                        std::mismatch(build.begin(), build.end(), exe.begin(), exe.end()).first == build.end();
  if (in_build && holds(fs::path(TUNEFARM_SOURCE_DIR) / "python"))
    return (fs::path(TUNEFARM_SOURCE_DIR) / "python").string();
#endif
  return "";
}

}  // namespace tune
