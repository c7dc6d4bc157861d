// The runner (measure/runner/) over a second DeviceApi: host memory with
// C++ kernels (support/host_device.h). The same runner, protocol, problem
// cache, checker and timing loop that serve a GPU serve this device here, so
// the seam between the runner and the device layer is tested without one.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <set>
#include <thread>

#include "measure/runner/host_data.h"
#include "measure/runner/runner.h"
#include "support/host_vadd.h"

namespace tune {
namespace {

using device::DeviceError;
using device::DeviceStatus;
using testing::HostDevice;
using testing::HostImage;
using testing::HostKernel;
using testing::HostLaunch;
using testing::HostToolchain;
using testing::VaddKernels;
using testing::kVaddOpToml;

// A runner on a HostDevice, served on its own thread over a socket pair,
// and the backend's side of the protocol.
class HostRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int to_runner[2], from_runner[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, to_runner), 0);
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, from_runner), 0);
    out_ = to_runner[0];
    in_ = from_runner[0];
    runner_in_ = to_runner[1];
    runner_out_ = from_runner[1];
    serving_ = std::thread([this] {
      runner::Runner r(device_, toolchain_, 0, runner_in_, runner_out_);
      exit_code_ = r.Serve();
      ::shutdown(runner_out_, SHUT_RDWR);
    });
    runner::WireWriter init(runner::MsgType::kInit);
    init.U32(runner::kRunnerProtocolVersion);
    init.Str("");  // no image cache
    init.U32(0);   // no include roots
    ASSERT_TRUE(runner::WriteFrame(out_, init.bytes()).ok());
    auto hello = runner::ReadFrame(in_);
    ASSERT_TRUE(hello.ok()) << hello.status().message();
    runner::WireReader h(*hello);
    ASSERT_EQ(h.Type(), runner::MsgType::kHello);
    EXPECT_EQ(h.U32(), runner::kRunnerProtocolVersion);
    ASSERT_EQ(h.U8(), 1) << h.Str();
    h.Str();
    EXPECT_EQ(runner::DecodeDeviceInfo(&h).name, device_.Info().name);

    runner::WireWriter w(runner::MsgType::kPackage);
    runner::EncodePackage("digest-vadd", "test:vadd", testing::VaddPackage(), &w);
    ASSERT_TRUE(runner::WriteFrame(out_, w.bytes()).ok());
  }
  void TearDown() override {
    ::shutdown(out_, SHUT_RDWR);
    serving_.join();
    for (int fd : {out_, in_, runner_in_, runner_out_}) ::close(fd);
  }

  // Measures vadd with `kernel` as its image at N = n; `fatal` says whether
  // the runner must exit after the answer.
  Measurement Measure(const std::string& kernel, int64_t n = 1000, int64_t block = 128, bool* fatal = nullptr,
                      runner::MeasureRequest* tweak = nullptr) {
    runner::MeasureRequest req = tweak ? *tweak : runner::MeasureRequest{};
    if (req.package_digest.empty()) req.package_digest = "digest-vadd";
    req.dtype = "f32";
    req.config.params = {{"BLOCK", ParamValue(block)}};
    req.config_id = req.config.Id();
    req.shape.dims = {{"N", n}};
    req.image_key = kernel + "@" + std::to_string(block);
    req.image = HostImage({{"vadd", kernel}});
    req.policy.max_seconds = 0.05;
    req.policy.min_samples = 5;
    req.policy.max_samples = 20;  // each sample follows an 8 MiB flush
    runner::WireWriter w(runner::MsgType::kMeasure);
    runner::EncodeMeasureRequest(req, &w);
    EXPECT_TRUE(runner::WriteFrame(out_, w.bytes()).ok());
    for (;;) {
      auto frame = runner::ReadFrame(in_);
      if (!frame.ok()) {
        ADD_FAILURE() << frame.status().message();
        return {};
      }
      runner::WireReader r(*frame);
      const runner::MsgType type = r.Type();
      if (type == runner::MsgType::kStarted) continue;
      EXPECT_EQ(type, runner::MsgType::kResult);
      Measurement m = runner::DecodeMeasurement(&r);
      const bool f = r.U8() != 0;
      if (fatal) *fatal = f;
      EXPECT_TRUE(r.ok());
      return m;
    }
  }

  HostDevice device_{VaddKernels()};
  HostToolchain toolchain_;
  std::thread serving_;
  int out_ = -1, in_ = -1, runner_in_ = -1, runner_out_ = -1;
  int exit_code_ = -1;
};

