// Program ops (measure/program/program_backend.h): real processes under the program
// backend (run and serve modes, hostile programs), and a program op through
// a real coordinator and worker into a bundle.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <fstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "support/http_get.h"
#include "support/process.h"
#include "measure/confine.h"
#include "bundle/bundle.h"
#include "opspec/op_definition.h"
#include "measure/program/program_backend.h"
#include "store/result_store.h"
#include "base/text.h"

namespace fs = std::filesystem;
using tune::testing::Child;

namespace {

const std::string kOps = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops";

class ProgramBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tunefarm-prog-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    device_.model = "sim-h100";
    device_.backend = "sim";
    device_.cc_major = 9;
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  tune::ProgramBackendOptions Options(bool allowed = true, std::vector<std::string> protect = {}) {
    tune::ProgramBackendOptions o;
    o.work_dir = (dir_ / "work").string();
    o.allowed = allowed;
    o.cpus = 3;
    o.protected_paths = std::move(protect);
    o.allow_unconfined = true;  // confined where the kernel can; the box tests say when it cannot
    return o;
  }
  std::unique_ptr<tune::Backend> Backend(bool allowed = true, std::vector<std::string> protect = {},
                                         bool private_namespace = true) {
    tune::ProgramBackendOptions o = Options(allowed, std::move(protect));
    o.private_namespace = private_namespace;
    return tune::MakeProgramBackend(device_, "sim", o);
  }
  // An op of `files` (op.toml and the rest) written to a folder and loaded.
  tune::OpSpec Op(const std::map<std::string, std::string>& files) {
    const fs::path op = dir_ / ("op" + std::to_string(++ops_));
    for (const auto& [name, text] : files) {
      fs::create_directories((op / name).parent_path());
      std::ofstream(op / name) << text;
    }
    auto spec = tune::LoadOpSpec(op.string());
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    return spec.ok() ? *spec : tune::OpSpec{};
  }
  static tune::Config X(int64_t x) { return tune::Config{{{"X", x}}}; }
  static tune::Shape N(int64_t n) { return tune::Shape{{{"N", n}}}; }
  tune::Measurement Run(tune::Backend& b, const tune::OpSpec& spec, int64_t x) {
    tune::CompiledKernel k = b.Compile(spec, "f32", X(x));
    if (k.failure != tune::FailureClass::kNone) {
      tune::Measurement m;
      m.failure = k.failure;
      m.failure_message = k.failure_message + "\n" + k.log;
      return m;
    }
    return b.Measure(spec, "f32", k, N(1024), tune::TimingPolicy{}, 0);
  }

  fs::path dir_;
  tune::DeviceInfo device_;
  int ops_ = 0;
};

std::string RunOp(const std::string& extra = "") {
  return "[op]\nname = \"p\"\ndims = [\"N\"]\ndtypes = [\"f32\"]\ndefault = { X = 1 }\n"
         "[params]\nX = [1, 2, 3]\n[program]\nfiles = [\"run.sh\"]\nrun = \"sh run.sh\"\ntimeout = 2\n" +
         extra;
}

TEST_F(ProgramBackendTest, RunModeReadsJsonAndCroqTuneAnswers) {
  auto b = Backend();
  tune::OpSpec json = Op({{"op.toml", RunOp()},
                          {"run.sh", "echo chatter\necho '{\"tunefarm\": 1, \"check\": \"pass\", \"max_abs_err\": 0.25, "
                                     "\"samples_us\": [3, 1, 2], \"clock_mhz\": 1755}'\n"}});
  tune::Measurement m = Run(*b, json, 1);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_DOUBLE_EQ(m.median_us, 2);
  EXPECT_EQ(m.samples, 3u);
  EXPECT_DOUBLE_EQ(m.max_abs_error, 0.25);
  EXPECT_EQ(m.sm_clock_mhz, 1755);
  EXPECT_EQ(m.energy_uj, 0.0) << "no energy asked, none answered";

  // Energy figures beside the samples (timing.energy_seconds asked them).
  tune::OpSpec energy = Op({{"op.toml", RunOp()},
                            {"run.sh", "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [2], "
                                       "\"energy_uj\": 812.5, \"power_w\": 406.25, \"power_limit_w\": 700}'\n"}});
  m = Run(*b, energy, 4);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_DOUBLE_EQ(m.energy_uj, 812.5);
  EXPECT_DOUBLE_EQ(m.power_w, 406.25);
  EXPECT_DOUBLE_EQ(m.power_limit_w, 700);

  tune::OpSpec croq = Op({{"op.toml", RunOp()},
                          {"run.sh", "echo 'VERIFY: PASS max_abs_err=0.001'\n"
                                     "echo 'TFLOPS: 100.0 time_ms: 0.5'\necho 'TFLOPS: 90.0 time_ms: 0.7'\n"}});
  m = Run(*b, croq, 2);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_DOUBLE_EQ(m.median_us, 600);
  EXPECT_DOUBLE_EQ(m.max_abs_error, 0.001);
}

TEST_F(ProgramBackendTest, ItsEnvironmentCarriesConfigDimsDtypeDeviceAndTolerances) {
  auto b = Backend();
  tune::OpSpec spec = Op({{"op.toml", RunOp("[check]\nrtol = 0.5\n")},
                          {"run.sh",
                           "test \"$TUNEFARM_PARAM_X\" = 3 && test \"$TUNEFARM_DIM_N\" = 1024 && "
                           "test \"$TUNEFARM_DTYPE\" = f32 && test \"$TUNEFARM_GPU_MODEL\" = sim-h100 && "
                           "test \"$TUNEFARM_RTOL\" = 0.5 && test \"$TUNEFARM_CONFIG\" = X=3 && "
                           "test \"$TUNEFARM_CPUS\" = 3 && "
                           "test -d \"$TUNEFARM_BUILD_DIR\" && test -f run.sh || exit 9\n"
                           "echo 'VERIFY: PASS'; echo 'TFLOPS: 1 time_ms: 1'\n"}});
  tune::Measurement m = Run(*b, spec, 3);
  EXPECT_TRUE(m.Valid()) << m.failure_message;
}

