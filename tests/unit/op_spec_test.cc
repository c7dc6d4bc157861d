#include "opspec/op_definition.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"
#include "base/known_gpus.h"
#include "opspec/config_space.h"
#include "base/limits.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

const std::string kTinyDir = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/tiny";

// A gemm-shaped spec; each bad case below edits one line of it.
const char* kGemmToml = R"toml(
[op]
name    = "gemm"
source  = "gemm.cu"
kernel  = "gemm"
dims    = ["M", "N", "K"]
dtypes  = ["f16", "bf16"]
default = { BM = 128, BN = 128, BK = 32, STAGES = 3 }

[params]
BM = [64, 128, 256]
BN = [64, 128, 256]
BK = [32, 64]
STAGES = [2, 3, 4]

[constraints]
rules = ["(BM*BK + BK*BN) * STAGES * dsize <= smem_optin"]

[launch]
grid  = ["cdiv(N, BN)", "cdiv(M, BM)", "1"]
block = ["256", "1", "1"]
smem  = "(BM*BK + BK*BN) * STAGES * dsize"

[[args]]
name = "A"
dir = "in"
dtype = "$dtype"
shape = ["M", "K"]
init = "uniform(-1,1)"

[[args]]
name = "C"
dir = "out"
dtype = "$dtype"
shape = ["M", "N"]

[[args]]
name = "M"
scalar = "i32"
value = "M"

[check]
reference = "reference.cu:gemm_ref"
grid  = ["cdiv(N, 16)", "cdiv(M, 16)", "1"]
block = ["16", "16", "1"]
rtol = 1e-2
atol = 1e-2
max_mismatch = 0.0

[metrics]
flops = "2*M*N*K"
bytes = "dsize*(M*K + K*N + M*N)"
)toml";

OpPackage GemmPackage(const std::string& toml = kGemmToml) {
  return OpPackage{{"op.toml", toml},
                   {"gemm.cu", "#include \"common.h\"\nextern \"C\" __global__ void gemm() {}\n"},
                   {"reference.cu", "extern \"C\" __global__ void gemm_ref() {}\n"},
                   {"common.h", "#pragma once\n"}};
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "fixture lacks: " << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

using tune::testing::TempDir;

TEST(OpSpec, LoadsTheTinyFixture) {
  auto spec = LoadOpSpec(kTinyDir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->name, "tiny");
  EXPECT_EQ(spec->origin, kTinyDir);
  EXPECT_EQ(spec->kernel, "tiny_axpb");
  EXPECT_EQ(spec->dims, (std::vector<std::string>{"N"}));
  EXPECT_EQ(spec->dtypes, (std::vector<std::string>{"f16", "bf16", "f32"}));
  ASSERT_EQ(spec->axes.size(), 2u);
  EXPECT_EQ(spec->axes[0].name, "BLOCK");
  EXPECT_EQ(spec->axes[0].values, (std::vector<ParamValue>{64, 128, 256, 512, 1024}));
  EXPECT_EQ(spec->axes[1].name, "VEC");
  EXPECT_EQ(spec->default_config.Canonical(), "BLOCK=256,VEC=1");
  EXPECT_EQ(spec->constraints.size(), 2u);
  EXPECT_EQ(spec->grid[0], "cdiv(N, BLOCK * VEC)");
  ASSERT_EQ(spec->args.size(), 5u);
  EXPECT_EQ(spec->args[0].kind, ArgSpec::Kind::kBuffer);
  EXPECT_EQ(spec->args[0].init, "uniform(-1,1)");
  EXPECT_EQ(spec->args[1].dir, "out");
  EXPECT_EQ(spec->args[4].kind, ArgSpec::Kind::kScalar);
  EXPECT_EQ(spec->args[4].scalar_type, "i32");
  EXPECT_EQ(spec->args[4].value, "N");
  EXPECT_EQ(spec->check.reference_file, "reference.cu");
  EXPECT_EQ(spec->check.reference_kernel, "tiny_axpb_ref");
  EXPECT_DOUBLE_EQ(spec->check.atol, 1e-3);
  EXPECT_EQ(spec->compile_options, (std::vector<std::string>{"-lineinfo"}));
  EXPECT_FALSE(spec->arch_specific);
  // The quoted include travels with the op.
  EXPECT_EQ(spec->package.size(), 4u);
  EXPECT_TRUE(spec->package.count("tiny_common.h"));
  EXPECT_EQ(spec->FindAxis("VEC")->values.size(), 3u);
  EXPECT_EQ(spec->FindAxis("N"), nullptr);
}

// [op] timing: cold by default; hot is part of the kernel hash (its rows
// never rank with cold ones), cold's hash is what it was without the key.
// A sweep's override rewrites the package, comments and all kept.
TEST(OpSpec, TimingIsColdOrHotAndHotIsAnotherKernel) {
  auto package = ReadOpPackage(kTinyDir);
  ASSERT_TRUE(package.ok()) << package.status().message();
  auto cold = ParseOpSpec(*package, "tiny");
  ASSERT_TRUE(cold.ok()) << cold.status().message();
  EXPECT_EQ(cold->timing, L2Timing::kCold);

  auto hot_package = WithTiming(*package, L2Timing::kHot);
  ASSERT_TRUE(hot_package.ok()) << hot_package.status().message();
  auto hot = ParseOpSpec(*hot_package, "tiny");
  ASSERT_TRUE(hot.ok()) << hot.status().message();
  EXPECT_EQ(hot->timing, L2Timing::kHot);
  EXPECT_NE(KernelHash(*hot, "sim"), KernelHash(*cold, "sim"));
  const std::string& text = hot_package->at("op.toml");
  EXPECT_NE(text.find(package->at("op.toml").substr(0, 40)), std::string::npos) << "the rest stays as written";

  // Set again, and back to cold: the line is replaced, not added; an
  // explicit cold is the op without the key.
  auto again = WithTiming(*hot_package, L2Timing::kCold);
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto cold_again = ParseOpSpec(*again, "tiny");
  ASSERT_TRUE(cold_again.ok()) << cold_again.status().message();
  EXPECT_EQ(cold_again->timing, L2Timing::kCold);
  EXPECT_EQ(KernelHash(*cold_again, "sim"), KernelHash(*cold, "sim"));
  size_t lines = 0;
  for (size_t at = again->at("op.toml").find("timing ="); at != std::string::npos;
       at = again->at("op.toml").find("timing =", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << again->at("op.toml");

  OpPackage warm = *package;
  warm["op.toml"] = Replace(warm["op.toml"], "[op]\n", "[op]\ntiming = \"warm\"\n");
  auto refused = ParseOpSpec(warm, "tiny");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("[op] timing: 'warm' is not cold or hot"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadOpPackage(kTinyDir + "-none").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(WithTiming(OpPackage{{"op.toml", "[params]\nX = [1]\n"}}, L2Timing::kHot).ok());
}

TEST(OpSpec, GemmShapedSpecParses) {
  auto spec = ParseOpSpec(GemmPackage(), "ops/gemm");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  // Axis order is the order written, not toml++'s sorted key order.
  std::vector<std::string> names;
  for (const Axis& a : spec->axes) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"BM", "BN", "BK", "STAGES"}));
  EXPECT_EQ(spec->default_config.params,
            (ParamValues{{"BM", 128}, {"BN", 128}, {"BK", 32}, {"STAGES", 3}}));
  EXPECT_EQ(spec->args[2].kind, ArgSpec::Kind::kScalar);
  EXPECT_TRUE(spec->args[1].init.empty());  // outputs get no init
  EXPECT_EQ(spec->flops, "2*M*N*K");
}

TEST(OpSpec, ReadsAPackageFromDiskWithNestedIncludes) {
  TempDir dir;
  dir.Write("op.toml", kGemmToml);
  dir.Write("gemm.cu", "#include \"detail/tile.h\"\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n");
  dir.Write("detail/tile.h", "  #  include \"mma.h\"\n");  // beside the includer
  dir.Write("detail/mma.h", "// mma\n");
  dir.Write("reference.cu", "#include \"ref_util.h\"\n");
  dir.Write("ref_util.h", "// util\n");
  dir.Write("unrelated.h", "// not included\n");
  auto pkg = ReadOpPackage(dir.path());
  ASSERT_TRUE(pkg.ok()) << pkg.status().message();
  std::vector<std::string> names;
  for (const auto& [name, text] : *pkg) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"detail/mma.h", "detail/tile.h", "gemm.cu", "op.toml",
                                             "ref_util.h", "reference.cu"}));
  auto spec = LoadOpSpec(dir.path());
  ASSERT_TRUE(spec.ok()) << spec.status().message();
}

