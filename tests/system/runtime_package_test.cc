// The runtime as a deployment gets it: install the tunefarm_runtime
// component of this build tree into a fresh prefix, configure and build
// tests/data/runtime_consumer with find_package(tunefarm) against it, and
// run the result on a signed bundle.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "bundle/bundle.h"
#include "bundle/signing.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct ShellRun {
  int exit_code;
  std::string output;
};

ShellRun Sh(const std::string& command, const fs::path& log) {
  const int status = std::system((command + " >" + Quote(log.string()) + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream out;
  out << in.rdbuf();
  return ShellRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, out.str()};
}

class RuntimePackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "runtime_package.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure()) fs::remove_all(dir_, ec);  // kept for a look when it failed
  }
  fs::path dir_;
};

TEST_F(RuntimePackageTest, FindPackageBuildsAndRunsAConsumer) {
  const std::string cmake = Quote(TUNEFARM_CMAKE_COMMAND);
  const fs::path prefix = dir_ / "prefix", build = dir_ / "build", log = dir_ / "log";

  ShellRun r = Sh(cmake + " --install " + Quote(TUNEFARM_BUILD_DIR) + " --prefix " + Quote(prefix.string()) +
                 " --component tunefarm_runtime",
             log);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // Only the deployment headers (runtime, launcher, C API) and what they
  // include: a header that pulled in another libtune header would fail the
  // consumers' build below.
  std::set<std::string> headers;
  for (const auto& f : fs::directory_iterator(prefix / "include" / "tune")) headers.insert(f.path().filename());
  EXPECT_EQ(headers, (std::set<std::string>{"c.h", "launcher.h", "runtime.h", "status.h"}));
  bool has_config = false;
  for (const auto& f : fs::recursive_directory_iterator(prefix)) {
    has_config |= f.path().filename() == "tunefarmConfig.cmake";
  }
  EXPECT_TRUE(has_config);

  r = Sh(cmake + " -S " + Quote(TUNEFARM_SOURCE_DIR "/tests/data/runtime_consumer") + " -B " +
             Quote(build.string()) + " -G " + Quote(TUNEFARM_CMAKE_GENERATOR) +
             " -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=" + Quote(TUNEFARM_CXX_COMPILER) +
             " -DCMAKE_PREFIX_PATH=" + Quote(prefix.string()),
         log);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Sh(cmake + " --build " + Quote(build.string()), log);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string consumer = Quote((build / "runtime_consumer").string());

  const std::string key = (dir_ / "farm.key").string(), pub = (dir_ / "farm.pub").string();
  ASSERT_TRUE(GenerateKeyPairFiles(key, pub).ok());
  auto secret = ReadSecretKeyFile(key);
  ASSERT_TRUE(secret.ok()) << secret.status().message();
  Bundle b;
  b.name = "package";
  b.defaults["gemm"] = Config{{{"BM", 128}}};
  BundleEntry e;
  e.op = "gemm";
  e.dtype = "f16";
  e.gpu_model = "h100-80gb-hbm3";
  e.shape.dims = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  e.config.params = {{"BM", 256}, {"BN", 64}};
  b.entries = {e};
  const std::string base = (dir_ / "gemm").string();
  ASSERT_TRUE(WriteSignedBundleFiles(b, *secret, base).ok());
  const std::string args = " " + Quote(base + ".tfb") + " " + Quote(pub) + " gemm f16 ";

  r = Sh(consumer + args + "h100-80gb-hbm3 M=4096 N=4096 K=4096", log);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "exact BM=256,BN=64\n");
  r = Sh(consumer + args + "h100-80gb-hbm3 K=3000 N=4096 M=5000", log);
  EXPECT_EQ(r.output, "nearest_shape BM=256,BN=64\n");
  r = Sh(consumer + args + "h100-sxm5 M=4096 N=4096 K=4096", log);
  EXPECT_EQ(r.output, "family BM=256,BN=64\n");
  r = Sh(consumer + args + "a100 M=4096 N=4096 K=4096", log);
  EXPECT_EQ(r.output, "default BM=128\n");
  r = Sh("TUNEFARM_FORCE_DEFAULTS=1 " + consumer + args + "h100-80gb-hbm3 M=4096 N=4096 K=4096", log);
  EXPECT_EQ(r.output, "default BM=128\n");

  // The launcher links from the package too; where there is no driver or
  // device it says so in one line.
  r = Sh(Quote((build / "launcher_consumer").string()) + " " + Quote(base + ".tfb") + " " + Quote(pub) + " gemm f16",
         log);
  if (r.exit_code == 0) {
    EXPECT_NE(r.output.find("device "), std::string::npos) << r.output;
  } else {
    EXPECT_EQ(r.output.rfind("launcher: ", 0), 0u) << r.output;
  }

  // A changed byte: the deployment refuses the bundle and says why.
  std::string bytes;
  {
    std::ifstream in(base + ".tfb", std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    bytes = s.str();
  }
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(base + ".tfb", std::ios::binary | std::ios::trunc) << bytes;
  r = Sh(consumer + args + "h100-80gb-hbm3 M=4096 N=4096 K=4096", log);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("signature check failed"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tune
