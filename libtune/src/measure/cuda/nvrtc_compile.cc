#include "measure/cuda/nvrtc_compile.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "measure/confine.h"
#include "measure/package_dir.h"
#include "base/clock.h"
#include "base/log.h"
#include "measure/cuda/cuda_backend.h"
#include "measure/cuda/nvrtc_library.h"

namespace tune::cuda {
namespace {

namespace fs = std::filesystem;

// Bumped whenever BaseOptions or the cache entry format changes: the kernel
// hash does not see this backend's own options, the cache key must.
constexpr int kCompileRecipe = 1;
constexpr char kCacheMagic[] = "TFCUBIN1\n";

std::string NvrtcErrorText(const Nvrtc& n, nvrtcResult r, const char* call, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + n.nvrtcGetErrorString(r);
}

// In RunNvrtcHere, with the table `n`: a failed call ends the compile.
#define TUNE_NVRTC_CHECK(call)                                      \
  do {                                                              \
    nvrtcResult _r = (call);                                        \
    if (_r != NVRTC_SUCCESS) {                                      \
      out.error = NvrtcErrorText(n, _r, #call, __FILE__, __LINE__); \
      return out;                                                   \
    }                                                               \
  } while (0)

// The folder NVRTC was loaded from; empty without it.
std::filesystem::path NvrtcFolder() {
  auto n = LoadNvrtc();
  return n.ok() && !(*n)->path.empty() ? std::filesystem::path((*n)->path).parent_path() : std::filesystem::path();
}

bool IsResourceRejection(const std::string& log) {
  return log.find("too much shared data") != std::string::npos ||
         log.find("too much local data") != std::string::npos ||
         log.find("uses too much") != std::string::npos ||
         log.find("too many resources") != std::string::npos;
}

// The ptxas report is noise once a compile succeeded; warnings are kept.
std::string StripPtxasInfo(const std::string& log) {
  std::istringstream in(log);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("ptxas info", 0) == 0 || line.rfind("ptxas         .", 0) == 0) continue;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out += line + "\n";
  }
  return out;
}

std::string CacheFile(const std::string& cache_dir, const std::string& kernel_hash,
                      const std::string& id, const std::string& dtype, const std::string& arch) {
  return cache_dir + "/" + kernel_hash + "/" + id + "-" + dtype + "-" + arch + "-nvrtc" +
         NvrtcVersionString() + "-r" + std::to_string(kCompileRecipe) + ".cubin";
}

// Entry: magic, one line of resources and the cubin size, the cubin bytes.
bool ReadCacheEntry(const std::string& path, std::string* cubin, KernelResources* res) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.rfind(kCacheMagic, 0) != 0) return false;
  size_t line_end = data.find('\n', sizeof(kCacheMagic) - 1);
  if (line_end == std::string::npos) return false;
  std::istringstream hdr(data.substr(sizeof(kCacheMagic) - 1, line_end - (sizeof(kCacheMagic) - 1)));
  long long regs = -1, smem = -1, local = -1, size = -1;
  hdr >> regs >> smem >> local >> size;
  if (!hdr || regs < 0 || smem < 0 || local < 0 || size <= 0) return false;
  if (data.size() - (line_end + 1) != static_cast<size_t>(size)) return false;  // torn or foreign
  *cubin = data.substr(line_end + 1);
  res->registers = static_cast<int>(regs);
  res->static_smem_bytes = smem;
  res->local_bytes = local;
  return true;
}

// Readers see either no file or a whole one: write a private temp file, then
// rename over the final name.
void WriteCacheEntry(const std::string& path, const std::string& cubin, const KernelResources& res) {
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                    std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id())) + "." +
                    std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;  // a read-only cache is not an error, just a slower sweep
    out << kCacheMagic << res.registers << " " << res.static_smem_bytes << " " << res.local_bytes << " "
        << cubin.size() << "\n";
    out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

// A folder of this user's under the shared temporary folder, for packages
// compiled without a cache folder: made 0700 here, refused when another
// user holds the name (whose files would be compiled instead), or that is
// no folder; "" then, which UnpackedPackage refuses.
std::string PrivateTempDir() {
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-" + std::to_string(getuid()));
  ::mkdir(dir.c_str(), 0700);
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) return "";
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) return "";
  return dir.string();
}