const std::string kIncludePathsDir = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/include_paths";

// [op] include folders travel in the package and answer <...> and "..."
// includes; [op] include_roots are names only.
TEST(OpSpec, IncludeFoldersTravelWithThePackageAndIncludeRootsAreNames) {
  auto pkg = ReadOpPackage(kIncludePathsDir);
  ASSERT_TRUE(pkg.ok()) << pkg.status().message();
  EXPECT_TRUE(pkg->count("include/affine/affine.cuh"));
  EXPECT_TRUE(pkg->count("include/affine/scale.cuh"));
  auto spec = ParseOpSpec(*pkg, "include_paths");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->include_dirs, std::vector<std::string>{"include"});
  EXPECT_EQ(spec->include_roots, std::vector<std::string>{"shiftlib"});
  // The headers of the include folder are part of the op's identity.
  OpPackage edited = *pkg;
  edited["include/affine/scale.cuh"] += "// changed\n";
  auto changed = ParseOpSpec(edited, "include_paths");
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->SourceDigest(), spec->SourceDigest());
  // Bad declarations are named.
  const std::pair<std::string, std::string> bad[] = {
      {"include       = [\"include\"]", "include       = [\"../include\"]"},
      {"include       = [\"include\"]", "include       = [\"missing\"]"},
      {"include_roots = [\"shiftlib\"]", "include_roots = [\"/usr/include\"]"},
  };
  for (const auto& [from, to] : bad) {
    OpPackage p = *pkg;
    p["op.toml"] = Replace(p["op.toml"], from, to);
    auto parsed = ParseOpSpec(p, "x");
    ASSERT_FALSE(parsed.ok()) << to;
    EXPECT_NE(parsed.status().message().find("[op] include"), std::string::npos) << parsed.status().message();
  }
}