TEST_F(ProgramBackendTest, HostileProgramsBecomeFailuresOfTheirClass) {
  auto b = Backend();
  struct Case {
    std::string script;
    tune::FailureClass want;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"echo 'VERIFY: FAIL max_abs_err=3'\necho 'TFLOPS: 1 time_ms: 1'\n", tune::FailureClass::kWrongResult,
       "VERIFY: FAIL"},
      {"echo 'VERIFY: PASS max_abs_err=nan'\necho 'TFLOPS: 1 time_ms: 1'\n", tune::FailureClass::kNan, "nan"},
      {"echo 'TFLOPS: 1 time_ms: 1'\n", tune::FailureClass::kWrongResult, "no check result"},
      {"echo 'VERIFY: PASS'\n", tune::FailureClass::kCrash, "no timing samples"},
      {"echo '{\"tunefarm\":1,\"check\":\"pass\",\"samples_us\":[1,-2]}'\n", tune::FailureClass::kCrash,
       "samples_us: -2"},
      {"echo '{\"tunefarm\":1,\"check\":\"pass\",\"samples_us\":[1e300]}'\n", tune::FailureClass::kCrash,
       "samples_us"},
      {"echo '{\"tunefarm\":1,\"check\":\"maybe\",\"samples_us\":[1]}'\n", tune::FailureClass::kCrash,
       "check = \"maybe\""},
      {"echo '{\"tunefarm\":1,\"failure\":\"resources\",\"message\":\"needs 300 KB\"}'\n",
       tune::FailureClass::kResources, "needs 300 KB"},
      {"echo '{\"tunefarm\":1,\"failure\":\"melted\"}'\n", tune::FailureClass::kCrash, "unknown failure class"},
      {"echo '{\"tunefarm\":1,\"check\":\"pass\",\"samples_us\":[1],\"power_w\":90000}'\n",
       tune::FailureClass::kCrash, "power_w that is not a finite number >= 0 and at most 5000 W"},
      {"echo '{\"tunefarm\":1,\"check\":\"pass\",\"samples_us\":[1],\"energy_uj\":\"lots\"}'\n",
       tune::FailureClass::kCrash, "energy_uj that is not a finite number >= 0"},
      {"echo 'VERIFY: PASS'; echo 'TFLOPS: 1 time_ms: 1'\necho 'out of memory' >&2; exit 3\n",
       tune::FailureClass::kCrash, "exit code 3"},
      {"echo nothing\n", tune::FailureClass::kCrash, "printed no result"},
      // A FAIL is never undone by a later PASS.
      {"echo 'VERIFY: FAIL'; echo 'VERIFY: PASS'; echo 'TFLOPS: 1 time_ms: 1'\n", tune::FailureClass::kWrongResult,
       "VERIFY: FAIL"},
      // Lines std::regex would recurse on for a megabyte, and nesting that
      // parsing and printing would: chatter, not answers.
      {"head -c 1000000 /dev/zero | tr '\\0' a | sed 's/^/VERIFY: PASS /'; echo\n"
       "head -c 100000 /dev/zero | tr '\\0' '[' ; echo\n",
       tune::FailureClass::kCrash, "printed no result"},
      {"printf '\\377\\376 VERIFY: FAIL \\377\\n'; echo 'TFLOPS: 1 time_ms: 1'\n", tune::FailureClass::kWrongResult,
       ""},
  };
  for (const Case& c : cases) {
    tune::OpSpec spec = Op({{"op.toml", RunOp()}, {"run.sh", c.script}});
    tune::Measurement m = Run(*b, spec, 1);
    EXPECT_EQ(m.failure, c.want) << c.script << "\n" << m.failure_message;
    EXPECT_NE(m.failure_message.find(c.message), std::string::npos) << c.script << "\n" << m.failure_message;
    EXPECT_FALSE(m.Valid());
    EXPECT_TRUE(tune::IsValidUtf8(m.failure_message));
  }
}

TEST_F(ProgramBackendTest, AnOpThatSkipsItsCheckGetsUncheckedRowsFromAProgramWithoutOne) {
  auto b = Backend();
  tune::OpSpec spec = Op({{"op.toml", RunOp("[check]\nskip = true\n")},
                          {"run.sh", "case \"$TUNEFARM_REQUEST\" in *'\"skip\":true'*) ;; *) exit 5 ;; esac\n"
                                     "echo 'TFLOPS: 1 time_ms: 0.5'\n"}});
  tune::Measurement m = Run(*b, spec, 1);
  EXPECT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_TRUE(m.unchecked);
  EXPECT_FALSE(m.check_passed);
  // A program that checks anyway is heard: its failure stands.
  tune::OpSpec failing = Op({{"op.toml", RunOp("[check]\nskip = true\n")},
                             {"run.sh", "echo 'VERIFY: FAIL'; echo 'TFLOPS: 1 time_ms: 0.5'\n"}});
  EXPECT_EQ(Run(*b, failing, 1).failure, tune::FailureClass::kWrongResult);
}