// Compiles (or fetches from the cache) `source_file` of the op package with
// `options`, filling `ck`.
void CompileCached(const OpSpec& spec, const std::string& source_file, const std::string& entry,
                   const std::string& cache_id, const std::string& dtype, const std::string& arch,
                   const std::vector<std::string>& options, const std::string& cache_dir,
                   CompiledKernel* ck) {
  const double t0 = NowSeconds();
  auto finish = [&] { ck->compile_seconds = NowSeconds() - t0; };
  std::string cache_path;
  if (!cache_dir.empty()) {
    cache_path = CacheFile(cache_dir, ck->kernel_hash, cache_id, dtype, arch);
    if (ReadCacheEntry(cache_path, &ck->image, &ck->resources)) {
      ck->from_cache = true;
      finish();
      return;
    }
  }
  auto src = spec.package.find(source_file);
  if (src == spec.package.end()) {
    ck->failure = FailureClass::kCompileError;
    ck->failure_message = spec.origin + ": op package has no file " + source_file;
    finish();
    return;
  }
  NvrtcJob job;
  job.file = source_file;
  job.source = src->second;
  job.entry = entry;
  job.options = options;
  if (spec.include_dirs.empty()) {
    // The package's files are the program's headers, by their names.
    for (const auto& [name, text] : spec.package) {
      if (name == "op.toml" || name == source_file) continue;
      job.headers.emplace_back(name, text);
    }
  } else {
    // Headers of include folders name each other relative to themselves,
    // which NVRTC resolves only for files: the package is compiled from a
    // folder, searched after the includer's own folder in the op's order
    // (IncludeCandidates): its include folders, then its root.
    auto dir = UnpackedPackage(spec, cache_dir.empty() ? PrivateTempDir() : cache_dir + "/packages");
    if (!dir.ok()) {
      ck->failure = FailureClass::kCompileError;
      ck->failure_message = dir.status().message();
      finish();
      return;
    }
    job.file = *dir + "/" + source_file;
    std::vector<std::string> search;
    for (const std::string& inc : spec.include_dirs) search.push_back("-I" + *dir + "/" + inc);
    search.push_back("-I" + *dir);
    // Before the include roots' and the toolkit's folders.
    const auto first_dir = std::find_if(job.options.begin(), job.options.end(),
                                        [](const std::string& o) { return o.rfind("-I", 0) == 0; });
    job.options.insert(first_dir, search.begin(), search.end());
  }
  NvrtcResult r = RunNvrtc(job);
  if (!r.ok) {
    ck->failure = IsResourceRejection(r.log) ? FailureClass::kResources : FailureClass::kCompileError;
    ck->failure_message = r.error;
    ck->log = r.log;
    finish();
    return;
  }
  // The kernel the runner will look up must be in what NVRTC made: a
  // misspelt name, or a C++ (mangled) one, fails here with its reason
  // rather than as a launch error on every shape.
  if (Status st = CheckCubinEntries(r.cubin, {entry}); !st.ok()) {
    ck->failure = FailureClass::kCompileError;
    ck->failure_message = source_file + ": " + st.message() + " (is the name right, and the kernel extern \"C\"?)";
    ck->log = StripPtxasInfo(r.log);
    finish();
    return;
  }
  ck->image = std::move(r.cubin);
  ck->resources = r.resources;
  ck->log = StripPtxasInfo(r.log);
  if (!cache_path.empty()) WriteCacheEntry(cache_path, ck->image, ck->resources);
  finish();
}

}  // namespace

std::string DTypeCudaName(const std::string& dtype) {
  const DTypeInfo* d = FindDType(dtype);
  return d ? d->cuda_type : "";
}

const std::string& CudaIncludeDir() {
  static const std::string dir = [] {
    std::vector<fs::path> candidates;
    for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) {
      if (const char* v = std::getenv(env); v && *v) candidates.emplace_back(fs::path(v) / "include");
    }
    if (const fs::path lib = NvrtcFolder(); !lib.empty()) {  // <toolkit>/lib64 or targets/<t>/lib
      candidates.push_back(lib.parent_path() / "include");
      candidates.push_back(lib.parent_path().parent_path() / "include");
    }
    candidates.emplace_back("/usr/local/cuda/include");
    for (const auto& c : candidates) {
      std::error_code ec;
      if (fs::exists(c / "cuda_fp16.h", ec)) return c.string();
    }
    return std::string();
  }();
  return dir;
}

namespace {
IncludeRoots& IncludeRootsOfProcess() {
  static IncludeRoots roots;
  return roots;
}
}  // namespace