// The kernel hash of an op with include roots covers the headers its
// sources reach there, and no other file of the root.
TEST(OpSpec, AnIncludeRootDigestCoversTheHeadersTheSourcesReach) {
  auto spec = LoadOpSpec(kIncludePathsDir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  TempDir root;
  for (const char* f : {"shiftlib/shift.cuh", "shiftlib/shift_value.cuh", "shiftlib/unused.cuh"}) {
    std::ifstream in(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/include_root/" + f);
    root.Write(f, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  }
  auto missing = IncludeRootsDigest(*spec, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--include-root shiftlib=PATH"), std::string::npos);
  auto roots = ParseIncludeRoots({"shiftlib=" + root.path()});
  ASSERT_TRUE(roots.ok()) << roots.status().message();
  auto first = IncludeRootsDigest(*spec, *roots);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->size(), 32u);
  // A file no source reaches changes nothing.
  root.Write("shiftlib/unused.cuh", "// edited, and longer than before\n");
  EXPECT_EQ(*IncludeRootsDigest(*spec, *roots), *first);
  // A header reached through another (quoted, beside its includer) does.
  root.Write("shiftlib/shift_value.cuh", "#pragma once\nnamespace shiftlib { constexpr float kShift = 3.0f; }\n");
  auto second = IncludeRootsDigest(*spec, *roots);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*second, *first);
  const std::string hash = KernelHash(*spec, "13.0");
  EXPECT_NE(KernelHashWithIncludes(hash, *first), KernelHashWithIncludes(hash, *second));
  EXPECT_NE(KernelHashWithIncludes(hash, *first), hash);
  // Host settings are checked: a name, then a folder.
  EXPECT_FALSE(ParseIncludeRoots({"shiftlib"}).ok());
  EXPECT_FALSE(ParseIncludeRoots({"shift lib=" + root.path()}).ok());
  EXPECT_FALSE(ParseIncludeRoots({"shiftlib=" + root.Sub("nowhere")}).ok());
  EXPECT_FALSE(ParseIncludeRoots({"a=" + root.path(), "a=" + root.path()}).ok());
}

// What a package may make NVRTC read on a worker: its own files and the
// toolkit's headers, nothing else of the host.
TEST(OpSpec, PackagesStayInsideThemselvesAndTheToolkit) {
  auto options = [](const std::string& list) {
    return ParseOpSpec(GemmPackage(Replace(kGemmToml, "kernel  = \"gemm\"", "kernel  = \"gemm\"\noptions = " + list)), "x");
  };
  for (const char* ok : {"[\"-DBLOCK=4\", \"-UX\", \"--use_fast_math\", \"-lineinfo\", \"-ftz=true\"]",
                         "[\"-maxrregcount=128\", \"--std=c++20\", \"-arch=sm_90a\", \"--define-macro=A\"]"}) {
    auto spec = options(ok);
    EXPECT_TRUE(spec.ok()) << ok << ": " << spec.status().message();
  }
  for (const char* bad : {"[\"-I/\"]", "[\"--include-path=/etc\"]", "[\"--pre-include=/etc/passwd\"]",
                          "[\"-include\", \"/etc/passwd\"]", "[\"-DX\", \"-I\", \"/\"]", "[\"-Xptxas=-v\"]",
                          "[\"-lineinfo -I/\"]"}) {
    auto spec = options(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_NE(spec.status().message().find("not on the allow-list"), std::string::npos) << spec.status().message();
    EXPECT_EQ(spec.status().message().rfind("x/op.toml: [op] options:", 0), 0u) << spec.status().message();
  }
  auto source = [](const std::string& text) {
    OpPackage p = GemmPackage();
    p["gemm.cu"] = text + p["gemm.cu"];
    return ParseOpSpec(p, "x");
  };
  EXPECT_TRUE(source("#include <cuda_fp16.h>\n#include <cuda/std/cstdint>\n// #include \"/etc/passwd\"\n").ok());
  EXPECT_TRUE(source("const char* s = \"#include </etc/passwd>\";\n").ok());
  for (const char* bad : {"#include \"/etc/passwd\"\n", "#include </etc/passwd>\n", "#include <../../etc/passwd>\n",
                          "#include \"sub/../../x.h\"\n", "#include \"missing.h\"\n", "#define F </etc/passwd>\n#include F\n",
                          "#/**/include </etc/passwd>\n", "#inc\\\nlude </etc/passwd>\n", "#include_next <x.h>\n",
                          "#embed \"/etc/passwd\"\n", "#if __has_include(\"/etc/passwd\")\n#endif\n",
                          // The alternative spellings of '#': digraph and trigraph.
                          "%:include \"/etc/passwd\"\n", "%:  include </etc/passwd>\n",
                          "%:define H </etc/passwd>\n%:include H\n", "  %:/**/include </etc/passwd>\n",
                          "?\?=include </etc/passwd>\n", "%:inc\\\nlude </etc/passwd>\n"}) {
    auto spec = source(bad);
    EXPECT_FALSE(spec.ok()) << bad;
    if (!spec.ok()) {
      EXPECT_EQ(spec.status().message().rfind("x/op.toml: op package: gemm.cu:", 0), 0u) << spec.status().message();
    }
  }
  // Headers are checked too, and file names are plain relative names.
  OpPackage header = GemmPackage();
  header["common.h"] = "#pragma once\n#include </proc/self/environ>\n";
  auto spec = ParseOpSpec(header, "x");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("common.h:2:"), std::string::npos) << spec.status().message();
  for (const char* name : {"../x.h", "/etc/x.h", ".hidden", "a//b.h", "a\\b.h", "sp ace.h"}) {
    OpPackage p = GemmPackage();
    p[name] = "";
    auto named = ParseOpSpec(p, "x");
    EXPECT_FALSE(named.ok()) << name;
    if (!named.ok()) {
      EXPECT_NE(named.status().message().find("file name"), std::string::npos) << named.status().message();
    }
  }
}

TEST(OpSpec, ReadOpPackageNamesAMissingSource) {
  TempDir dir;
  dir.Write("op.toml", kGemmToml);
  dir.Write("reference.cu", "");
  auto pkg = ReadOpPackage(dir.path());
  ASSERT_FALSE(pkg.ok());
  EXPECT_EQ(pkg.status().message().rfind(dir.path() + "/op.toml: [op] source: cannot read", 0), 0u)
      << pkg.status().message();
  EXPECT_NE(pkg.status().message().find("gemm.cu"), std::string::npos);

  TempDir empty;
  auto none = ReadOpPackage(empty.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(empty.path() + "/op.toml: cannot read"), std::string::npos);
}

// A package goes to every worker and into the store: a symbolic link
// anywhere in the op folder (a header a source includes, the source, the
// reference, an init file, op.toml, a folder on the way) is refused by its
// name in one line, and what it points at is never read.
TEST(OpSpec, ReadOpPackageRefusesEverySymbolicLink) {
  TempDir host;
  host.Write("id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- host secret\n");
  host.Write("lib/tile.h", "// a header of the host\n");
  const std::string secret = host.Sub("id_ed25519");
  const std::string init = "init = \"uniform(-1,1)\"";
  struct Case {
    std::string what, link, target;
    std::string toml = kGemmToml;
    std::string source = "extern \"C\" __global__ void gemm() {}\n";
  };
  const std::vector<Case> cases = {
      {"a header the source includes", "helper.cuh", secret, kGemmToml,
       "#include \"helper.cuh\"\nextern \"C\" __global__ void gemm() {}\n"},
      {"a header the reference includes, beside it", "ref/util.h", secret,
       Replace(kGemmToml, "reference.cu:gemm_ref", "ref/reference.cu:gemm_ref")},
      {"a folder on a header's way", "detail", host.Sub("lib"), kGemmToml,
       "#include \"detail/tile.h\"\nextern \"C\" __global__ void gemm() {}\n"},
      {"[op] source", "gemm.cu", secret},
      {"[check] reference", "reference.cu", secret},
      {"init = file(...)", "a.npy", secret, Replace(kGemmToml, init, "init = \"file(a.npy)\"")},
      {"op.toml", "op.toml", secret},
  };
  for (const Case& c : cases) {
    TempDir dir;
    dir.Write("op.toml", c.toml);
    dir.Write("gemm.cu", c.source);
    dir.Write("reference.cu", "extern \"C\" __global__ void gemm_ref() {}\n");
    dir.Write("ref/reference.cu", "#include \"util.h\"\nextern \"C\" __global__ void gemm_ref() {}\n");
    dir.Write("a.npy", "\x93NUMPY");
    fs::remove(dir.Sub(c.link));
    fs::create_symlink(c.target, dir.Sub(c.link));
    auto pkg = ReadOpPackage(dir.path());
    ASSERT_FALSE(pkg.ok()) << c.what << ": a link was read into the package";
    const std::string& m = pkg.status().message();
    EXPECT_NE(m.find("'" + dir.Sub(c.link) + "' is a symbolic link"), std::string::npos) << c.what << ": " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << c.what << ": " << m;
    EXPECT_EQ(m.find("host secret"), std::string::npos) << c.what << ": " << m;
    EXPECT_FALSE(LoadOpSpec(dir.path()).ok()) << c.what;
  }

  // A FIFO where a header is looked for is refused, not waited on.
  TempDir dir;
  dir.Write("op.toml", kGemmToml);
  dir.Write("gemm.cu", "#include \"pipe.h\"\n");
  dir.Write("reference.cu", "");
  ASSERT_EQ(::mkfifo(dir.Sub("pipe.h").c_str(), 0644), 0);
  auto pkg = ReadOpPackage(dir.path());
  ASSERT_FALSE(pkg.ok());
  EXPECT_NE(pkg.status().message().find("'" + dir.Sub("pipe.h") + "' is not a regular file"), std::string::npos)
      << pkg.status().message();
}

TEST(OpSpec, TomlSyntaxErrorGivesLineAndColumn) {
  auto spec = ParseOpSpec(GemmPackage(Replace(kGemmToml, "BK = [32, 64]", "BK = [32, 64")), "ops/gemm");
  ASSERT_FALSE(spec.ok());
  // "ops/gemm/op.toml:13:..." : the broken array starts on line 13.
  EXPECT_EQ(spec.status().message().rfind("ops/gemm/op.toml:1", 0), 0u) << spec.status().message();
  EXPECT_EQ(spec.status().message().find('\n'), std::string::npos);
}

struct BadCase {
  const char* from;
  const char* to;
  const char* expect;  // the message after "ops/gemm/op.toml: "
};

TEST(OpSpec, EachBadInputNamesFileAndField) {
  const BadCase cases[] = {
      {"BM = [64, 128, 256]", "BM = []", "[params] BM: expected a non-empty array of integers"},
      {"BM = [64, 128, 256]", "BM = [64, \"x\"]", "[params] BM: mixes kinds of values"},
      {"BM = [64, 128, 256]", "BM = [\"a b\"]", "[params] BM: \"a b\" is not a macro token"},
      {"BM = [64, 128, 256]", "BM = [\"true\"]", "[params] BM: \"true\" is a boolean's spelling"},
      {"BM = [64, 128, 256]", "BM = [1.5]", "[params] BM: expected integers, strings or booleans"},
      {"BM = [64, 128, 256]", "BM = [64, 64]", "[params] BM: value 64 appears twice"},
      {"BM = [64, 128, 256]", "sm = [64, 128, 256]", "[params] sm: 'sm' is a reserved name"},
      {"BM = [64, 128, 256]", "BM = [64, 128, 256]\nconstraints = [\"BM > 1\"]",
       "[params] constraints: expected a non-empty array of integers, strings or booleans (constraints belong in [constraints] rules)"},
      {"name    = \"gemm\"", "", "[op] name: missing"},
      {"source  = \"gemm.cu\"", "source  = \"nope.cu\"", "[op] source: file 'nope.cu' is not in the op folder"},
      {"kernel  = \"gemm\"", "kernel  = \"gemm kernel\"", "[op] kernel: 'gemm kernel' is not a C identifier"},
      {"dtypes  = [\"f16\", \"bf16\"]", "dtypes  = [\"f16\", \"f8\"]",
       "[op] dtypes: unknown dtype 'f8' (expected f16 | bf16 | f32)"},
      {"dtypes  = [\"f16\", \"bf16\"]", "dtypes  = []", "[op] dtypes: expected a non-empty array of strings"},
      {"dims    = [\"M\", \"N\", \"K\"]", "dims    = [\"M\", \"N\", \"BK\"]", "[params] BK: 'BK' is also a dim"},
      {"dtypes  = [\"f16\", \"bf16\"]", "dtype = [\"f16\"]", "[op] dtype: unknown field"},
      {"default = { BM = 128, BN = 128, BK = 32, STAGES = 3 }", "default = { BM = 128, BK = 32, STAGES = 3 }",
       "[op] default: no value for param 'BN'"},
      {"default = { BM = 128, BN = 128, BK = 32, STAGES = 3 }",
       "default = { BM = 96, BN = 128, BK = 32, STAGES = 3 }",
       "[op] default BM: 96 is not one of the values in [params] BM"},
      {"default = { BM = 128, BN = 128, BK = 32, STAGES = 3 }",
       "default = { BM = 128, BN = 128, BK = 32, STAGES = 3, WM = 2 }", "[op] default: 'WM' is not a param"},
      {"grid  = [\"cdiv(N, BN)\", \"cdiv(M, BM)\", \"1\"]", "grid  = [\"cdiv(N, BN)\", \"cdiv(M, BM)\"]",
       "[launch] grid: expected 3 expressions"},
      {"smem  = \"(BM*BK + BK*BN) * STAGES * dsize\"", "smem  = \"BQ * 2\"",
       "[launch] smem: unknown variable 'BQ' in 'BQ * 2'"},
      {"block = [\"256\", \"1\", \"1\"]", "block = [\"256\", \"1\", \"1 +\"]", "[launch] block[2]: "},
      {"rules = [\"(BM*BK + BK*BN) * STAGES * dsize <= smem_optin\"]", "rules = [\"BM <= Q\"]",
       "[constraints] rules[0]: unknown variable 'Q' in 'BM <= Q'"},
      {"grid  = [\"cdiv(N, 16)\", \"cdiv(M, 16)\", \"1\"]", "grid  = [\"cdiv(N, BN)\", \"cdiv(M, 16)\", \"1\"]",
       "[check] grid[0]: unknown variable 'BN' in 'cdiv(N, BN)' (the reference launch sees dims and dsize only)"},
      {"dir = \"in\"", "dir = \"input\"", "[[args]] A dir: expected in | out | inout, got 'input'"},
      {"dtype = \"$dtype\"\nshape = [\"M\", \"K\"]", "dtype = \"fp16\"\nshape = [\"M\", \"K\"]",
       "[[args]] A dtype: unknown dtype 'fp16' (expected $dtype | f16 | bf16 | f32 | i32)"},
      {"shape = [\"M\", \"K\"]", "shape = [\"M\", \"Q\"]", "[[args]] A shape[1]: unknown variable 'Q' in 'Q'"},
      {"shape = [\"M\", \"K\"]", "shape = []", "[[args]] A shape: expected a non-empty array of expressions"},
      {"init = \"uniform(-1,1)\"", "init = \"twos\"",
       "[[args]] A init: expected uniform(lo,hi) | normal(mean,std) | int(lo,hi) | ones | zeros | file(name.npy)"},
      {"init = \"uniform(-1,1)\"", "init = \"uniform(1,-1)\"", "[[args]] A init: uniform(lo,hi) needs lo < hi"},
      {"shape = [\"M\", \"N\"]", "shape = [\"M\", \"N\"]\ninit = \"ones\"",
       "[[args]] C init: applies to in/inout buffers only"},
      {"scalar = \"i32\"", "scalar = \"u8\"", "[[args]] M scalar: unknown type 'u8' (expected i32 | i64 | f32)"},
      {"value = \"M\"", "value = \"M\"\ndir = \"in\"", "[[args]] M dir: does not apply to a scalar"},
      {"value = \"M\"", "", "[[args]] M value: missing"},
      {"value = \"M\"", "value = \"M\"\n[[args]]\nname = \"tmA\"\ntensor_map = \"Q\"\nbox = [\"BM\", \"BK\"]",
       "[[args]] tmA tensor_map: 'Q' is not a buffer declared before it in [[args]]"},
      {"value = \"M\"", "value = \"M\"\n[[args]]\nname = \"tmA\"\ntensor_map = \"M\"\nbox = [\"BM\", \"BK\"]",
       "[[args]] tmA tensor_map: 'M' is not a buffer declared before it in [[args]]"},
      {"value = \"M\"", "value = \"M\"\n[[args]]\nname = \"tmA\"\ntensor_map = \"A\"\nbox = [\"BK\"]",
       "[[args]] tmA box: needs one expression per dim of A's shape (2; at most 5)"},
      {"value = \"M\"", "value = \"M\"\n[[args]]\nname = \"tmA\"\ntensor_map = \"A\"\nbox = [\"BM\", \"BQ\"]",
       "[[args]] tmA box[1]: unknown variable 'BQ' in 'BQ'"},
      {"value = \"M\"",
       "value = \"M\"\n[[args]]\nname = \"tmA\"\ntensor_map = \"A\"\nbox = [\"BM\", \"BK\"]\nswizzle = 48",
       "[[args]] tmA swizzle: expected 0, 32, 64 or 128 (bytes)"},
      {"value = \"M\"",
       "value = \"M\"\n[[args]]\nname = \"tmA\"\ntensor_map = \"A\"\nbox = [\"BM\", \"BK\"]\ndir = \"in\"",
       "[[args]] tmA dir: "},
      {"name = \"C\"", "name = \"A\"", "[[args]] A name: 'A' appears twice"},
      {"reference = \"reference.cu:gemm_ref\"", "reference = \"reference.cu\"",
       "[check] reference: expected \"file:kernel\", got 'reference.cu'"},
      {"reference = \"reference.cu:gemm_ref\"", "reference = \"missing.cu:gemm_ref\"",
       "[check] reference: file 'missing.cu' is not in the op folder"},
      {"rtol = 1e-2", "rtol = \"tight\"", "[check] rtol: expected a number"},
      {"max_mismatch = 0.0", "max_mismatch = 2.0", "[check] max_mismatch: expected a share between 0 and 1"},
      {"flops = \"2*M*N*K\"", "flops = \"2*M*N*Z\"", "[metrics] flops: unknown variable 'Z' in '2*M*N*Z'"},
      {"[metrics]", "[metric]", "[metric]: unknown table"},
      {"[metrics]", "[arch_defaults]\nsm8 = { BM = 128, BN = 128, BK = 32, STAGES = 3 }\n\n[metrics]",
       "[arch_defaults] sm8: expected an architecture name like sm_80 or sm_90a"},
      {"[metrics]", "[arch_defaults]\nsm_89 = { BM = 96, BN = 128, BK = 32, STAGES = 3 }\n\n[metrics]",
       "[arch_defaults] sm_89 BM: 96 is not one of the values in [params] BM"},
      {"[metrics]", "[arch_defaults]\nsm_89 = { BM = 128 }\n\n[metrics]",
       "[arch_defaults] sm_89: no value for param 'BN'"},
  };
  for (const BadCase& c : cases) {
    auto spec = ParseOpSpec(GemmPackage(Replace(kGemmToml, c.from, c.to)), "ops/gemm");
    ASSERT_FALSE(spec.ok()) << "accepted: " << c.to;
    const std::string& msg = spec.status().message();
    EXPECT_EQ(msg.rfind(std::string("ops/gemm/op.toml: ") + c.expect, 0), 0u) << "got: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// A tensor-map argument describes a buffer declared before it; the plan
// gives its box (and every buffer's extents) per config, and the kernel hash
// moves with the box.
TEST(OpSpec, TensorMapArgsPlanTheirBoxAndEnterTheKernelHash) {
  const std::string with_map =
      Replace(kGemmToml, "value = \"M\"",
              "value = \"M\"\n[[args]]\nname = \"tmA\"\ntensor_map = \"A\"\nbox = [\"BM/2\", \"BK\"]\nswizzle = 64");
  auto spec = ParseOpSpec(GemmPackage(with_map), "ops/gemm");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->args.size(), 4u);
  const ArgSpec& map = spec->args[3];
  EXPECT_EQ(map.kind, ArgSpec::Kind::kTensorMap);
  EXPECT_EQ(map.map_of, "A");
  EXPECT_EQ(map.swizzle, 64);
  const DeviceInfo* h100 = FindKnownGpu("h100-80gb-hbm3");
  ASSERT_NE(h100, nullptr);
  Shape shape;
  shape.dims = {{"M", 1000}, {"N", 512}, {"K", 72}};
  auto plan = PlanLaunch(*spec, "f16", spec->default_config, shape, *h100);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->arg_extents[0], (std::vector<int64_t>{1000, 72}));  // A
  EXPECT_EQ(plan->arg_extents[3], (std::vector<int64_t>{64, 32}));    // BM/2, BK
  EXPECT_EQ(plan->arg_elems[3], 0);
  EXPECT_TRUE(plan->arg_extents[2].empty());  // a scalar

  // A box the copy engine cannot move is refused at planning, naming the field.
  auto wide = ParseOpSpec(GemmPackage(Replace(with_map, "\"BM/2\"", "\"BM*4\"")), "ops/gemm");
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  auto refused = PlanLaunch(*wide, "f16", wide->default_config, shape, *h100);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("[[args]] tmA box[0]"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("from 1 to 256"), std::string::npos) << refused.status().message();

  auto plain = ParseOpSpec(GemmPackage(), "ops/gemm");
  auto other_box = ParseOpSpec(GemmPackage(Replace(with_map, "\"BM/2\"", "\"BM\"")), "ops/gemm");
  ASSERT_TRUE(plain.ok() && other_box.ok());
  EXPECT_NE(KernelHash(*spec, "t"), KernelHash(*plain, "t"));
  EXPECT_NE(KernelHash(*spec, "t"), KernelHash(*other_box, "t"));
}

const std::string kScheduledDir = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/scheduled";

TEST(OpSpec, StringAndBooleanAxesReachRulesLaunchAndMacros) {
  const DeviceInfo* h100 = FindKnownGpu("h100-80gb-hbm3");
  ASSERT_NE(h100, nullptr);
  auto spec = LoadOpSpec(kScheduledDir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->axes.size(), 3u);
  EXPECT_EQ(spec->axes[0].kind(), ParamValue::Kind::kInt);
  EXPECT_EQ(spec->axes[1].kind(), ParamValue::Kind::kString);
  EXPECT_EQ(spec->axes[2].kind(), ParamValue::Kind::kBool);
  EXPECT_EQ(spec->default_config.Canonical(), "BLOCK=256,SCHEDULE=direct,STAGE_IN_SMEM=false");
  // The rules hold numbers; Written gives them back as op.toml has them.
  ASSERT_EQ(spec->constraints.size(), 3u);
  EXPECT_EQ(spec->constraints[1].find('"'), std::string::npos);
  EXPECT_EQ(spec->Written(spec->constraints[1]), "!STAGE_IN_SMEM || SCHEDULE == \"blocked\"");
  EXPECT_EQ(spec->Written("BLOCK <= max_threads"), "BLOCK <= max_threads");

  // The rules decide legality by the strings: 11 of the 18 raw points.
  auto configs = EnumerateConfigs(*spec, *h100);
  ASSERT_TRUE(configs.ok()) << configs.status().message();
  EXPECT_EQ(configs->size(), 11u);
  for (const Config& c : *configs) {
    const std::string text = c.Canonical();
    EXPECT_TRUE(text.find("STAGE_IN_SMEM=true") == std::string::npos || text.find("SCHEDULE=blocked") != std::string::npos)
        << text;
    EXPECT_FALSE(text.find("SCHEDULE=grid_stride") != std::string::npos && text.find("BLOCK=128") != std::string::npos)
        << text;
  }

  // The launch reads them: a grid-stride walk is one block per SM.
  Config stride{{{"BLOCK", 256}, {"SCHEDULE", ParamValue::String("grid_stride")}, {"STAGE_IN_SMEM", ParamValue::Bool(false)}}};
  Config staged{{{"BLOCK", 256}, {"SCHEDULE", ParamValue::String("blocked")}, {"STAGE_IN_SMEM", ParamValue::Bool(true)}}};
  const Shape shape{{{"N", 1 << 20}}};
  auto p1 = PlanLaunch(*spec, "f16", stride, shape, *h100);
  ASSERT_TRUE(p1.ok()) << p1.status().message();
  EXPECT_EQ(p1->grid[0], h100->num_sms);
  EXPECT_EQ(p1->smem_bytes, 0);
  auto p2 = PlanLaunch(*spec, "f16", staged, shape, *h100);
  ASSERT_TRUE(p2.ok()) << p2.status().message();
  EXPECT_EQ(p2->grid[0], (1 << 20) / (256 * 4));
  EXPECT_EQ(p2->smem_bytes, 256 * 4 * 4);

  // The documented macro spelling.
  EXPECT_EQ(ParamMacros(*spec, staged),
            (std::vector<std::string>{"BLOCK=256", "SCHEDULE=blocked", "SCHEDULE_direct=0", "SCHEDULE_grid_stride=0",
                                      "SCHEDULE_blocked=1", "STAGE_IN_SMEM=1"}));
}

TEST(OpSpec, CategoricalMisusesAreOneLineErrorsNamingTheField) {
  auto package = ReadOpPackage(kScheduledDir);
  ASSERT_TRUE(package.ok());
  const std::string toml = package->at("op.toml");
  const BadCase cases[] = {
      {"\"SCHEDULE != \\\"grid_stride\\\" || BLOCK >= 256\"", "\"SCHEDULE != 2\"",
       "[constraints] rules[2]: SCHEDULE is a string param"},
      {"\"SCHEDULE != \\\"grid_stride\\\" || BLOCK >= 256\"", "\"BLOCK == \\\"direct\\\"\"",
       "[constraints] rules[2]: BLOCK is compared with the string \"direct\", but it is not a string param"},
      {"\"SCHEDULE != \\\"grid_stride\\\" || BLOCK >= 256\"", "\"SCHEDULE != \\\"gridstride\\\"\"",
       "[constraints] rules[2]: \"gridstride\" is not one of the values of SCHEDULE"},
      {"smem  = \"STAGE_IN_SMEM ? BLOCK * 4 * 4 : 0\"", "smem  = \"SCHEDULE * 4\"", "[launch] smem: SCHEDULE is a string param"},
      {"SCHEDULE = \"direct\",", "SCHEDULE = \"diagonal\",", "[op] default SCHEDULE: diagonal is not one of the values"},
      {"SCHEDULE = \"direct\",", "SCHEDULE = 1,", "[op] default SCHEDULE: 1 is not one of the values"},
      {"\"grid_stride\", \"blocked\"]", "\"grid-stride\", \"blocked\"]",
       "[params] SCHEDULE: \"grid-stride\" is not a macro token"},
      {"STAGE_IN_SMEM = [false, true]", "STAGE_IN_SMEM = [false, true]\nSCHEDULE_direct = [1]",
       "[params] SCHEDULE: value direct makes the macro SCHEDULE_direct, which is also the name of a param, a dim"},
      {"\"grid_stride\", \"blocked\"]", "\"grid_stride\", \"BLOCK\"]",
       "[params] SCHEDULE: value BLOCK is also the name of a param or dim"},
  };
  for (const BadCase& c : cases) {
    ASSERT_NE(toml.find(c.from), std::string::npos) << c.from;
    OpPackage bad = *package;
    bad["op.toml"] = Replace(toml, c.from, c.to);
    auto spec = ParseOpSpec(bad, "ops/scheduled");
    ASSERT_FALSE(spec.ok()) << "accepted: " << c.to;
    const std::string& msg = spec.status().message();
    EXPECT_EQ(msg.rfind(std::string("ops/scheduled/op.toml: ") + c.expect, 0), 0u) << "got: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(OpSpec, ABaselineNamesItsLibraryBuffersAndSizes) {
  // The fixture has one input: it stands for both factors.
  const std::string good = "[baseline]\nlibrary = \"cublaslt\"\na = \"A\"\nb = \"A\"\nc = \"C\"\nm = \"M\"\nn = \"N\"\nk = \"K\"\n";
  auto spec = ParseOpSpec(GemmPackage(std::string(kGemmToml) + "\n" + good), "ops/gemm");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_TRUE(spec->baseline.has_value());
  EXPECT_EQ(spec->baseline->library, "cublaslt");
  EXPECT_EQ(spec->baseline->c, "C");
  // Not in the kernel hash: a baseline changes no config's figure.
  auto plain = ParseOpSpec(GemmPackage(kGemmToml), "ops/gemm");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(KernelHash(*spec, "13.0"), KernelHash(*plain, "13.0"));
  const std::pair<std::pair<const char*, const char*>, const char*> bad[] = {
      {{"library = \"cublaslt\"", "library = \"rocblas\""}, "[baseline] library: unknown library 'rocblas' (expected cublaslt)"},
      {{"a = \"A\"", "a = \"X\""}, "[baseline] a: 'X' is not a buffer of [[args]]"},
      {{"a = \"A\"", "a = \"M\""}, "[baseline] a: 'M' is not a buffer of [[args]]"},
      {{"c = \"C\"", "c = \"A\""}, "[baseline] c: 'A' must be an output"},
      {{"a = \"A\"", "a = \"C\""}, "[baseline] a: 'C' must be an input"},
      {{"k = \"K\"", "k = \"K * BM\""}, "[baseline] k: unknown variable 'BM'"},
      {{"k = \"K\"\n", ""}, "[baseline] k: missing"},
      {{"k = \"K\"", "k = \"K\"\nalpha = 2"}, "[baseline] alpha: unknown field"},
  };
  for (const auto& [edit, want] : bad) {
    std::string text = good;
    text.replace(text.find(edit.first), std::string(edit.first).size(), edit.second);
    auto r = ParseOpSpec(GemmPackage(std::string(kGemmToml) + "\n" + text), "ops/gemm");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message().rfind(std::string("ops/gemm/op.toml: ") + want, 0), 0u) << r.status().message();
  }
}

TEST(OpSpec, MissingTablesAndFiles) {
  auto no_launch = ParseOpSpec(GemmPackage(Replace(kGemmToml, "[launch]", "[launchx]")), "ops/gemm");
  ASSERT_FALSE(no_launch.ok());
  EXPECT_EQ(no_launch.status().message(), "ops/gemm/op.toml: [launchx]: unknown table");

  std::string toml = kGemmToml;
  toml = toml.substr(0, toml.find("[[args]]"));
  auto no_args = ParseOpSpec(GemmPackage(toml), "ops/gemm");
  ASSERT_FALSE(no_args.ok());
  EXPECT_EQ(no_args.status().message().rfind("ops/gemm/op.toml: [[args]]: missing", 0), 0u);

  OpPackage empty;
  auto none = ParseOpSpec(empty, "ops/gemm");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "ops/gemm/op.toml: missing from the op package");
}

TEST(OpSpec, DigestCoversSourcesAndCompileFieldsOnly) {
  auto base = ParseOpSpec(GemmPackage(), "ops/gemm");
  ASSERT_TRUE(base.ok());
  const std::string digest = base->SourceDigest();
  EXPECT_EQ(digest.size(), 32u);
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(digest, ParseOpSpec(GemmPackage(), "elsewhere")->SourceDigest());

  // Axes, shapes, launch geometry and metrics do not change the machine code.
  auto axes = ParseOpSpec(GemmPackage(Replace(kGemmToml, "BM = [64, 128, 256]", "BM = [32, 64, 128, 256]")), "x");
  ASSERT_TRUE(axes.ok());
  EXPECT_EQ(axes->SourceDigest(), digest);

  // Sources, headers, kernel name, options and arch_specific do.
  OpPackage header = GemmPackage();
  header["common.h"] += "// changed\n";
  OpPackage reference = GemmPackage();
  reference["reference.cu"] += "\n";
  OpPackage unrelated = GemmPackage();
  unrelated["notes.h"] = "not included anywhere";
  EXPECT_NE(ParseOpSpec(header, "x")->SourceDigest(), digest);
  EXPECT_NE(ParseOpSpec(reference, "x")->SourceDigest(), digest);
  EXPECT_EQ(ParseOpSpec(unrelated, "x")->SourceDigest(), digest);
  auto opts = ParseOpSpec(
      GemmPackage(Replace(kGemmToml, "kernel  = \"gemm\"", "kernel  = \"gemm\"\noptions = [\"-use_fast_math\"]")),
      "x");
  ASSERT_TRUE(opts.ok()) << opts.status().message();
  EXPECT_NE(opts->SourceDigest(), digest);
  auto arch = ParseOpSpec(
      GemmPackage(Replace(kGemmToml, "kernel  = \"gemm\"", "kernel  = \"gemm\"\narch_specific = true")), "x");
  ASSERT_TRUE(arch.ok()) << arch.status().message();
  EXPECT_TRUE(arch->arch_specific);
  EXPECT_NE(arch->SourceDigest(), digest);
  OpSpec renamed = *base;
  renamed.kernel = "gemm2";
  EXPECT_NE(renamed.SourceDigest(), digest);
}

// A measurement's identity: launch geometry, argument init distributions
// and check settings change the kernel hash (new rows), though not the
// machine code; axes and metrics change neither.
TEST(OpSpec, KernelHashCoversWhatChangesAMeasurement) {
  auto base = ParseOpSpec(GemmPackage(), "ops/gemm");
  ASSERT_TRUE(base.ok());
  const std::string hash = KernelHash(*base, "13.0");
  const std::pair<const char*, const char*> changes[] = {
      {"grid  = [\"cdiv(N, BN)\", \"cdiv(M, BM)\", \"1\"]", "grid  = [\"cdiv(N, BN)\", \"cdiv(M, BM)\", \"2\"]"},
      {"block = [\"256\", \"1\", \"1\"]", "block = [\"128\", \"1\", \"1\"]"},
      {"smem  = \"(BM*BK + BK*BN) * STAGES * dsize\"", "smem  = \"(BM*BK + BK*BN) * STAGES * dsize + 16\""},
      {"init = \"uniform(-1,1)\"", "init = \"uniform(-2,2)\""},
      {"rtol = 1e-2", "rtol = 1e-3"},
  };
  for (const auto& [from, to] : changes) {
    ASSERT_NE(std::string(kGemmToml).find(from), std::string::npos) << from;
    auto changed = ParseOpSpec(GemmPackage(Replace(kGemmToml, from, to)), "x");
    ASSERT_TRUE(changed.ok()) << to << ": " << changed.status().message();
    EXPECT_EQ(changed->SourceDigest(), base->SourceDigest()) << to;
    EXPECT_NE(changed->MeasureDigest(), base->MeasureDigest()) << to;
    EXPECT_NE(KernelHash(*changed, "13.0"), hash) << to;
  }
  auto axes = ParseOpSpec(GemmPackage(Replace(kGemmToml, "BM = [64, 128, 256]", "BM = [32, 64, 128, 256]")), "x");
  ASSERT_TRUE(axes.ok());
  EXPECT_EQ(KernelHash(*axes, "13.0"), hash);
}

TEST(OpSpec, ChecksMayUseACheckerOrBeSkippedAndInputsMayBeIntsZerosOrFiles) {
  const std::string reference = "reference = \"reference.cu:gemm_ref\"";
  auto base = ParseOpSpec(GemmPackage(), "ops/gemm");
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->check.mode, CheckSpec::Mode::kReference);

  OpPackage with_checker = GemmPackage(Replace(kGemmToml, reference, "checker = \"check.cu:gemm_check\""));
  with_checker["check.cu"] = "extern \"C\" __global__ void gemm_check() {}\n";
  auto checker = ParseOpSpec(with_checker, "x");
  ASSERT_TRUE(checker.ok()) << checker.status().message();
  EXPECT_EQ(checker->check.mode, CheckSpec::Mode::kChecker);
  EXPECT_EQ(checker->check.reference_file, "check.cu");
  EXPECT_EQ(checker->check.reference_kernel, "gemm_check");

  std::string skip_toml = Replace(kGemmToml, reference, "skip = true");
  skip_toml = Replace(skip_toml, "grid  = [\"cdiv(N, 16)\", \"cdiv(M, 16)\", \"1\"]\n", "");
  skip_toml = Replace(skip_toml, "block = [\"16\", \"16\", \"1\"]\n", "");
  auto skip = ParseOpSpec(GemmPackage(skip_toml), "x");
  ASSERT_TRUE(skip.ok()) << skip.status().message();
  EXPECT_EQ(skip->check.mode, CheckSpec::Mode::kSkip);
  // How a config is judged is part of what was measured.
  EXPECT_NE(KernelHash(*skip, "13.0"), KernelHash(*base, "13.0"));
  EXPECT_NE(KernelHash(*checker, "13.0"), KernelHash(*base, "13.0"));

  for (const char* init : {"zeros", "int(-3, 3)", "file(a.npy)"}) {
    OpPackage p = GemmPackage(Replace(kGemmToml, "init = \"uniform(-1,1)\"", std::string("init = \"") + init + "\""));
    p["a.npy"] = "\x93NUMPY...";
    auto spec = ParseOpSpec(p, "x");
    EXPECT_TRUE(spec.ok()) << init << ": " << spec.status().message();
  }
  // A file input's bytes are the input: they are in the kernel hash.
  OpPackage file = GemmPackage(Replace(kGemmToml, "init = \"uniform(-1,1)\"", "init = \"file( a.npy )\""));
  file["a.npy"] = "one";
  auto one = ParseOpSpec(file, "x");
  file["a.npy"] = "two";
  auto two = ParseOpSpec(file, "x");
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->args[0].init, "file(a.npy)");
  EXPECT_NE(KernelHash(*one, "13.0"), KernelHash(*two, "13.0"));

  struct Bad {
    std::string from, to, message;
  };
  const std::vector<Bad> bad = {
      {reference, reference + "\nskip = true", "needs exactly one of reference"},
      {reference, "checker = \"check.cu:gemm_check\"", "file 'check.cu' is not in the op folder"},
      {reference, "skip = \"yes\"", "[check] skip: expected true or false"},
      {"init = \"uniform(-1,1)\"", "init = \"int(3,1)\"", "int(lo,hi) needs lo <= hi"},
      {"init = \"uniform(-1,1)\"", "init = \"int(0.5,1)\"", "int(lo,hi) takes two integers"},
      {"init = \"uniform(-1,1)\"", "init = \"file(missing.npy)\"", "file 'missing.npy' is not in the op folder"},
      {"init = \"uniform(-1,1)\"", "init = \"file(a.txt)\"", "expected a .npy file"},
  };
  for (const Bad& b : bad) {
    auto spec = ParseOpSpec(GemmPackage(Replace(kGemmToml, b.from, b.to)), "x");
    ASSERT_FALSE(spec.ok()) << b.to;
    EXPECT_NE(spec.status().message().find(b.message), std::string::npos) << spec.status().message();
  }
}