TEST_F(HostRunnerTest, ACorrectKernelIsCheckedAndTimed) {
  Measurement m = Measure("vadd");
  EXPECT_EQ(m.failure, FailureClass::kNone) << m.failure_message;
  EXPECT_TRUE(m.check_passed);
  EXPECT_FALSE(m.unchecked);
  EXPECT_EQ(m.max_abs_error, 0.0);
  EXPECT_GE(m.samples, 5u);
  EXPECT_GT(m.median_us, 0.0);
  EXPECT_LE(m.min_us, m.median_us);
  // The device's attributes and occupancy reach the row.
  EXPECT_EQ(m.resources.registers, 32);
  EXPECT_EQ(m.resources.max_threads_per_block, 1024);
  EXPECT_GT(m.resources.occupancy, 0.0);
  // The reference ran once for the problem; fills and compares ran on the
  // host, the builtin kernels having no image for this device.
  EXPECT_EQ(device_.Launches("vadd_ref"), 1);
  EXPECT_GE(toolchain_.builtin_compiles, 1);

  // The same problem again: cached, its reference not run again.
  Measurement again = Measure("vadd", 1000, 256);
  EXPECT_TRUE(again.check_passed) << again.failure_message;
  EXPECT_EQ(device_.Launches("vadd_ref"), 1);
  // A new shape is a new problem.
  EXPECT_TRUE(Measure("vadd", 4096).check_passed);
  EXPECT_EQ(device_.Launches("vadd_ref"), 2);
}

TEST_F(HostRunnerTest, WrongResultsAreFailuresWithTheirPlace) {
  Measurement wrong = Measure("vadd_wrong");
  EXPECT_EQ(wrong.failure, FailureClass::kWrongResult);
  EXPECT_NE(wrong.failure_message.find("first at y[999]"), std::string::npos) << wrong.failure_message;
  EXPECT_GT(wrong.mismatch_ratio, 0.0);
  EXPECT_FALSE(wrong.check_passed);

  Measurement overrun = Measure("vadd_overrun");
  EXPECT_EQ(overrun.failure, FailureClass::kWrongResult);
  EXPECT_NE(overrun.failure_message.find("wrote past the end of y"), std::string::npos) << overrun.failure_message;

  Measurement nan = Measure("vadd_nan");
  EXPECT_EQ(nan.failure, FailureClass::kNan);
  EXPECT_NE(nan.failure_message.find("NaN"), std::string::npos) << nan.failure_message;

  // The checked buffers were restored: a correct kernel still passes.
  Measurement fine = Measure("vadd");
  EXPECT_TRUE(fine.check_passed) << fine.failure_message;
}

TEST_F(HostRunnerTest, ABlockOverTheKernelsLimitIsAResourceFailure) {
  Measurement m = Measure("vadd_small", 1000, 128);
  EXPECT_EQ(m.failure, FailureClass::kResources);
  EXPECT_NE(m.failure_message.find("exceeds the kernel's limit of 64"), std::string::npos) << m.failure_message;
  EXPECT_EQ(device_.Launches("vadd_small"), 0);
  EXPECT_TRUE(Measure("vadd_small", 1000, 64).check_passed);
}

TEST_F(HostRunnerTest, TimingRotatesOverPlacements) {
  runner::MeasureRequest req;
  req.policy.placements = 3;
  Measurement m = Measure("vadd", 1000, 128, nullptr, &req);
  ASSERT_TRUE(m.check_passed) << m.failure_message;
  std::set<uint64_t> xs(device_.FirstParams("vadd").begin(), device_.FirstParams("vadd").end());
  EXPECT_EQ(xs.size(), 3u);  // the checked placement and two spares

  req.policy.new_buffers = true;
  Measurement moved = Measure("vadd", 1000, 128, nullptr, &req);
  ASSERT_TRUE(moved.check_passed) << moved.failure_message;
  std::set<uint64_t> after(device_.FirstParams("vadd").begin(), device_.FirstParams("vadd").end());
  EXPECT_GT(after.size(), xs.size());  // new buffers, inputs copied: the check still passes
}