const IncludeRoots& ConfiguredIncludeRoots() { return IncludeRootsOfProcess(); }

std::vector<std::string> BaseOptions(const OpSpec& spec, const std::string& dtype, const std::string& arch) {
  std::vector<std::string> o;
  o.push_back("-arch=" + arch);
  o.push_back("-std=c++17");
  std::string upper;
  for (char c : dtype) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  o.push_back("-DTUNE_DTYPE_" + upper);
  o.push_back("-DTUNE_T=" + DTypeCudaName(dtype));
  // The op's include roots, searched after its package (whose headers are
  // NVRTC's in-memory headers) and before the toolkit (a newer CCCL
  // there wins over the toolkit's).
  for (const std::string& name : spec.include_roots) {
    auto it = ConfiguredIncludeRoots().find(name);
    if (it != ConfiguredIncludeRoots().end()) o.push_back("-I" + it->second);
  }
  if (!CudaIncludeDir().empty()) {
    o.push_back("-I" + CudaIncludeDir());
    // CUDA 13 keeps CUB, Thrust and libcu++ in include/cccl/, which nvcc
    // searches by itself and NVRTC does not (CUDA 12 has them in include/).
    std::error_code ec;
    if (fs::is_directory(fs::path(CudaIncludeDir()) / "cccl", ec)) o.push_back("-I" + CudaIncludeDir() + "/cccl");
  }
  // TUNE_T names a type from these headers; declaring it is part of the
  // contract, so an op need not include them itself.
  if (dtype == "f16") o.push_back("--pre-include=cuda_fp16.h");
  if (dtype == "bf16") o.push_back("--pre-include=cuda_bf16.h");
  o.push_back("-Xptxas=-v");  // the resource report, parsed below
  for (const auto& opt : spec.compile_options) o.push_back(opt);
  return o;
}

namespace {

NvrtcResult RunNvrtcHere(const NvrtcJob& job) {
  NvrtcResult out;
  auto loaded = LoadNvrtc();
  if (!loaded.ok()) {
    out.error = loaded.status().message();
    return out;
  }
  const Nvrtc& n = **loaded;
  std::vector<const char*> header_texts, header_names;
  for (const auto& [name, text] : job.headers) {
    header_names.push_back(name.c_str());
    header_texts.push_back(text.c_str());
  }
  nvrtcProgram prog = nullptr;
  TUNE_NVRTC_CHECK(n.nvrtcCreateProgram(&prog, job.source.c_str(), job.file.c_str(),
                                      static_cast<int>(header_texts.size()), header_texts.data(),
                                      header_names.data()));
  struct Destroy {
    const Nvrtc& n;
    nvrtcProgram* p;
    ~Destroy() { n.nvrtcDestroyProgram(p); }
  } destroy{n, &prog};

  std::vector<const char*> opts;
  for (const auto& o : job.options) opts.push_back(o.c_str());
  nvrtcResult compiled = n.nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());

  size_t log_size = 0;
  TUNE_NVRTC_CHECK(n.nvrtcGetProgramLogSize(prog, &log_size));
  if (log_size > 1) {
    out.log.resize(log_size);
    TUNE_NVRTC_CHECK(n.nvrtcGetProgramLog(prog, out.log.data()));
    while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  }
  if (compiled != NVRTC_SUCCESS) {
    // The first error line of the log is the most useful one-liner.
    std::string first;
    std::istringstream in(out.log);
    for (std::string line; std::getline(in, line);) {
      if (line.find("error") != std::string::npos) {
        first = line;
        break;
      }
    }
    out.error = job.file + ": " + n.nvrtcGetErrorString(compiled) + (first.empty() ? "" : ": " + first);
    return out;
  }
  size_t cubin_size = 0;
  TUNE_NVRTC_CHECK(n.nvrtcGetCUBINSize(prog, &cubin_size));
  if (cubin_size == 0) {
    out.error = job.file + ": NVRTC produced no cubin (is -arch a real sm_XY?)";
    return out;
  }
  out.cubin.resize(cubin_size);
  TUNE_NVRTC_CHECK(n.nvrtcGetCUBIN(prog, out.cubin.data()));
  ParsePtxasResources(out.log, job.entry, &out.resources);
  out.ok = true;
  return out;
}