TEST(OpSpec, AnOpWithoutAReferenceMayBeCheckedAgainstItsDefaultConfig) {
  const std::string check =
      "reference = \"reference.cu:gemm_ref\"\ngrid  = [\"cdiv(N, 16)\", \"cdiv(M, 16)\", \"1\"]\n"
      "block = [\"16\", \"16\", \"1\"]\n";
  const std::string toml = Replace(kGemmToml, check, "default = true\n");
  OpPackage package = GemmPackage(toml);
  package.erase("reference.cu");
  auto spec = ParseOpSpec(package, "x");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->check.mode, CheckSpec::Mode::kDefault);
  EXPECT_FALSE(spec->check.HasKernel());
  EXPECT_EQ(spec->check.rtol, 1e-2);
  // What a row was checked against is part of what was measured.
  EXPECT_NE(KernelHash(*spec, "13.0"), KernelHash(*ParseOpSpec(GemmPackage(), "x"), "13.0"));

  struct Bad {
    std::string from, to, message;
  };
  const std::vector<Bad> bad = {
      {"default = true", "default = true\nskip = true", "[check]: skip = true and default = true exclude each other"},
      {"default = true", "default = 1", "[check] default: expected true or false"},
      {"default = true", "default = true\ngrid = [\"1\", \"1\", \"1\"]", "[check] grid: does not apply with default = true"},
      {"default = true", "default = true\nreference = \"reference.cu:gemm_ref\"", "needs exactly one of"},
      // The default's outputs are compared element by element: a buffer or
      // scalar sized by a param would differ from config to config.
      {"shape = [\"M\", \"N\"]", "shape = [\"M\", \"N * BM\"]",
       "[[args]] C shape[1]: unknown variable 'BM' in 'N * BM' (with [check] default = true, buffers and scalars see dims and dsize only)"},
      {"value = \"M\"", "value = \"BK\"", "[[args]] M value"},
  };
  for (const Bad& b : bad) {
    OpPackage p = GemmPackage(Replace(toml, b.from, b.to));
    auto bad_spec = ParseOpSpec(p, "x");
    ASSERT_FALSE(bad_spec.ok()) << b.to;
    EXPECT_NE(bad_spec.status().message().find(b.message), std::string::npos) << bad_spec.status().message();
  }
}