// An op timed hot ([op] timing, a sweep's override): no flush before a
// sample, and every sample on one set of buffers, so that what a sample
// leaves in L2 the next one reads. Cold: a flush before each, placements
// rotated.
TEST_F(HostRunnerTest, AHotOpIsTimedWithoutFlushesOnOneSetOfBuffers) {
  constexpr size_t kFlush = 4 << 20;  // the flush buffer is 8 MiB or more; no other fill is this large
  runner::MeasureRequest req;
  req.policy.placements = 3;
  const Measurement cold = Measure("vadd", 1000, 128, nullptr, &req);
  ASSERT_TRUE(cold.check_passed) << cold.failure_message;
  EXPECT_GE(device_.FillsOfAtLeast(kFlush), int(cold.samples));
  EXPECT_EQ(std::set<uint64_t>(device_.FirstParams("vadd").begin(), device_.FirstParams("vadd").end()).size(), 3u);

  auto hot = WithTiming({{"op.toml", kVaddOpToml}, {"vadd.cu", "//\n"}, {"reference.cu", "//\n"}}, L2Timing::kHot);
  ASSERT_TRUE(hot.ok()) << hot.status().message();
  runner::WireWriter w(runner::MsgType::kPackage);
  runner::EncodePackage("digest-vadd-hot", "test:vadd-hot", *hot, &w);
  ASSERT_TRUE(runner::WriteFrame(out_, w.bytes()).ok());
  const int flushes = device_.FillsOfAtLeast(kFlush);
  const size_t launched = device_.FirstParams("vadd").size();
  req.package_digest = "digest-vadd-hot";
  const Measurement m = Measure("vadd", 1000, 128, nullptr, &req);
  ASSERT_TRUE(m.check_passed) << m.failure_message;
  EXPECT_GT(m.samples, 0u);
  EXPECT_EQ(device_.FillsOfAtLeast(kFlush), flushes) << "a hot op's samples follow no flush";
  const std::vector<uint64_t>& xs = device_.FirstParams("vadd");
  ASSERT_GT(xs.size(), launched);
  // The check runs on placement 0, and every timed sample after it too.
  EXPECT_EQ(std::set<uint64_t>(xs.begin() + std::ptrdiff_t(launched), xs.end()).size(), 1u);
}

// vadd with [check] default = true: no reference kernel; every config is
// compared with the default config's outputs.
std::string DefaultCheckedToml() {
  std::string toml = kVaddOpToml;
  const size_t check = toml.find("[check]");
  return toml.substr(0, check) + "[check]\ndefault = true\natol = 1e-5\nrtol = 1e-5\n";
}