// The folders a compile of `job` may read: its -I folders (the toolkit's,
// include roots, an unpacked package), the folder of a program given by
// path, and NVRTC's own library folder (it loads its builtins from there).
Result<confine::FsRuleset> CompileRuleset(const NvrtcJob& job) {
  auto rules = confine::FsRuleset::Create();
  if (!rules.ok()) return rules.status();
  for (const std::string& o : job.options)
    if (o.rfind("-I", 0) == 0 && o.size() > 2) TUNE_RETURN_IF_ERROR(rules->AllowRead(o.substr(2)));
  if (!job.file.empty() && job.file[0] == '/')
    TUNE_RETURN_IF_ERROR(rules->AllowRead(fs::path(job.file).parent_path().string()));
  if (const fs::path lib = NvrtcFolder(); !lib.empty()) TUNE_RETURN_IF_ERROR(rules->AllowRead(lib.string()));
  return rules;
}

}  // namespace

// NVRTC loads its builtins library on its first compile, by name through
// the loader's search: done here, unconfined and once, a confined compile
// finds it loaded.
void PreloadNvrtcBuiltins() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string name = "libnvrtc-builtins.so." + NvrtcVersionString();
    if (!dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      // Beside libnvrtc, where a toolkit without a loader entry keeps it.
      if (const fs::path lib = NvrtcFolder(); !lib.empty()) dlopen((lib / name).c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
  });
}

NvrtcResult RunNvrtc(const NvrtcJob& job) {
  // NVRTC's preprocessor opens whatever an #include names, in whatever
  // spelling; the package checks (op_confine.h) refuse what they see, and
  // the compile itself runs on a thread that can read nothing else.
  PreloadNvrtcBuiltins();
  auto rules = CompileRuleset(job);
  if (!rules.ok()) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      log::Warn("compile", "compiles are not confined to the op package and the toolkit: " + rules.status().message());
    });
    return RunNvrtcHere(job);
  }
  NvrtcResult out;
  Status st = confine::RunOnConfinedThread(*rules, [&] { out = RunNvrtcHere(job); });
  if (!st.ok()) out.error = job.file + ": cannot confine the compile: " + st.message();
  return out;
}

bool ParsePtxasResources(const std::string& log, const std::string& entry, KernelResources* out) {
  static const std::regex kFunction(R"(Compiling entry function '([^']+)')");
  static const std::regex kRegisters(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  static const std::regex kStack(R"((\d+) bytes stack frame)");
  std::istringstream in(log);
  bool inside = false, found = false;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kFunction)) {
      inside = (m[1] == entry);
      continue;
    }
    if (!inside) continue;
    if (std::regex_search(line, m, kStack)) out->local_bytes = std::stoll(m[1]);
    if (std::regex_search(line, m, kRegisters)) {
      out->registers = std::stoi(m[1]);
      found = true;
      if (std::regex_search(line, m, kSmem)) out->static_smem_bytes = std::stoll(m[1]);
    }
  }
  return found;
}

bool StampKernelHash(const OpSpec& spec, CompiledKernel* ck) {
  ck->kernel_hash = OpHash(spec, NvrtcVersionString());
  if (spec.include_roots.empty()) return true;
  auto digest = IncludeRootsDigest(spec, ConfiguredIncludeRoots());
  if (!digest.ok()) {
    ck->failure = FailureClass::kCompileError;
    ck->failure_message = digest.status().message();
    return false;
  }
  ck->include_digest = *digest;
  ck->kernel_hash = KernelHashWithIncludes(ck->kernel_hash, *digest);
  return true;
}

Status CheckKernelParams(const OpSpec& spec, std::string_view cubin) {
  auto sizes = CubinKernelParamSizes(cubin, spec.kernel);
  if (sizes.status().code() == StatusCode::kNotFound) return Status::OK();  // ptxas kept no record: nothing to hold
  if (!sizes.ok()) return sizes.status();
  std::vector<uint32_t> declared;
  std::string listed;
  for (const ArgSpec& a : spec.args) {
    const uint32_t bytes = a.kind == ArgSpec::Kind::kTensorMap ? 128
                           : a.kind == ArgSpec::Kind::kBuffer  ? 8
                           : a.scalar_type == "i64"            ? 8
                                                               : 4;
    declared.push_back(bytes);
    listed += (listed.empty() ? "" : ", ") + a.name + " (" + std::to_string(bytes) + ")";
  }
  if (*sizes == declared) return Status::OK();
  std::string taken;
  for (uint32_t b : *sizes) taken += (taken.empty() ? "" : ", ") + std::to_string(b);
  return Status::InvalidArgument("kernel '" + spec.kernel + "' takes " + std::to_string(sizes->size()) +
                                 " parameters of " + (taken.empty() ? "no" : taken) + " bytes; [[args]] declares " +
                                 std::to_string(declared.size()) + (listed.empty() ? "" : ": " + listed));
}