TEST(OpSpec, BucketsNameDimsAndSayHowLookupsRoundThem) {
  const std::string dims = "dims    = [\"M\", \"N\", \"K\"]";
  auto spec = ParseOpSpec(GemmPackage(Replace(kGemmToml, dims, dims + "\nbuckets = { M = \"pow2\", N = \"exact\", K = [1024, 4096] }")), "x");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->buckets.size(), 2u);  // exact is no bucket
  EXPECT_EQ(spec->buckets.at("M").Of(100), 128);
  EXPECT_EQ(spec->buckets.at("M").Of(1), 1);
  EXPECT_EQ(spec->buckets.at("K").Of(1), 1024);
  EXPECT_EQ(spec->buckets.at("K").Of(1025), 4096);
  EXPECT_EQ(spec->buckets.at("K").Of(5000), 4096);
  // Lookups only: the kernel hash does not move.
  EXPECT_EQ(KernelHash(*spec, "13.0"), KernelHash(*ParseOpSpec(GemmPackage(), "x"), "13.0"));
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"buckets = { Q = \"pow2\" }", "[op] buckets Q: 'Q' is not a dim"},
           {"buckets = { M = \"log\" }", "expected \"exact\", \"pow2\" or a list"},
           {"buckets = { M = [64, 32] }", "bucket values must ascend"},
           {"buckets = { M = [0, 32] }", "outside [1, 2^40]"},
           {"buckets = { M = [] }", "1 to 4096 values"}}) {
    auto bad = ParseOpSpec(GemmPackage(Replace(kGemmToml, dims, dims + "\n" + text)), "x");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(message), std::string::npos) << bad.status().message();
  }
}

