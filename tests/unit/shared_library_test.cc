// base/shared_library.h: the one rule by which the vendor libraries (the
// CUDA driver, NVRTC, NVML, cuBLASLt) are opened at run time.
#include "base/shared_library.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>

namespace tune {
namespace {

TEST(SharedLibrary, OpensTheFirstNameThatLoadsAndResolvesItsSymbols) {
  auto lib = OpenSharedLibrary("the C library", {"/nonexistent/libc.so.6", "libc.so.6"});
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_EQ(lib->name, "libc.so.6");
  size_t (*length)(const char*) = nullptr;
  ASSERT_TRUE(lib->Resolve(length, "strlen"));
  EXPECT_EQ(length("tunefarm"), 8u);
  int (*absent)() = nullptr;
  EXPECT_FALSE(lib->Resolve(absent, "tunefarm_no_such_symbol"));
  EXPECT_EQ(absent, nullptr);
}

TEST(SharedLibrary, AMissingLibraryIsOneLineNamingWhatWasTried) {
  auto lib = OpenSharedLibrary("cuBLASLt", {"/nonexistent/libcublasLt.so", "libtunefarm-absent.so.1"});
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kUnavailable);
  const std::string& m = lib.status().message();
  EXPECT_EQ(m.rfind("cuBLASLt is not on this host (tried /nonexistent/libcublasLt.so, libtunefarm-absent.so.1)", 0), 0u)
      << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  // A long list of candidates is named by its first and a count.
  std::vector<std::string> many(9, "/nonexistent/libnvrtc.so");
  auto nvrtc = OpenSharedLibrary("NVRTC", many);
  ASSERT_FALSE(nvrtc.ok());
  EXPECT_NE(nvrtc.status().message().find("(tried /nonexistent/libnvrtc.so and 8 more)"), std::string::npos)
      << nvrtc.status().message();
}

TEST(SharedLibrary, AnOverrideVariableReplacesTheCandidates) {
  ::unsetenv("TUNEFARM_TEST_LIBRARY");
  EXPECT_EQ(LibraryNames("TUNEFARM_TEST_LIBRARY", {"a.so", "b.so"}), (std::vector<std::string>{"a.so", "b.so"}));
  ::setenv("TUNEFARM_TEST_LIBRARY", "", 1);  // empty: as if unset
  EXPECT_EQ(LibraryNames("TUNEFARM_TEST_LIBRARY", {"a.so"}), (std::vector<std::string>{"a.so"}));
  ::setenv("TUNEFARM_TEST_LIBRARY", "/opt/x/libc.so", 1);
  EXPECT_EQ(LibraryNames("TUNEFARM_TEST_LIBRARY", {"a.so"}), (std::vector<std::string>{"/opt/x/libc.so"}));
  ::unsetenv("TUNEFARM_TEST_LIBRARY");
}

}  // namespace
}  // namespace tune
