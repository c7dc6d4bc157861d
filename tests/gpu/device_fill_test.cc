// The runner's fill kernel (libtune/src/measure/cuda/builtin_kernels.h) draws the
// same seeded inputs on the device as MakeInput does on the host: uniform and
// ones bit for bit, normal() within the last bit of the device's log/cos, and
// an all-zero draw is reported; the L2 flush between timed samples leaves
// the next read cold. The compile test runs wherever NVRTC is; the
// rest skips (GTEST_SKIP) without a CUDA device.
#include <gtest/gtest.h>

#ifndef TUNEFARM_WITH_CUDA

TEST(DeviceFill, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit"; }

#else

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "measure/cuda/builtin_kernels.h"
#include "measure/cuda/cuda_driver.h"
#include "measure/runner/host_data.h"
#include "measure/cuda/nvrtc_compile.h"
#include "opspec/op_definition.h"

namespace tune::cuda {
namespace {

using runner::DecodeToFloat;
using runner::MakeInput;
using runner::ParseInit;

const char* const kDtypes[] = {"f16", "bf16", "f32", "i32"};

NvrtcResult CompileBuiltins(const std::string& dtype, const std::string& arch) {
  NvrtcJob job;
  job.file = "tunefarm_builtin.cu";
  job.source = kBuiltinSource;
  job.entry = "tunefarm_fill";
  job.options = BaseOptions(OpSpec{}, dtype, arch);
  return RunNvrtc(job);
}

TEST(DeviceFill, BuiltinKernelsCompileForEveryDtype) {
  for (const char* dtype : kDtypes) {
    for (const char* arch : {"sm_80", "sm_90"}) {
      NvrtcResult r = CompileBuiltins(dtype, arch);
      EXPECT_TRUE(r.ok) << dtype << " " << arch << ": " << r.error << "\n" << r.log;
    }
  }
}

class DeviceFillGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = LoadDriver();
    if (!d.ok()) GTEST_SKIP() << "no CUDA driver: " << d.status().message();
    d_ = *d;
    int count = 0;
    if (d_->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(d_->cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(d_->cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(d_->cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    int major = 0, minor = 0;
    d_->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_);
    d_->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_);
    arch_ = "sm_" + std::to_string(major) + std::to_string(minor);
  }
  void TearDown() override {
    for (CUmodule m : modules_) d_->cuModuleUnload(m);
    if (ctx_) d_->cuDevicePrimaryCtxRelease(dev_);
  }

  struct Drawn {
    std::string bytes;            // the buffer as stored
    std::vector<float> as_f32;    // the kernel's float copy
    bool nonzero = false;
  };

  // Runs tunefarm_fill for `dtype` and reads back what it wrote.
  Drawn Fill(const std::string& dtype, const std::string& init_text, int64_t elems, uint64_t seed) {
    NvrtcResult r = CompileBuiltins(dtype, arch_);
    EXPECT_TRUE(r.ok) << r.error << "\n" << r.log;
    CUmodule module = nullptr;
    CUfunction fill = nullptr;
    EXPECT_EQ(d_->cuModuleLoadData(&module, r.cubin.data()), CUDA_SUCCESS);
    modules_.push_back(module);
    EXPECT_EQ(d_->cuModuleGetFunction(&fill, module, "tunefarm_fill"), CUDA_SUCCESS);
    auto init = ParseInit(init_text);
    EXPECT_TRUE(init.ok()) << init.status().message();

    const int width = (dtype == "f16" || dtype == "bf16") ? 2 : 4;
    CUdeviceptr out = 0, wide = 0, flag = 0;
    EXPECT_EQ(d_->cuMemAlloc(&out, size_t(elems) * width), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemAlloc(&wide, size_t(elems) * sizeof(float)), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemAlloc(&flag, sizeof(unsigned)), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemsetD8(flag, 0, sizeof(unsigned)), CUDA_SUCCESS);
    long long n = elems;
    unsigned long long s = seed;
    int kind = int(init->kind);
    double a = init->a, b = init->b;
    void* params[] = {&out, &wide, &n, &s, &kind, &a, &b, &flag};
    // Fewer threads than elements: the grid-stride loop is exercised too.
    EXPECT_EQ(d_->cuLaunchKernel(fill, 37, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
    Drawn d;
    d.bytes.resize(size_t(elems) * width);
    d.as_f32.resize(size_t(elems));
    unsigned nonzero = 0;
    EXPECT_EQ(d_->cuMemcpyDtoH(d.bytes.data(), out, d.bytes.size()), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemcpyDtoH(d.as_f32.data(), wide, d.as_f32.size() * sizeof(float)), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemcpyDtoH(&nonzero, flag, sizeof(nonzero)), CUDA_SUCCESS);
    d.nonzero = nonzero != 0;
    for (CUdeviceptr p : {out, wide, flag}) d_->cuMemFree(p);
    return d;
  }

  const Driver* d_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::string arch_;
  std::vector<CUmodule> modules_;
};

TEST_F(DeviceFillGpu, UniformIntOnesAndZerosAreBitIdenticalToTheHostDraw) {
  const int64_t elems = 1000003;  // odd: a partial last block
  for (const char* dtype : kDtypes) {
    for (std::string init : {"uniform(-1,1)", "uniform(-3,7)", "ones", "", "int(-5,7)", "zeros"}) {
      if (std::string(dtype) == "i32" && init.empty()) init = "uniform(-5,5)";
      SCOPED_TRACE(std::string(dtype) + " " + init);
      auto host = MakeInput(dtype, init, elems, 0x1234abcdull);
      ASSERT_TRUE(host.ok()) << host.status().message();
      Drawn dev = Fill(dtype, init, elems, 0x1234abcdull);
      EXPECT_EQ(dev.nonzero, init != "zeros");
      ASSERT_EQ(dev.bytes.size(), host->size());
      size_t first_diff = 0;
      while (first_diff < host->size() && (*host)[first_diff] == dev.bytes[first_diff]) ++first_diff;
      EXPECT_EQ(first_diff, host->size()) << "first differing byte " << first_diff;
      EXPECT_EQ(dev.as_f32, DecodeToFloat(dtype, *host));
    }
  }
}

TEST_F(DeviceFillGpu, NormalMatchesTheHostDrawToTheLastBit) {
  const int64_t elems = 1 << 20;
  for (const char* dtype : {"f32", "f16"}) {
    SCOPED_TRACE(dtype);
    auto host = MakeInput(dtype, "normal(0.5,2)", elems, 99);
    ASSERT_TRUE(host.ok());
    Drawn dev = Fill(dtype, "normal(0.5,2)", elems, 99);
    std::vector<float> want = DecodeToFloat(dtype, *host);
    int64_t differ = 0;
    for (int64_t i = 0; i < elems; ++i) {
      const float w = want[size_t(i)], g = dev.as_f32[size_t(i)];
      if (w != g) ++differ;
      // One unit in the last place of the stored type at most.
      ASSERT_LE(std::fabs(w - g), std::fabs(w) * (std::string(dtype) == "f16" ? 1e-3f : 1.2e-7f) + 1e-6f)
          << "element " << i;
    }
    EXPECT_LT(differ, elems / 1000) << "elements off by one ulp";
  }
}

TEST_F(DeviceFillGpu, AnAllZeroDrawIsReported) {
  EXPECT_FALSE(Fill("i32", "uniform(0,0)", 4096, 1).nonzero);
  EXPECT_FALSE(MakeInput("i32", "uniform(0,0)", 4096, 1).ok());
  EXPECT_TRUE(Fill("i32", "uniform(0,1)", 4096, 1).nonzero);
}

// The runner reads twice the L2 with tunefarm_flush_l2 before every timed
// sample so that the sample starts from DRAM: a read of a buffer that fits
// in the L2 is slower after the flush than straight after another read of
// it. The flush writes nothing (its sink stays zero).
TEST_F(DeviceFillGpu, TheL2FlushLeavesTheNextReadColdAndWritesNothing) {
  NvrtcResult r = CompileBuiltins("f32", arch_);
  ASSERT_TRUE(r.ok) << r.error << "\n" << r.log;
  CUmodule module = nullptr;
  CUfunction flush = nullptr;
  ASSERT_EQ(d_->cuModuleLoadData(&module, r.cubin.data()), CUDA_SUCCESS);
  modules_.push_back(module);
  ASSERT_EQ(d_->cuModuleGetFunction(&flush, module, "tunefarm_flush_l2"), CUDA_SUCCESS);
  int l2 = 0, sms = 0;
  ASSERT_EQ(d_->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev_), CUDA_SUCCESS);
  ASSERT_EQ(d_->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_), CUDA_SUCCESS);
  const size_t small_bytes = std::min<size_t>(size_t(l2) / 3, 16u << 20) / 16 * 16;
  const size_t big_bytes = 2 * size_t(l2);
  CUdeviceptr small = 0, big = 0, sink = 0;
  ASSERT_EQ(d_->cuMemAlloc(&small, small_bytes), CUDA_SUCCESS);
  ASSERT_EQ(d_->cuMemAlloc(&big, big_bytes), CUDA_SUCCESS);
  ASSERT_EQ(d_->cuMemAlloc(&sink, sizeof(unsigned)), CUDA_SUCCESS);
  for (auto [p, n] : {std::pair{small, small_bytes}, {big, big_bytes}, {sink, sizeof(unsigned)}})
    ASSERT_EQ(d_->cuMemsetD8(p, 0, n), CUDA_SUCCESS);
  CUevent start = nullptr, stop = nullptr;
  ASSERT_EQ(d_->cuEventCreate(&start, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(d_->cuEventCreate(&stop, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  auto read = [&](CUdeviceptr p, size_t bytes) {
    long long words = (long long)(bytes / 16);
    void* params[] = {&p, &words, &sink};
    EXPECT_EQ(d_->cuLaunchKernel(flush, unsigned(sms) * 4, 1, 1, 512, 1, 1, 0, nullptr, params, nullptr),
              CUDA_SUCCESS);
  };
  // Median microseconds of a read of `small`, each after `before`.
  auto median_read = [&](const std::function<void()>& before) {
    std::vector<float> us;
    for (int i = 0; i < 31; ++i) {
      before();
      EXPECT_EQ(d_->cuEventRecord(start, nullptr), CUDA_SUCCESS);
      read(small, small_bytes);
      EXPECT_EQ(d_->cuEventRecord(stop, nullptr), CUDA_SUCCESS);
      EXPECT_EQ(d_->cuCtxSynchronize(), CUDA_SUCCESS);
      float ms = 0;
      EXPECT_EQ(d_->cuEventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
      us.push_back(ms * 1000.f);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  const float warm = median_read([&] { read(small, small_bytes); });
  const float cold = median_read([&] { read(big, big_bytes); });
  std::printf("read of %zu MiB: %.2f us after a read of it, %.2f us after the flush (L2 %d MiB)\n",
              small_bytes >> 20, warm, cold, l2 >> 20);
  EXPECT_GT(cold, 1.2f * warm);
  unsigned written = 1;
  ASSERT_EQ(d_->cuMemcpyDtoH(&written, sink, sizeof(written)), CUDA_SUCCESS);
  EXPECT_EQ(written, 0u);
  d_->cuEventDestroy(start);
  d_->cuEventDestroy(stop);
  for (CUdeviceptr p : {small, big, sink}) d_->cuMemFree(p);
}

}  // namespace
}  // namespace tune::cuda

#endif