TEST(OpSpec, RulesThatReadDimsAreShapeRules) {
  auto spec = ParseOpSpec(GemmPackage(Replace(kGemmToml, "rules = [\"(BM*BK + BK*BN) * STAGES * dsize <= smem_optin\"]",
                                              "rules = [\"BM <= M\", \"BK*STAGES <= 256\", \"BN*BK <= N*K\"]")),
                          "x");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->constraints, std::vector<std::string>{"BK*STAGES <= 256"});
  EXPECT_EQ(spec->shape_constraints, (std::vector<std::string>{"BM <= M", "BN*BK <= N*K"}));
}

TEST(OpSpec, KernelHashAddsTheToolchain) {
  auto spec = ParseOpSpec(GemmPackage(), "ops/gemm");
  ASSERT_TRUE(spec.ok());
  const std::string a = KernelHash(*spec, "13.0");
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a, KernelHash(*spec, "13.0"));
  EXPECT_NE(a, KernelHash(*spec, "12.8"));
  EXPECT_NE(a, KernelHash(*spec, "sim"));
  EXPECT_NE(a, spec->SourceDigest());
}

TEST(OpSpec, ArchDefaultsAreConfigsOfTheSpace) {
  auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->arch_defaults.size(), 2u);
  const Config& sm89 = spec->arch_defaults.at("sm_89");
  EXPECT_NE(sm89.Canonical().find("BN=128"), std::string::npos) << sm89.Canonical();
  EXPECT_EQ(sm89.params.size(), spec->axes.size());
}

