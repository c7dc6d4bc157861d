// The backend's side of a runner process (measure/runner/runner_client.h),
// the same for every vendor, against a real runner process over the host
// device (support/host_runner_main.cc): hello, packages and images sent once,
// and every way a runner process can end (abort, hang, lost device, a
// program that is not there, a different device) as a failed Measurement
// with the next runner started.
#include <gtest/gtest.h>

#include "measure/runner/runner_client.h"
#include "support/host_vadd.h"

namespace tune {
namespace {

using runner::RunnerClient;
using runner::RunnerClientOptions;

class RunnerClientTest : public ::testing::Test {
 protected:
  static RunnerClientOptions Options() {
    RunnerClientOptions o;
    o.exe = TUNEFARM_HOST_RUNNER;
    o.device_label = "host device 0";
    o.device_name = "host memory (test device)";
    o.startup_timeout_seconds = 60;
    return o;
  }

  // vadd at N = 1000 with `kernel` as its image, through `client`.
  Measurement Measure(RunnerClient& client, const std::string& kernel, double timeout_seconds = 60) {
    OpSpec spec;
    spec.origin = "test:vadd";
    spec.package = testing::VaddPackage();
    runner::MeasureRequest req;
    req.dtype = "f32";
    req.config.params = {{"BLOCK", ParamValue(int64_t(128))}};
    req.config_id = req.config.Id();
    req.shape.dims = {{"N", 1000}};
    req.image_key = kernel;
    req.policy.max_seconds = 0.05;
    req.policy.min_samples = 3;
    req.policy.max_samples = 10;
    req.policy.timeout_seconds = timeout_seconds;
    const std::string image = testing::HostImage({{"vadd", kernel}});
    Measurement m;
    m.config_id = req.config_id;
    return client.Measure(spec, std::move(req), runner::RunnerImages{&image, nullptr}, false, std::move(m));
  }
};

TEST_F(RunnerClientTest, AConfigIsCheckedAndTimedInTheRunnerProcess) {
  RunnerClient client(Options());
  EXPECT_EQ(client.stats().pid, 0) << "no runner before it is asked for";
  const Measurement m = Measure(client, "vadd");
  EXPECT_EQ(m.failure, FailureClass::kNone) << m.failure_message;
  EXPECT_GE(m.samples, 3u);
  EXPECT_GT(m.median_us, 0.0);
  Config block;
  block.params = {{"BLOCK", ParamValue(int64_t(128))}};
  EXPECT_EQ(m.config_id, block.Id()) << "the caller's key fields stay";
  const int pid = client.stats().pid;
  EXPECT_GT(pid, 0);
  // The next config runs on the same runner, which holds the op already.
  EXPECT_EQ(Measure(client, "vadd_wrong").failure, FailureClass::kWrongResult);
  EXPECT_EQ(client.stats().pid, pid);
  EXPECT_EQ(client.stats().spawns, 1);
  EXPECT_EQ(client.stats().crashes, 0);
}

TEST_F(RunnerClientTest, ARunnerThatDiesIsACrashAndTheNextOneServes) {
  RunnerClient client(Options());
  const Measurement m = Measure(client, "vadd_abort");
  EXPECT_EQ(m.failure, FailureClass::kCrash);
  EXPECT_NE(m.failure_message.find("runner for host device 0 died while running the config"), std::string::npos)
      << m.failure_message;
  EXPECT_NE(m.failure_message.find("signal 6"), std::string::npos) << m.failure_message;
  EXPECT_EQ(client.stats().crashes, 1);
  // The next runner was started at once; it serves the next config whole
  // (the op package sent again).
  EXPECT_EQ(Measure(client, "vadd").failure, FailureClass::kNone);
  EXPECT_EQ(client.stats().spawns, 2);
}

TEST_F(RunnerClientTest, AConfigPastItsLimitIsKilledAsATimeout) {
  RunnerClient client(Options());
  const Measurement m = Measure(client, "vadd_hang", 0.5);
  EXPECT_EQ(m.failure, FailureClass::kTimeout);
  EXPECT_NE(m.failure_message.find("config ran longer than 0.5 s; runner killed"), std::string::npos)
      << m.failure_message;
  EXPECT_EQ(client.stats().timeouts, 1);
  EXPECT_EQ(Measure(client, "vadd").failure, FailureClass::kNone);
}

TEST_F(RunnerClientTest, ALostDeviceIsReportedAndTheRunnerRestarted) {
  RunnerClient client(Options());
  const Measurement m = Measure(client, "vadd_crash");
  EXPECT_EQ(m.failure, FailureClass::kCrash);
  EXPECT_NE(m.failure_message.find("illegal address (planted)"), std::string::npos) << m.failure_message;
  EXPECT_NE(m.failure_message.find("exit code 3"), std::string::npos) << m.failure_message;
  EXPECT_NE(m.failure_message.find("; restarted]"), std::string::npos) << m.failure_message;
  EXPECT_EQ(client.stats().crashes, 1);
  EXPECT_EQ(Measure(client, "vadd").failure, FailureClass::kNone);
}

TEST_F(RunnerClientTest, ARunnerThatCannotStartSaysWhy) {
  RunnerClientOptions missing = Options();
  missing.exe = "/nonexistent/runner";
  RunnerClient absent(missing);
  const Status s = absent.EnsureReady();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("runner for host device 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("exit code 127"), std::string::npos) << s.message();
  EXPECT_EQ(Measure(absent, "vadd").failure, FailureClass::kCrash);

  RunnerClientOptions other = Options();
  other.device_name = "another device";
  RunnerClient elsewhere(other);
  const Status t = elsewhere.EnsureReady();
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("it sees 'host memory (test device)', expected 'another device'"), std::string::npos)
      << t.message();
}

}  // namespace
}  // namespace tune