TEST_F(HostRunnerTest, WithoutAReferenceConfigsAreCheckedAgainstTheDefaultConfig) {
  runner::WireWriter w(runner::MsgType::kPackage);
  runner::EncodePackage("digest-vadd-default", "test:vadd-default",
                        {{"op.toml", DefaultCheckedToml()}, {"vadd.cu", "//\n"}}, &w);
  ASSERT_TRUE(runner::WriteFrame(out_, w.bytes()).ok());
  runner::MeasureRequest req;
  req.package_digest = "digest-vadd-default";
  req.default_image_key = "vadd_default";
  req.default_image = HostImage({{"vadd", "vadd_default"}});

  const Measurement m = Measure("vadd", 1000, 256, nullptr, &req);
  EXPECT_TRUE(m.check_passed) << m.failure_message;
  EXPECT_TRUE(m.against_default);
  EXPECT_STREQ(m.CheckedAgainst(), "default");
  EXPECT_EQ(device_.Launches("vadd_default"), 1);
  EXPECT_EQ(device_.Launches("vadd_ref"), 0);

  // The default ran once for the problem; its image is not sent again.
  req.default_image.clear();
  const Measurement wrong = Measure("vadd_wrong", 1000, 64, nullptr, &req);
  EXPECT_EQ(wrong.failure, FailureClass::kWrongResult);
  EXPECT_NE(wrong.failure_message.find("first at y[999]"), std::string::npos) << wrong.failure_message;
  EXPECT_NE(wrong.failure_message.find("the default config's"), std::string::npos) << wrong.failure_message;
  EXPECT_EQ(device_.Launches("vadd_default"), 1);
  // A new shape runs the default again.
  EXPECT_TRUE(Measure("vadd", 4096, 128, nullptr, &req).check_passed);
  EXPECT_EQ(device_.Launches("vadd_default"), 2);

  // A default that produces NaN checks nothing: every config of the problem
  // fails, saying why.
  req.default_image_key = "vadd_default_nan";
  req.default_image = HostImage({{"vadd", "vadd_default_nan"}});
  runner::WireWriter again(runner::MsgType::kPackage);
  runner::EncodePackage("digest-vadd-default-nan", "test:vadd-default-nan",
                        {{"op.toml", DefaultCheckedToml() + "# another package\n"}, {"vadd.cu", "//\n"}}, &again);
  ASSERT_TRUE(runner::WriteFrame(out_, again.bytes()).ok());
  req.package_digest = "digest-vadd-default-nan";
  for (int64_t block : {64, 128}) {
    const Measurement none = Measure("vadd", 1000, block, nullptr, &req);
    EXPECT_EQ(none.failure, FailureClass::kLaunchError);
    EXPECT_NE(none.failure_message.find("the default config BLOCK=128"), std::string::npos) << none.failure_message;
    EXPECT_NE(none.failure_message.find("NaNs in y; no config can be checked"), std::string::npos)
        << none.failure_message;
  }
  EXPECT_EQ(device_.Launches("vadd_default_nan"), 1);
}

TEST_F(HostRunnerTest, EnergyIsReadAroundAWindowOfCallsWhereAskedAndTheDeviceCounts) {
  runner::MeasureRequest req;
  const Measurement off = Measure("vadd", 1000, 128, nullptr, &req);
  ASSERT_TRUE(off.check_passed) << off.failure_message;
  EXPECT_EQ(off.energy_uj, 0.0) << "not asked";

  req.policy.energy_seconds = 0.02;
  const Measurement uncounted = Measure("vadd", 1000, 128, nullptr, &req);
  ASSERT_TRUE(uncounted.check_passed) << uncounted.failure_message;
  EXPECT_EQ(uncounted.energy_uj, 0.0) << "a device without a counter gives no figure";
  EXPECT_EQ(uncounted.power_limit_w, 0.0);

  device_.energy_counter = true;
  const int before = device_.Launches("vadd");
  const Measurement m = Measure("vadd", 1000, 128, nullptr, &req);
  ASSERT_TRUE(m.check_passed) << m.failure_message;
  EXPECT_GT(m.energy_uj, 0.0);
  EXPECT_GT(m.power_w, 0.0);
  EXPECT_EQ(m.power_limit_w, HostDevice::kPowerLimitW);
  EXPECT_GT(device_.Launches("vadd") - before, int(m.samples) + 1) << "the window's calls come after the samples";
}

TEST_F(HostRunnerTest, ALostDeviceEndsTheRunnerAfterItsAnswer) {
  bool fatal = false;
  Measurement m = Measure("vadd_crash", 1000, 128, &fatal);
  EXPECT_EQ(m.failure, FailureClass::kCrash);
  EXPECT_TRUE(fatal);
  EXPECT_NE(m.failure_message.find("context lost"), std::string::npos) << m.failure_message;
  EXPECT_NE(m.failure_message.find("illegal address (planted)"), std::string::npos) << m.failure_message;
  ::shutdown(out_, SHUT_RDWR);
  serving_.join();
  serving_ = std::thread([] {});
  EXPECT_EQ(exit_code_, runner::kExitSticky);
}

TEST_F(HostRunnerTest, ABaselineTheOpDoesNotDeclareIsRefused) {
  runner::MeasureRequest req;
  req.baseline = "cublaslt";
  Measurement m = Measure("vadd", 1000, 128, nullptr, &req);
  EXPECT_EQ(m.failure, FailureClass::kLaunchError);
  EXPECT_NE(m.failure_message.find("baseline cublaslt"), std::string::npos) << m.failure_message;
}

}  // namespace
}  // namespace tune