// Each bound of base/limits.h on a package is refused in linear time with
// one line naming the bound, the value and the limit, where the old parser
// spent seconds (a duplicate check per value, a lookup per param) or took
// the package whole.
TEST(OpSpec, InputsOverTheLimitsAreRefusedNamingTheBound) {
  // One axis of 200,000 distinct values.
  std::string values = "[1";
  for (int i = 2; i <= 200000; ++i) values += ", " + std::to_string(i);
  values += "]";
  std::string huge_axis = Replace(kGemmToml, "STAGES = [2, 3, 4]", "STAGES = [2, 3, 4]\nX = " + values);
  huge_axis = Replace(huge_axis, "STAGES = 3 }", "STAGES = 3, X = 1 }");
  Result<OpSpec> spec = Status::OK();
  spec = ParseOpSpec(GemmPackage(huge_axis), "op 'wide'");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("[params] X: 200000 values, more than the limit of " +
                                         std::to_string(kMaxAxisValues) + " values per axis"),
            std::string::npos)
      << spec.status().message();
  // Below the bound, a repeated value is still found (by a set, not a scan).
  spec = ParseOpSpec(GemmPackage(Replace(kGemmToml, "BK = [32, 64]", "BK = [32, 64, 32]")), "op");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("value 32 appears twice"), std::string::npos);

  // 100,000 single-valued params, each in the default.
  std::string params, defaults;
  for (int i = 0; i < 100000; ++i) {
    params += "P" + std::to_string(i) + " = [1]\n";
    defaults += ", P" + std::to_string(i) + " = 1";
  }
  std::string many = Replace(kGemmToml, "STAGES = [2, 3, 4]", "STAGES = [2, 3, 4]\n" + params);
  many = Replace(many, "STAGES = 3 }", "STAGES = 3" + defaults + " }");
  spec = ParseOpSpec(GemmPackage(many), "op 'many'");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("[params]: 100004 params, more than the limit of " +
                                         std::to_string(kMaxOpParams) + " params per op"),
            std::string::npos)
      << spec.status().message().substr(0, 300);

  // Dims beyond what a lookup takes.
  std::string dims = "dims    = [\"M\", \"N\", \"K\"";
  for (int i = 0; i < 20; ++i) dims += ", \"D" + std::to_string(i) + "\"";
  spec = ParseOpSpec(GemmPackage(Replace(kGemmToml, "dims    = [\"M\", \"N\", \"K\"", dims)), "op");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("[op] dims: 23 dims, more than the limit of 16 dims per op"),
            std::string::npos)
      << spec.status().message();

  // A package as the coordinator receives it: files and bytes are bounded
  // whoever read the folder.
  OpPackage big = GemmPackage();
  big["data.bin"] = std::string(kMaxPackageBytes, 'x');
  spec = ParseOpSpec(big, "op 'big'");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("bytes, more than the limit of " + std::to_string(kMaxPackageBytes) +
                                         " bytes per package"),
            std::string::npos)
      << spec.status().message();
  OpPackage crowded = GemmPackage();
  for (size_t i = 0; i < kMaxPackageFiles; ++i) crowded["f" + std::to_string(i) + ".h"] = "";
  spec = ParseOpSpec(crowded, "op 'crowded'");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find(std::to_string(kMaxPackageFiles + 4) + " files, more than the limit of " +
                                         std::to_string(kMaxPackageFiles) + " files per package"),
            std::string::npos)
      << spec.status().message();
  // At the bounds, a package parses.
  OpPackage full = GemmPackage();
  full["data.bin"] = std::string(kMaxPackageBytes / 2, 'x');
  EXPECT_TRUE(ParseOpSpec(full, "op").ok());
}