CompiledKernel CompileBuiltin(const std::string& source, const std::string& entry, const std::string& dtype,
                              const std::string& arch, const std::string& cache_dir) {
  OpSpec builtin;
  builtin.origin = "tunefarm's builtin kernels";
  const std::string file = "tunefarm_builtin.cu";
  builtin.package[file] = source;
  CompiledKernel ck;
  ck.config_id = "builtin";
  ck.kernel_hash = KernelHash(builtin, NvrtcVersionString());
  ck.arch = arch;
  CompileCached(builtin, file, entry, "builtin", dtype, arch, BaseOptions(builtin, dtype, arch), cache_dir, &ck);
  return ck;
}

}  // namespace tune::cuda

namespace tune {

void SetIncludeRoots(IncludeRoots roots) { cuda::IncludeRootsOfProcess() = std::move(roots); }

CompiledKernel CompileReference(const OpSpec& spec, const std::string& dtype, const std::string& arch,
                                const std::string& cache_dir) {
  CompiledKernel ck;
  ck.config_id = "reference";
  ck.arch = arch;
  if (!cuda::StampKernelHash(spec, &ck)) return ck;
  if (cuda::DTypeCudaName(dtype).empty()) {
    ck.failure = FailureClass::kCompileError;
    ck.failure_message = spec.origin + ": unknown dtype '" + dtype + "'";
    return ck;
  }
  std::vector<std::string> options;
  for (auto& o : cuda::BaseOptions(spec, dtype, arch)) {
    if (o == "-use_fast_math" || o == "--use_fast_math") continue;
    options.push_back(o);
  }
  cuda::CompileCached(spec, spec.check.reference_file, spec.check.reference_kernel, "reference", dtype, arch,
                options, cache_dir, &ck);
  if (ck.failure != FailureClass::kNone) ck.failure_message = "reference: " + ck.failure_message;
  return ck;
}


std::string NvrtcVersionString() {
  static const std::string v = [] {
    int major = 0, minor = 0;
    auto n = cuda::LoadNvrtc();
    if (!n.ok() || (*n)->nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return std::string("unknown");
    return std::to_string(major) + "." + std::to_string(minor);
  }();
  return v;
}

std::string CudaArchFor(const OpSpec& spec, const DeviceInfo& device) {
  return CudaArchOf(spec, device.cc_major, device.cc_minor);
}

bool CubinCached(const OpSpec& spec, const std::string& dtype, const Config& config, const std::string& arch,
                 const std::string& cache_dir) {
  if (cache_dir.empty()) return false;
  CompiledKernel ck;
  if (!cuda::StampKernelHash(spec, &ck)) return false;
  // Read as CompileCached reads it: a torn or foreign entry is a miss there too.
  KernelResources resources;
  return cuda::ReadCacheEntry(cuda::CacheFile(cache_dir, ck.kernel_hash, config.Id(), dtype, arch), &ck.image,
                              &resources);
}

CompiledKernel CompileConfig(const OpSpec& spec, const std::string& dtype, const Config& config,
                             const std::string& arch, const std::string& cache_dir) {
  CompiledKernel ck;
  ck.config = config;
  ck.config_id = config.Id();
  ck.arch = arch;
  if (!cuda::StampKernelHash(spec, &ck)) return ck;
  if (cuda::DTypeCudaName(dtype).empty() || dtype == "i32") {
    ck.failure = FailureClass::kCompileError;
    ck.failure_message = spec.origin + ": unsupported sweep dtype '" + dtype + "'";
    return ck;
  }
  std::vector<std::string> options = cuda::BaseOptions(spec, dtype, arch);
  for (const std::string& d : ParamMacros(spec, config)) options.push_back("-D" + d);
  cuda::CompileCached(spec, spec.source_file, spec.kernel, ck.config_id, dtype, arch, options, cache_dir, &ck);
  if (ck.failure == FailureClass::kNone) {
    if (Status st = cuda::CheckKernelParams(spec, ck.image); !st.ok()) {
      ck.failure = FailureClass::kCompileError;
      ck.failure_message = spec.source_file + ": " + st.message();
    }
  }
  return ck;
}

}  // namespace tune