TEST_F(ProgramBackendTest, ARunPastItsTimeoutIsKilledWithEverythingItStarted) {
  auto b = Backend();
  const fs::path pidfile = dir_ / "work" / "child.pid";
  tune::OpSpec spec = Op({{"op.toml", RunOp()},
                          {"run.sh", "sleep 300 &\necho $! > " + pidfile.string() + "\nsleep 300\n"}});
  tune::Measurement m = Run(*b, spec, 1);
  EXPECT_EQ(m.failure, tune::FailureClass::kTimeout) << m.failure_message;
  EXPECT_NE(m.failure_message.find("[program] timeout"), std::string::npos);
  std::ifstream in(pidfile);
  pid_t child = 0;
  ASSERT_TRUE(in >> child);
  // The background sleep was in the program's process group: gone too.
  for (int i = 0; i < 100 && kill(child, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(kill(child, 0), 0) << "a process the program started outlived the kill";
}

// Whatever a program starts dies with its run, also what left its session
// (setsid -f): the box the program runs in is their subreaper.
TEST_F(ProgramBackendTest, WhatAProgramDetachesDiesWithItsRunAndItsTimeout) {
  auto b = Backend();
  for (bool times_out : {false, true}) {
    const fs::path pidfile = dir_ / "work" / (times_out ? "late.pid" : "done.pid");
    const std::string answer =
        "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n";
    tune::OpSpec spec = Op({{"op.toml", RunOp()},
                            {"run.sh", "setsid -f sh -c 'echo $$ > " + pidfile.string() + "; exec sleep 300'\n"
                                       "while [ ! -s " + pidfile.string() + " ]; do sleep 0.01; done\n" +
                                       (times_out ? std::string("sleep 300\n") : answer)}});
    tune::Measurement m = Run(*b, spec, 1);
    if (times_out) EXPECT_EQ(m.failure, tune::FailureClass::kTimeout) << m.failure_message;
    else EXPECT_TRUE(m.Valid()) << m.failure_message;
    std::ifstream in(pidfile);
    pid_t child = 0;
    ASSERT_TRUE(in >> child) << "the detached child never ran";
    // Dead and reaped: not even a zombie is left.
    for (int i = 0; i < 100 && kill(child, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_NE(kill(child, 0), 0) << "a process the program detached (setsid -f) outlived its run";
  }
}

// A program cannot read the worker's key files (protected paths), nor the
// worker's or the box's process through /proc, nor write the cubin cache;
// it still runs, writes its work folder and reads the rest of the host.
TEST_F(ProgramBackendTest, AProgramCannotReachTheWorkersKeysOrProcess) {
  if (tune::ProgramBackendConfinement() != "landlock") GTEST_SKIP() << "no Landlock in this kernel";
  fs::create_directories(dir_ / "keys");
  const fs::path key = dir_ / "keys" / "worker.key";
  std::ofstream(key) << "TUNEFARM-SECRET-KEY-7b1f\n";
  auto b = Backend(true, {key.string()});
  const std::string worker = std::to_string(getpid());
  // run.sh runs in a second sh (run = "sh run.sh"): the box is its
  // parent's parent.
  const fs::path tries_file = dir_ / "work" / "tries.txt";  // the work folder: writable
  const std::string script =
      "out=" + tries_file.string() + "\n"
      "box=$(awk '{print $4}' /proc/$PPID/stat)\n"
      "for f in " + key.string() + " /proc/$box/environ /proc/" + worker + "/environ /proc/" + worker +
      "/fd/0 /proc/" + worker + "/root" + key.string() + "; do\n"
      "  if cat \"$f\" >> $out 2>/dev/null; then echo \"read $f\" >> $out; else echo \"denied $f\" >> $out; fi\n"
      "done\n"
      "cat /etc/hostname > /dev/null && echo 'read host' >> $out\n"
      "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n";
  tune::OpSpec spec = Op({{"op.toml", RunOp()}, {"run.sh", script}});
  tune::Measurement m = Run(*b, spec, 1);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  std::ifstream in(tries_file);
  const std::string tries((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(tries.find("TUNEFARM-SECRET-KEY"), std::string::npos) << tries;
  EXPECT_EQ(tries.find("read "), tries.find("read host")) << tries;  // nothing but the host's plain files
  EXPECT_NE(tries.find("read host"), std::string::npos) << tries;
  EXPECT_NE(tries.find("denied /proc/" + worker + "/fd/0"), std::string::npos) << tries;
}

// The box grants what a run needs, not the home folder: a program writes
// its frameworks' caches there, but neither the home itself nor a store in
// it (the Debian package's service user has its home above the
// coordinator's store), and it can neither read nor write the store of the
// install it runs from (a relocatable install's var/lib/tunefarm).
TEST_F(ProgramBackendTest, AProgramWritesTheFrameworkCachesButNotTheHomeOrTheStore) {
  if (tune::ProgramBackendConfinement() != "landlock") GTEST_SKIP() << "no Landlock in this kernel";
  const fs::path home = dir_ / "home";
  fs::create_directories(home / "store");
  std::ofstream(home / "store" / "MANIFEST-000001") << "rows\n";
  // The running binary's prefix: build/tests/program_op_test -> build/.
  const fs::path prefix = fs::read_symlink("/proc/self/exe").parent_path().parent_path();
  const fs::path state = prefix / "var" / "lib" / "tunefarm";
  if (fs::exists(state)) GTEST_SKIP() << state << " exists: this test makes (and removes) a store there";
  // Removed afterwards, with the folders above it this test made.
  std::vector<fs::path> made;
  for (const fs::path& p : {prefix / "var", prefix / "var" / "lib", state, state / "store"})
    if (!fs::exists(p)) made.push_back(p);
  fs::create_directories(state / "store");
  std::ofstream(state / "store" / "MANIFEST-000001") << "STORE-ROWS-5c1e\n";
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";
  ::setenv("HOME", home.c_str(), 1);
  ::unsetenv("XDG_CACHE_HOME");
  auto b = Backend();
  const fs::path tries_file = dir_ / "work" / "tries.txt";
  const std::string script =
      "out=" + tries_file.string() + "\n"
      "for f in \"$HOME/planted\" \"$HOME/store/planted\" " + (state / "store" / "planted").string() + "; do\n"
      "  if (echo x > \"$f\") 2>/dev/null; then echo \"wrote $f\" >> $out; else echo \"refused $f\" >> $out; fi\n"
      "done\n"
      "cat " + (state / "store" / "MANIFEST-000001").string() + " >> $out 2>/dev/null\n"
      "echo cached > \"$HOME/.triton/probe\" && echo 'wrote cache' >> $out\n"
      "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n";
  tune::OpSpec spec = Op({{"op.toml", RunOp()}, {"run.sh", script}});
  tune::Measurement m = Run(*b, spec, 1);
  // Every framework cache of the list was made, so that its grant holds.
  const std::vector<std::string> caches = tune::ProgramCacheFolders();
  if (old_home) ::setenv("HOME", saved_home.c_str(), 1);
  else ::unsetenv("HOME");
  const std::string tries = tune::testing::ReadFile(tries_file.string());
  fs::remove(state / "store" / "MANIFEST-000001");
  for (auto p = made.rbegin(); p != made.rend(); ++p) fs::remove_all(*p);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_FALSE(fs::exists(home / "planted")) << tries;
  EXPECT_FALSE(fs::exists(home / "store" / "planted")) << tries;
  EXPECT_EQ(tries.find("wrote "), tries.find("wrote cache")) << tries;
  EXPECT_EQ(tries.find("STORE-ROWS"), std::string::npos) << tries;
  EXPECT_TRUE(fs::exists(home / ".triton" / "probe")) << tries;
  for (const std::string& cache : caches) {
    EXPECT_EQ(cache.rfind(home.string(), 0), 0u) << cache;
    EXPECT_TRUE(fs::is_directory(cache)) << cache;
  }
}

// A framework cache the worker's environment moves (TRITON_CACHE_DIR) and
// the harness's log ($TUNEFARM_HARNESS_LOG) are granted too, made when
// missing; their neighbours are not.
TEST_F(ProgramBackendTest, AProgramWritesTheCacheAndLogItsEnvironmentNames) {
  if (tune::ProgramBackendConfinement() != "landlock") GTEST_SKIP() << "no Landlock in this kernel";
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere / "logs");
  const fs::path cache = elsewhere / "triton-cache", log = elsewhere / "logs" / "harness.log";
  ::setenv("TRITON_CACHE_DIR", cache.c_str(), 1);
  ::setenv("TUNEFARM_HARNESS_LOG", log.c_str(), 1);
  auto b = Backend();
  const fs::path tries_file = dir_ / "work" / "tries.txt";
  const std::string script =
      "out=" + tries_file.string() + "\n"
      "echo cached > \"$TRITON_CACHE_DIR/probe\" && echo 'wrote cache' >> $out\n"
      "echo line >> \"$TUNEFARM_HARNESS_LOG\" && echo 'wrote log' >> $out\n"
      "(echo x > " + (elsewhere / "logs" / "other").string() + ") 2>/dev/null && echo 'wrote other' >> $out\n"
      "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n";
  tune::OpSpec spec = Op({{"op.toml", RunOp()}, {"run.sh", script}});
  tune::Measurement m = Run(*b, spec, 1);
  ::unsetenv("TRITON_CACHE_DIR");
  ::unsetenv("TUNEFARM_HARNESS_LOG");
  const std::string tries = tune::testing::ReadFile(tries_file.string());
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_NE(tries.find("wrote cache"), std::string::npos) << tries;
  EXPECT_NE(tries.find("wrote log"), std::string::npos) << tries;
  EXPECT_EQ(tries.find("wrote other"), std::string::npos) << tries;
  EXPECT_EQ(tune::testing::ReadFile(log.string()), "line\n");
  EXPECT_FALSE(fs::exists(elsewhere / "logs" / "other"));
}

// Each process gets a TMPDIR of its own (0700, TMP and TEMP too), removed
// with what it holds once the process is gone; one a killed worker left is
// removed when the next backend starts.
TEST_F(ProgramBackendTest, AProgramsTmpdirIsItsOwnAndGoesWithIt) {
  const fs::path leftover = dir_ / "work" / "tmp" / "999999999-AbCdEf";  // no such pid
  fs::create_directories(leftover / "deep");
  std::ofstream(leftover / "deep" / "big") << std::string(4096, 'x');
  auto b = Backend();
  EXPECT_FALSE(fs::exists(leftover));
  const fs::path seen = dir_ / "work" / "seen.txt";
  const std::string script =
      "test \"$TMP\" = \"$TMPDIR\" && test \"$TEMP\" = \"$TMPDIR\" || exit 7\n"
      "echo \"$TMPDIR $(stat -c %a \"$TMPDIR\")\" >> " + seen.string() + "\n"
      "mkdir -p \"$TMPDIR/a/b\" && head -c 100000 /dev/zero > \"$TMPDIR/a/b/file\" && chmod 000 \"$TMPDIR/a\"\n"
      "(sleep 30 > \"$TMPDIR/held\" &)\n"
      "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n";
  tune::OpSpec spec = Op({{"op.toml", RunOp()}, {"run.sh", script}});
  ASSERT_TRUE(Run(*b, spec, 1).Valid());
  ASSERT_TRUE(Run(*b, spec, 2).Valid());
  std::ifstream in(seen);
  std::string first, second, mode;
  ASSERT_TRUE(in >> first >> mode) << "the program saw no TMPDIR";
  EXPECT_EQ(mode, "700");
  ASSERT_TRUE(in >> second >> mode);
  EXPECT_NE(first, second);
  EXPECT_FALSE(fs::exists(first));
  EXPECT_FALSE(fs::exists(second));
  EXPECT_TRUE(fs::is_empty(dir_ / "work" / "tmp"));
}

// A program that forks without end, takes too much memory or writes too
// large a file is stopped, and the run's error says which bound it passed.
TEST_F(ProgramBackendTest, AProgramPastItsBoundsIsStopped) {
  tune::ProgramBackendOptions o = Options();
  o.limits.max_processes = 16;
  o.limits.max_memory_bytes = 64 << 20;
  o.limits.max_file_bytes = 1 << 20;
  auto b = tune::MakeProgramBackend(device_, "sim", o);
  const std::string answer = "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n";
  const std::string slow = RunOp();
  std::string op = slow;
  op.replace(op.find("timeout = 2"), 11, "timeout = 20");

  tune::OpSpec forks = Op({{"op.toml", op},
                           {"run.sh", "i=0\nwhile [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done\nwait\n" + answer}});
  tune::Measurement m = Run(*b, forks, 1);
  EXPECT_EQ(m.failure, tune::FailureClass::kCrash) << m.failure_message;
  EXPECT_NE(m.failure_message.find("processes or more (the box allows 16)"), std::string::npos) << m.failure_message;

  tune::OpSpec memory = Op({{"op.toml", op},
                            {"run.sh", "python3 -c \"import time; b = b'x' * (256 << 20); time.sleep(30)\"\n" + answer}});
  m = Run(*b, memory, 1);
  EXPECT_EQ(m.failure, tune::FailureClass::kCrash) << m.failure_message;
  EXPECT_NE(m.failure_message.find("pages resident"), std::string::npos) << m.failure_message;

  const fs::path big = dir_ / "work" / "big";
  tune::OpSpec file = Op({{"op.toml", op},
                          {"run.sh", "if head -c 3000000 /dev/zero > " + big.string() +
                                         "; then exit 5; fi\n" + answer}});
  m = Run(*b, file, 1);
  EXPECT_TRUE(m.Valid()) << m.failure_message;  // the write failed, the program went on
  EXPECT_EQ(fs::file_size(big), uint64_t(1) << 20);
}

// No TCP (Landlock ABI 4+) and no abstract unix socket of another process
// (ABI 6+): a listener of the worker's host is out of a program's reach.
TEST_F(ProgramBackendTest, AProgramCannotConnectToALocalListener) {
  const int abi = tune::confine::LandlockAbi();
  if (abi < 4) GTEST_SKIP() << "Landlock ABI " << abi << " < 4: this kernel cannot refuse programs TCP";
  const int tcp = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(tcp, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(tcp, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(tcp, 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(tcp, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  const std::string abstract = "tunefarm-test-" + std::to_string(getpid());
  const int unix_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(unix_fd, 0);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path + 1, abstract.data(), abstract.size());
  ASSERT_EQ(::bind(unix_fd, reinterpret_cast<sockaddr*>(&un), socklen_t(offsetof(sockaddr_un, sun_path) + 1 + abstract.size())), 0);
  ASSERT_EQ(::listen(unix_fd, 8), 0);
  auto b = Backend();
  const fs::path tries_file = dir_ / "work" / "tries.txt";
  const std::string script =
      "python3 - > " + tries_file.string() + " <<'PY'\n"
      "import socket\n"
      "for name, family, address in [('tcp', socket.AF_INET, ('127.0.0.1', " + std::to_string(port) + ")),\n"
      "                              ('abstract', socket.AF_UNIX, '\\0" + abstract + "')]:\n"
      "    try:\n"
      "        s = socket.socket(family, socket.SOCK_STREAM)\n"
      "        s.connect(address)\n"
      "        print(name, 'connected')\n"
      "    except OSError as e:\n"
      "        print(name, 'refused', e)\n"
      "PY\n"
      "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n";
  tune::OpSpec spec = Op({{"op.toml", RunOp("")}, {"run.sh", script}});
  tune::Measurement m = Run(*b, spec, 1);
  ::close(tcp);
  ::close(unix_fd);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  const std::string tries = tune::testing::ReadFile(tries_file.string());
  EXPECT_NE(tries.find("tcp refused"), std::string::npos) << tries;
  if (abi >= 6) EXPECT_NE(tries.find("abstract refused"), std::string::npos) << tries;
  else std::cout << "Landlock ABI " << abi << " < 6: abstract unix sockets stay reachable\n";
}

// No socket but unix ones (seccomp): UDP and netlink too, which Landlock
// does not cover; the host's /run (its daemons' sockets) and /dev/shm out
// of sight where the kernel allows a namespace of the program's own, with
// a /dev/shm of its own whose contents go with it (none at all otherwise).
TEST_F(ProgramBackendTest, AProgramHasNoSocketAndNoSightOfTheHostsSharedMemory) {
  if (tune::ProgramBackendConfinement() != "landlock") GTEST_SKIP() << "no Landlock in this kernel";
  const bool private_ns = tune::confine::CanMakePrivateShm();
  const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(udp, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(udp, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(udp, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  // A daemon's socket under /run (where this test may make one).
  const std::string path = "/run/tunefarm-test-" + std::to_string(getpid()) + ".sock";
  const int unix_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(unix_fd, 0);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof un.sun_path);
  std::memcpy(un.sun_path, path.data(), path.size());
  const bool listening = ::bind(unix_fd, reinterpret_cast<sockaddr*>(&un), sizeof un) == 0 && ::listen(unix_fd, 8) == 0;
  const std::string tag = std::to_string(getpid());
  const fs::path secret = "/dev/shm/tunefarm-secret-" + tag, left = "/dev/shm/tunefarm-left-" + tag;
  std::ofstream(secret) << "host secret";
  auto b = Backend();
  const fs::path tries_file = dir_ / "work" / "tries.txt";
  const std::string script =
      "python3 - > " + tries_file.string() + " <<'PY'\n"
      "import multiprocessing, socket\n"
      "for name, family, kind, address in [\n"
      "        ('udp', socket.AF_INET, socket.SOCK_DGRAM, ('127.0.0.1', " + std::to_string(ntohs(addr.sin_port)) + ")),\n"
      "        ('netlink', socket.AF_NETLINK, socket.SOCK_RAW, (0, 0)),\n"
      "        ('path', socket.AF_UNIX, socket.SOCK_STREAM, '" + path + "')]:\n"
      "    try:\n"
      "        s = socket.socket(family, kind)\n"
      "        s.connect(address)\n"
      "        s.send(b'x')\n"
      "        print(name, 'reached')\n"
      "    except OSError as e:\n"
      "        print(name, 'refused', e)\n"
      "try:\n"
      "    print('secret read', open('" + secret.string() + "').read())\n"
      "except OSError as e:\n"
      "    print('secret unseen', e)\n"
      "try:\n"
      "    open('" + left.string() + "', 'w').write('left')\n"
      "    multiprocessing.Semaphore().release()\n"
      "    print('shm usable')\n"
      "except OSError as e:\n"
      "    print('shm refused', e)\n"
      "PY\n"
      "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n";
  tune::OpSpec spec = Op({{"op.toml", RunOp("")}, {"run.sh", script}});
  tune::Measurement m = Run(*b, spec, 1);
  char byte = 0;
  const ssize_t got = ::recv(udp, &byte, 1, 0);
  ::close(udp);
  ::close(unix_fd);
  fs::remove(path);
  const bool left_behind = fs::exists(left);
  fs::remove(secret);
  fs::remove(left);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  const std::string tries = tune::testing::ReadFile(tries_file.string());
  EXPECT_NE(tries.find("udp refused"), std::string::npos) << tries;
  EXPECT_NE(tries.find("netlink refused"), std::string::npos) << tries;
  EXPECT_EQ(got, -1) << "a datagram reached the host";
  if (private_ns) {
    EXPECT_NE(tries.find("secret unseen"), std::string::npos) << tries;
    EXPECT_FALSE(left_behind) << "what a program wrote in /dev/shm outlived it on the host";
    EXPECT_NE(tries.find("shm usable"), std::string::npos) << tries;
    if (listening) EXPECT_NE(tries.find("path refused"), std::string::npos) << tries;
    else std::cout << "cannot listen under /run here: the hidden /run is not tried\n";
  } else {
    // Where the kernel refuses the namespace, the box is the host's.
    EXPECT_NE(tries.find("shm usable"), std::string::npos) << tries;
    std::cout << "no unprivileged user namespace here: programs share the host's /dev/shm and see /run\n" << tries;
  }
}

// A GPU is driven by ioctl on its device nodes (/dev/nvidia*): the box
// lets a program drive the devices it opens, whatever the namespace
// (Landlock ABI 5 handles device ioctls apart from reads and writes).
// /dev/null stands in for a GPU: TCGETS on it answers ENOTTY from the
// device, EACCES from a box that refuses device ioctls.
TEST_F(ProgramBackendTest, AProgramDrivesTheDevicesItOpensByIoctl) {
  if (tune::ProgramBackendConfinement() != "landlock") GTEST_SKIP() << "no Landlock in this kernel";
  for (const bool private_namespace : {false, true}) {
    SCOPED_TRACE(private_namespace ? "own namespace" : "host namespace");
    auto b = Backend(true, {}, private_namespace);
    const fs::path out = dir_ / "work" / ("ioctl-" + std::to_string(private_namespace) + ".txt");
    tune::OpSpec spec = Op({{"op.toml", RunOp()},
                            {"run.sh", "python3 - > " + out.string() + " <<'PY'\n"
                                       "import errno, fcntl, termios\n"
                                       "try:\n"
                                       "    fcntl.ioctl(open('/dev/null', 'rb'), termios.TCGETS, bytes(64))\n"
                                       "    print('ioctl answered')\n"
                                       "except OSError as e:\n"
                                       "    print('ioctl', errno.errorcode.get(e.errno, e.errno))\n"
                                       "PY\n"
                                       "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n"}});
    tune::Measurement m = Run(*b, spec, 1);
    ASSERT_TRUE(m.Valid()) << m.failure_message;
    const std::string said = tune::testing::ReadFile(out.string());
    EXPECT_NE(said.find("ioctl ENOTTY"), std::string::npos) << said;
  }
}

// A program sees the allow-listed part of the worker's environment (and
// what the operator names in TUNEFARM_PROGRAM_ENV), never the rest.
TEST_F(ProgramBackendTest, AProgramDoesNotSeeTheWorkersEnvironment) {
  ::setenv("WORKER_SECRET_TOKEN", "marker-9f3e", 1);
  ::setenv("OPERATOR_PASSED", "passed-41", 1);
  ::setenv("TUNEFARM_PROGRAM_ENV", "OPERATOR_PASSED", 1);
  auto b = Backend();
  const fs::path env_file = dir_ / "work" / "env.txt";
  tune::OpSpec spec = Op({{"op.toml", RunOp()},
                          {"run.sh", "env > " + env_file.string() + "\n"
                                     "echo '{\"tunefarm\": 1, \"check\": \"pass\", \"samples_us\": [3, 1, 2]}'\n"}});
  tune::Measurement m = Run(*b, spec, 1);
  ::unsetenv("WORKER_SECRET_TOKEN");
  ::unsetenv("OPERATOR_PASSED");
  ::unsetenv("TUNEFARM_PROGRAM_ENV");
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  const std::string env = tune::testing::ReadFile(env_file.string());
  EXPECT_EQ(env.find("marker-9f3e"), std::string::npos) << env;
  EXPECT_NE(env.find("OPERATOR_PASSED=passed-41"), std::string::npos) << env;
  EXPECT_NE(env.find("\nPATH="), std::string::npos) << env;
  EXPECT_NE(env.find("TUNEFARM_PARAM_X=1"), std::string::npos) << env;
}

TEST_F(ProgramBackendTest, AProgramThatNeverStopsPrintingStillTimesOut) {
  auto b = Backend();
  tune::OpSpec spec = Op({{"op.toml", RunOp()}, {"run.sh", "yes 'chatter that never ends' & yes 'more' >&2\n"}});
  tune::Measurement m = Run(*b, spec, 1);
  EXPECT_EQ(m.failure, tune::FailureClass::kTimeout) << m.failure_message.substr(0, 200);
}

TEST_F(ProgramBackendTest, ABuildRunsOncePerConfigAndItsFailureIsACompileErrorWithTheLog) {
  auto b = Backend();
  std::string toml = RunOp();
  toml.replace(toml.find("files = [\"run.sh\"]"), 18, "files = [\"run.sh\", \"build.sh\"]\nbuild = \"sh build.sh\"");
  tune::OpSpec spec = Op({{"op.toml", toml},
                          {"build.sh", "test \"$TUNEFARM_PARAM_X\" = 2 && { echo 'error: X=2 does not build'; exit 1; }\n"
                                       "echo built >> \"$TUNEFARM_BUILD_DIR/out\"\n"},
                          {"run.sh", "test -f \"$TUNEFARM_BUILD_DIR/out\" || exit 4\n"
                                     "echo 'VERIFY: PASS'; echo 'TFLOPS: 1 time_ms: 1'\n"}});
  tune::CompiledKernel first = b->Compile(spec, "f32", X(1));
  ASSERT_EQ(first.failure, tune::FailureClass::kNone) << first.failure_message << first.log;
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(b->Compile(spec, "f32", X(1)).from_cache);
  EXPECT_TRUE(b->Measure(spec, "f32", first, N(64), tune::TimingPolicy{}, 0).Valid());
  tune::CompiledKernel bad = b->Compile(spec, "f32", X(2));
  EXPECT_EQ(bad.failure, tune::FailureClass::kCompileError);
  EXPECT_NE(bad.failure_message.find("exit code 1"), std::string::npos) << bad.failure_message;
  EXPECT_NE(bad.log.find("X=2 does not build"), std::string::npos) << bad.log;
  // Kept: the next unit of the config is refused at once, with the same log.
  tune::CompiledKernel again = b->Compile(spec, "f32", X(2));
  EXPECT_EQ(again.failure, tune::FailureClass::kCompileError);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.failure_message, bad.failure_message);
  EXPECT_NE(again.log.find("X=2 does not build"), std::string::npos) << again.log;
}

// [program] version: what the host brings (a framework's version) is part of
// the kernel hash; two hosts that print differently measure two kernels.
TEST_F(ProgramBackendTest, WhatTheVersionCommandPrintsIsPartOfTheKernelHash) {
  std::string toml = RunOp();
  const fs::path version_file = dir_ / "version.txt";
  toml.replace(toml.find("timeout = 2"), 11, "timeout = 2\nversion = \"cat '" + version_file.string() + "'\"");
  tune::OpSpec spec = Op({{"op.toml", toml}, {"run.sh", "echo 'VERIFY: PASS'; echo 'TFLOPS: 1 time_ms: 1'\n"}});
  ASSERT_TRUE(spec.HostDigested());
  const std::string op_hash = tune::KernelHash(spec, "sim");
  auto hash_with = [&](const std::string& version) {
    std::ofstream(version_file) << version;
    tune::CompiledKernel k = Backend()->Compile(spec, "f32", X(1));  // a new backend: a new host
    EXPECT_EQ(k.failure, tune::FailureClass::kNone) << k.failure_message;
    EXPECT_EQ(k.kernel_hash, tune::KernelHashWithIncludes(op_hash, k.include_digest));
    return k.kernel_hash;
  };
  const std::string a = hash_with("torch 2.11 triton 3.6\n");
  EXPECT_EQ(hash_with("torch 2.11 triton 3.6\n"), a);
  EXPECT_NE(hash_with("torch 2.11 triton 3.7\n"), a);
  fs::remove(version_file);
  // A version command that fails fails the configs with its reason.
  tune::CompiledKernel k = Backend()->Compile(spec, "f32", X(1));
  EXPECT_EQ(k.failure, tune::FailureClass::kCompileError);
  EXPECT_NE(k.failure_message.find("version: "), std::string::npos) << k.failure_message;
}

TEST_F(ProgramBackendTest, AWorkerThatDoesNotAllowProgramsSaysHowToAllowThem) {
  auto b = Backend(/*allowed=*/false);
  tune::OpSpec spec = Op({{"op.toml", RunOp()}, {"run.sh", "touch ran\n"}});
  tune::CompiledKernel k = b->Compile(spec, "f32", X(1));
  EXPECT_EQ(k.failure, tune::FailureClass::kCompileError);
  EXPECT_NE(k.failure_message.find("--allow-programs"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "work"));
}

TEST_F(ProgramBackendTest, AServeProcessAnswersByIdAndIsRestartedAfterACrashOrATimeout) {
  auto spec = tune::LoadOpSpec(kOps + "/program_serve");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto b = Backend();
  std::vector<tune::Config> all;
  for (int x = 1; x <= 6; ++x) all.push_back(X(x));
  b->Plan(*spec, "f32", all, {N(1024)});
  auto measure = [&](int64_t x) {
    tune::CompiledKernel k = b->Compile(*spec, "f32", X(x));
    EXPECT_EQ(k.failure, tune::FailureClass::kNone) << k.failure_message;
    return b->Measure(*spec, "f32", k, N(1024), tune::TimingPolicy{}, 0);
  };
  tune::Measurement m = measure(1);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_DOUBLE_EQ(m.median_us, 11);
  m = measure(4);
  EXPECT_EQ(m.failure, tune::FailureClass::kCrash);
  EXPECT_NE(m.failure_message.find("X=4 crashes"), std::string::npos) << m.failure_message;
  m = measure(2);  // a new process
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_DOUBLE_EQ(m.median_us, 10);
  m = measure(6);
  EXPECT_EQ(m.failure, tune::FailureClass::kCrash);
  EXPECT_NE(m.failure_message.find("samples_us"), std::string::npos) << m.failure_message;
  m = measure(5);
  EXPECT_EQ(m.failure, tune::FailureClass::kTimeout) << m.failure_message;
  m = measure(3);
  ASSERT_TRUE(m.Valid()) << m.failure_message;
  EXPECT_DOUBLE_EQ(m.median_us, 11);
}

TEST_F(ProgramBackendTest, TheHarnessServesAPythonKernelModuleAndCompilesAheadInItsPool) {
  auto spec = tune::LoadOpSpec(kOps + "/harness_host");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const fs::path log = dir_ / "work" / "warm.log";  // the work folder: writable
  fs::create_directories(log.parent_path());
  setenv("HARNESS_WARM_LOG", log.c_str(), 1);
  setenv("TUNEFARM_PROGRAM_ENV", "HARNESS_WARM_LOG", 1);  // the operator's way to pass a variable
  unsetenv("TUNEFARM_HARNESS_JOBS");  // the pool's width from the device's share below
  tune::ProgramBackendOptions o;
  o.work_dir = (dir_ / "work").string();
  o.allowed = true;
  o.python_path = std::string(TUNEFARM_SOURCE_DIR) + "/python";
  o.cpus = 1;  // the device's share of the host: a pool of one process
  auto b = tune::MakeProgramBackend(device_, "sim", o);
  std::vector<tune::Config> all;
  for (int64_t scale : {1, 2, 3, 4}) all.push_back(tune::Config{{{"SCALE", scale}, {"UNROLL", 1}}});
  b->Plan(*spec, "f32", all, {N(2000)});
  std::map<int64_t, tune::Measurement> got;
  for (const tune::Config& c : all) {
    tune::CompiledKernel k = b->Compile(*spec, "f32", c);
    ASSERT_EQ(k.failure, tune::FailureClass::kNone) << k.failure_message;
    got[c.params[0].second.Number()] = b->Measure(*spec, "f32", k, N(2000), tune::TimingPolicy{}, 0);
  }
  ASSERT_TRUE(got[1].Valid()) << got[1].failure_message;
  ASSERT_TRUE(got[2].Valid()) << got[2].failure_message;
  EXPECT_GE(got[1].samples, 5u);
  EXPECT_LT(got[1].median_us, got[2].median_us);  // twice the work
  EXPECT_EQ(got[3].failure, tune::FailureClass::kWrongResult) << got[3].failure_message;
  EXPECT_NE(got[3].failure_message.find("outside rtol"), std::string::npos) << got[3].failure_message;
  EXPECT_EQ(got[4].failure, tune::FailureClass::kCompileError) << got[4].failure_message;
  EXPECT_NE(got[4].failure_message.find("SCALE=4: no such kernel"), std::string::npos);
  // The op's [baseline]: the module's baseline(dtype), checked and timed on
  // the same inputs, named with the version the module gives.
  ASSERT_TRUE(spec->baseline.has_value());
  tune::Measurement base = b->Measure(*spec, "f32", tune::BaselineKernel(*spec, "h"), N(2000), tune::TimingPolicy{}, 0);
  ASSERT_TRUE(base.Valid()) << base.failure_message;
  EXPECT_EQ(base.baseline, "host_loop host-loop-1");
  EXPECT_EQ(got[1].baseline, "");
  // Every planned config was warmed, in the pool's processes, not the server's.
  const std::string warmed = tune::testing::ReadFile(log.string());
  for (int scale : {1, 2, 3, 4})
    EXPECT_NE(warmed.find("warm SCALE=" + std::to_string(scale) + " "), std::string::npos) << warmed;
  std::string server;  // the harness's pid: it made the inputs
  std::vector<std::string> warmers;
  std::istringstream lines(warmed);
  for (std::string line; std::getline(lines, line);) {
    const std::string pid = line.substr(line.rfind("pid=") + 4);
    if (line.rfind("inputs ", 0) == 0) {
      server = pid;
    } else {
      warmers.push_back(pid);
    }
  }
  ASSERT_FALSE(server.empty()) << warmed;
  for (const std::string& pid : warmers) EXPECT_NE(pid, server) << warmed;
  EXPECT_EQ(std::set<std::string>(warmers.begin(), warmers.end()).size(), 1u) << warmed;
  unsetenv("HARNESS_WARM_LOG");
  unsetenv("TUNEFARM_PROGRAM_ENV");
}

TEST(ProgramOpSpec, ParsesAndRefusesWhatDoesNotApply) {
  auto good = tune::LoadOpSpec(kOps + "/program_sum");
  ASSERT_TRUE(good.ok()) << good.status().message();
  ASSERT_TRUE(good->program);
  EXPECT_EQ(good->program->run, "sh bench.sh");
  // A folder named in files arrives whole.
  EXPECT_EQ(good->package.count("lib/cost.sh"), 1u);
  EXPECT_NE(std::find(good->program->files.begin(), good->program->files.end(), "lib/cost.sh"),
            good->program->files.end());

  auto with = [&](const std::string& toml) {
    tune::OpPackage p = good->package;
    p["op.toml"] = toml;
    return tune::ParseOpSpec(p, "op");
  };
  const std::string head = "[op]\nname = \"p\"\ndims = [\"N\"]\ndtypes = [\"f32\"]\n";
  struct Bad {
    std::string toml, message;
  };
  const std::vector<Bad> bad = {
      {head + "[program]\nrun = \"a\"\nserve = \"b\"\n", "exactly one of run"},
      {head + "[program]\nbuild = \"a\"\n", "exactly one of run"},
      {head + "[program]\nrun = \"a\"\n[launch]\ngrid = [\"1\",\"1\",\"1\"]\nblock = [\"1\",\"1\",\"1\"]\n",
       "[launch]: does not apply to a program op"},
      {head + "[program]\nrun = \"a\"\nfiles = [\"missing.py\"]\n", "'missing.py' is not in the op folder"},
      {head + "[program]\nrun = \"a\"\ntimeout = 0\n", "[program] timeout"},
      {head + "[program]\nrun = \"a\"\n[check]\nreference = \"r.cu:r\"\n", "unknown field"},
      {head + "source = \"x.cu\"\n[program]\nrun = \"a\"\n", "[op] source: does not apply"},
  };
  for (const Bad& b : bad) {
    auto spec = with(b.toml);
    ASSERT_FALSE(spec.ok()) << b.toml;
    EXPECT_NE(spec.status().message().find(b.message), std::string::npos) << spec.status().message();
  }
  // The package's files and commands are the kernel's identity.
  tune::OpPackage changed = good->package;
  changed["lib/cost.sh"] += "\n";
  auto other = tune::ParseOpSpec(changed, "op");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(tune::KernelHash(*other, "13.0"), tune::KernelHash(*good, "13.0"));
}

// The whole path: a coordinator and a worker process, the op submitted from
// a folder, rows in the store, a bundle with the program's winners.
TEST(ProgramOpFarm, GoesThroughARealCoordinatorAndWorkerIntoABundle) {
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-progfarm-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string bin = TUNEFARM_BINARY;
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  auto path = [&](const std::string& n) { return (dir / n).string(); };
  std::ofstream(path("sweep.toml")) << "[sweep]\nname = \"prog\"\nops = [\"program_sum\"]\ndtypes = [\"f32\"]\n"
                                       "gpus = [\"*\"]\nshapes = [ { N = 1024 }, { N = 4096 } ]\n";
  {
    Child coordinator({bin, "coordinator", "--bind", endpoint, "--store", path("store"), "--heartbeat-ms", "200",
                       "--log-format", "json"},
                      path("coordinator.log"));
    Child worker({bin, "worker", "--connect", endpoint, "--backend", "sim", "--sim-models", "h100", "--cache-dir",
                  path("cache"), "--allow-programs"},
                 path("worker.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    Child submit({bin, "submit", path("sweep.toml"), "--coordinator", endpoint, "--ops-dir", kOps, "--wait"},
                 path("submit.log"));
    ASSERT_EQ(submit.Wait(120), 0) << tune::testing::ReadFile(path("submit.log"))
                                   << tune::testing::ReadFile(path("worker.log"));
    EXPECT_EQ(worker.Stop(), 0);
    EXPECT_EQ(coordinator.Stop(), 0) << tune::testing::ReadFile(path("coordinator.log"));
  }
  {
    auto store = tune::ResultStore::OpenReadOnly(path("store"));
    ASSERT_TRUE(store.ok()) << store.status().message();
    size_t rows = 0, wrong = 0;
    ASSERT_TRUE((*store)->Scan({"sim-h100", "program_sum", "f32", "", ""}, [&](const tune::Measurement& m) {
      ++rows;
      wrong += m.failure == tune::FailureClass::kWrongResult ? 1 : 0;
      if (m.config.params == tune::ParamValues{{"X", 4}, {"Y", 1}}) {
        EXPECT_FALSE(m.Valid());
      }
      return true;
    }).ok());
    EXPECT_GE(rows, 16u);  // 8 configs x 2 shapes (and refined rows replace theirs)
    EXPECT_EQ(wrong, 4u);
  }
  {
    // The coordinator's log is JSON lines, each event with its context:
    // every line, the first ("serving") too.
    std::stringstream log(tune::testing::ReadFile(path("coordinator.log")));
    bool accepted = false, hello = false;
    for (std::string line; std::getline(log, line);) {
      if (line.empty()) continue;
      ASSERT_EQ(line[0], '{') << "not a JSON line: " << line;
      auto j = nlohmann::json::parse(line, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << line;
      EXPECT_EQ(j["component"], "coordinator") << line;
      accepted = accepted || (j["message"] == "sweep accepted" && j.contains("sweep"));
      hello = hello || (j["message"] == "hello" && j.contains("worker"));
    }
    EXPECT_TRUE(accepted && hello) << tune::testing::ReadFile(path("coordinator.log"));
  }
  Child publish({bin, "publish", "--store", path("store"), "--out", path("b"), "--unsigned"}, path("publish.log"));
  ASSERT_EQ(publish.Wait(60), 0) << tune::testing::ReadFile(path("publish.log"));
  auto bundle = tune::ReadBundleFile(path("b.tfb"));
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  ASSERT_EQ(bundle->entries.size(), 2u);
  for (const auto& e : bundle->entries) EXPECT_EQ(e.config.Canonical(), "X=3,Y=2") << e.shape.Canonical();
  EXPECT_TRUE(bundle->launch_plans.empty());
  // The op's buckets travel with it: N = 3000 finds the config tuned at 4096.
  ASSERT_EQ(bundle->buckets.count("program_sum"), 1u);
  EXPECT_EQ(bundle->buckets.at("program_sum").at("N").kind, tune::DimBucket::Kind::kPow2);
  // So do its shape rules, which lookups hold nearest-shape answers to.
  ASSERT_EQ(bundle->shape_rules.count("program_sum"), 1u);
  EXPECT_EQ(bundle->shape_rules.at("program_sum").rules.at(0).text, "X*256 <= N");
  EXPECT_NE(tune::testing::ReadFile(path("publish.log")).find("program op"), std::string::npos);
  fs::remove_all(dir);
}


// Rows of an op whose hosts add to its kernel hash ([program] version) are
// reused by a later sweep while the worker's digest is the one they were
// measured under, and measured again once it is not.
TEST(ProgramOpFarm, RowsUnderTheWorkersHostDigestAreReusedUntilItChanges) {
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-progreuse-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "ops");
  fs::copy(kOps + "/program_sum", dir / "ops" / "program_sum", fs::copy_options::recursive);
  {
    std::string toml = tune::testing::ReadFile((dir / "ops/program_sum/op.toml").string());
    toml.replace(toml.find("timeout = 20"), 12,
                 "timeout = 20\nversion = \"cat '" + (dir / "version.txt").string() + "'\"");
    std::ofstream((dir / "ops/program_sum/op.toml").string()) << toml;
  }
  const std::string bin = TUNEFARM_BINARY;
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  auto path = [&](const std::string& n) { return (dir / n).string(); };
  std::ofstream(path("sweep.toml")) << "[sweep]\nname = \"reuse\"\nops = [\"program_sum\"]\ndtypes = [\"f32\"]\n"
                                       "gpus = [\"*\"]\nshapes = [ { N = 1024 }, { N = 4096 } ]\n";
  // Each row's (digest, sweep) by (config, shape).
  using Rows = std::map<std::string, std::pair<std::string, std::string>>;
  auto rows = [&]() {
    Rows out;
    auto store = tune::ResultStore::OpenReadOnly(path("store"));
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return out;
    EXPECT_TRUE((*store)->Scan({"sim-h100", "program_sum", "f32", "", ""}, [&](const tune::Measurement& m) {
      out[m.config_id + " " + m.shape + " " + m.include_digest] = {m.include_digest, m.sweep_id};
      return true;
    }).ok());
    return out;
  };
  // One sweep on a worker that prints `version`, through a coordinator on
  // the same store.
  // The coordinator's count of configs reused on each worker's word, as
  // /api/workers and /metrics show it once the sweep is done.
  std::string reuse_status, reuse_metrics;
  auto sweep = [&](const std::string& version, int n) {
    std::ofstream(path("version.txt")) << version;
    const std::string tag = std::to_string(n);
    const int http = tune::testing::FreePort();
    Child coordinator({bin, "coordinator", "--bind", endpoint, "--store", path("store"), "--heartbeat-ms", "200",
                       "--log-level", "debug", "--http-port", std::to_string(http)},
                      path("coordinator" + tag + ".log"));
    Child worker({bin, "worker", "--connect", endpoint, "--backend", "sim", "--sim-models", "h100", "--cache-dir",
                  path("cache"), "--allow-programs", "--log-level", "debug", "--log-format", "json", "--name",
                  "reuser"},
                 path("worker" + tag + ".log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    Child submit({bin, "submit", path("sweep.toml"), "--coordinator", endpoint, "--ops-dir", path("ops"), "--wait"},
                 path("submit" + tag + ".log"));
    EXPECT_EQ(submit.Wait(120), 0) << tune::testing::ReadFile(path("submit" + tag + ".log"))
                                   << tune::testing::ReadFile(path("worker" + tag + ".log"));
    // The pages are rebuilt every second: polled until they show the
    // reuse (a sweep without any never does; 40 tries at most).
    reuse_status = reuse_metrics = "";
    for (int i = 0; i < 40; ++i) {
      reuse_status = tune::testing::HttpGet(http, "/api/workers");
      reuse_metrics = tune::testing::HttpGet(http, "/metrics");
      if (reuse_metrics.find("tunefarm_rows_reused_total{") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_EQ(worker.Stop(), 0);
    EXPECT_EQ(coordinator.Stop(), 0);
    return tune::testing::ReadFile(path("worker" + tag + ".log"));
  };
  sweep("framework 1.0\n", 1);
  const Rows first = rows();
  ASSERT_EQ(first.size(), 16u);  // 8 configs x 2 shapes, under one digest
  // The same host again: nothing is measured, every row stays the first sweep's.
  const std::string log2 = sweep("framework 1.0\n", 2);
  EXPECT_EQ(rows(), first);
  size_t reused = 0;
  std::stringstream lines(log2);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("message", "") == "unit") reused += j.value("reused", size_t(0));
  }
  EXPECT_EQ(reused, 16u) << log2;
  // Reuse rests on the worker's word for its host digest: the coordinator
  // counts it by worker.
  EXPECT_NE(reuse_metrics.find("tunefarm_rows_reused_total{worker=\"reuser\"} 16"), std::string::npos)
      << reuse_metrics;
  {
    const size_t body = reuse_status.find("\r\n\r\n");
    const auto j = nlohmann::json::parse(body == std::string::npos ? reuse_status : reuse_status.substr(body + 4),
                                         nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << reuse_status;
    EXPECT_EQ(j["reused_by_worker"].value("reuser", 0), 16) << reuse_status;
    ASSERT_EQ(j["workers"].size(), 1u) << reuse_status;
    EXPECT_EQ(j["workers"][0].value("reused", 0), 16) << reuse_status;
  }
  // The host's framework changed: every pair is measured again under its new
  // digest, beside the old rows.
  sweep("framework 1.1\n", 3);
  const Rows third = rows();
  EXPECT_EQ(third.size(), 32u);
  std::set<std::string> digests;
  for (const auto& [key, row] : third) digests.insert(row.first);
  EXPECT_EQ(digests.size(), 2u);
  fs::remove_all(dir);
}

}  // namespace