// A package is parsed once per process and origin; what differs is parsed
// apart, and a package that does not parse is refused each time.
TEST(OpSpec, SharedSpecsParseAPackageOncePerOrigin) {
  const OpPackage p = GemmPackage();
  auto first = SharedOpSpec(p, "op 'gemm'");
  auto again = SharedOpSpec(p, "op 'gemm'");
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->get(), again->get());
  EXPECT_EQ((*first)->origin, "op 'gemm'");
  auto elsewhere = SharedOpSpec(p, "stored op 'gemm'");
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_NE(elsewhere->get(), first->get());
  EXPECT_EQ((*elsewhere)->origin, "stored op 'gemm'");
  OpPackage changed = p;
  changed["common.h"] += "// another version\n";
  auto other = SharedOpSpec(changed, "op 'gemm'");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->get(), first->get());
  OpPackage broken = p;
  broken["op.toml"] = "[op";
  EXPECT_FALSE(SharedOpSpec(broken, "op 'gemm'").ok());
  EXPECT_FALSE(SharedOpSpec(broken, "op 'gemm'").ok());
}

TEST(OpSpec, DTypeSize) {
  EXPECT_EQ(DTypeSize("f16"), 2);
  EXPECT_EQ(DTypeSize("bf16"), 2);
  EXPECT_EQ(DTypeSize("f32"), 4);
  EXPECT_EQ(DTypeSize("i32"), 4);
  EXPECT_EQ(DTypeSize("i64"), 8);
  EXPECT_EQ(DTypeSize("f8"), 0);
  EXPECT_EQ(DTypeSize(""), 0);
}

// The dtype table is what the op spec checks: its op dtypes are the ones
// an [op] accepts and names in its error.
TEST(OpSpec, TheDTypeTableIsWhatTheSpecChecks) {
  for (const DTypeInfo& d : kDTypeTable) {
    EXPECT_EQ(FindDType(d.name), &d);
    EXPECT_TRUE(!d.op || d.buffer) << d.name;  // an op's dtype is its buffers' $dtype
  }
  EXPECT_EQ(FindDType("f8"), nullptr);
  // i32 is a buffer's dtype, not an op's.
  auto bad = ParseOpSpec(GemmPackage(Replace(kGemmToml, "dtypes  = [\"f16\", \"bf16\"]", "dtypes  = [\"i32\"]")), "op");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown dtype 'i32' (expected f16 | bf16 | f32)"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace tune
