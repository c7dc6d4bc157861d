// What identifies a measurement: the digests of an op's sources and of how
// it is measured, and the kernel hash over both (opspec/op_definition.h,
// opspec/kernel_hash.h).
#include <sodium.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "opspec/kernel_hash.h"
#include "opspec/op_confine.h"
#include "opspec/op_definition.h"
#include "base/text.h"

namespace tune {
namespace {


// Hash input framing: every piece is length-prefixed so that no two different
// specs feed the same byte stream.
class Digest {
 public:
  explicit Digest(size_t bytes) : bytes_(bytes) { crypto_generichash_init(&state_, nullptr, 0, bytes_); }
  void Add(std::string_view s) {
    unsigned char len[8];
    uint64_t n = s.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    crypto_generichash_update(&state_, len, sizeof len);
    crypto_generichash_update(&state_, reinterpret_cast<const unsigned char*>(s.data()), s.size());
  }
  std::string Hex() {
    unsigned char out[crypto_generichash_BYTES_MAX];
    crypto_generichash_final(&state_, out, bytes_);
    return HexOf(out, bytes_);
  }

 private:
  size_t bytes_;
  crypto_generichash_state state_;
};

}  // namespace

std::string OpSpec::SourceDigest() const {
  auto get = [this](const std::string& name) -> const std::string* {
    auto it = package.find(name);
    return it == package.end() ? nullptr : &it->second;
  };
  auto contents = [&](const std::string& name) -> std::string_view {
    const std::string* s = get(name);
    return s ? std::string_view(*s) : std::string_view();
  };
  Digest d(16);
  d.Add("tunefarm-source-digest-1");
  d.Add("kernel-source");
  d.Add(source_file);
  d.Add(contents(source_file));
  d.Add("reference-source");
  d.Add(check.reference_file);
  d.Add(contents(check.reference_file));
  d.Add("headers");
  for (const std::string& name : IncludeClosure({source_file, check.reference_file}, get, include_dirs)) {
    if (name == source_file || name == check.reference_file) continue;
    d.Add(name);
    d.Add(contents(name));
  }
  d.Add("kernel");
  d.Add(kernel);
  d.Add("reference-kernel");
  d.Add(check.reference_kernel);
  d.Add("options");
  for (const std::string& o : compile_options) d.Add(o);
  d.Add("arch-specific");
  d.Add(arch_specific ? "1" : "0");
  // Only an op with include folders or roots adds these, so that other ops'
  // digests stay what they were.
  if (!include_dirs.empty() || !include_roots.empty()) {
    d.Add("include");
    for (const std::string& dir : include_dirs) d.Add(dir);
    d.Add("include-roots");
    for (const std::string& root : include_roots) d.Add(root);
  }
  // Only a program op adds these, so a CUDA op's digest stays what it was.
  if (program) {
    d.Add("program");
    for (const auto& [name, text] : package) {
      if (name == "op.toml") continue;
      d.Add(name);
      d.Add(text);
    }
    d.Add(program->build);
    d.Add(program->run);
    d.Add(program->serve);
    if (!program->version.empty()) d.Add(program->version);
  }
  return d.Hex();
}

std::string OpSpec::MeasureDigest() const {
  Digest d(16);
  d.Add("tunefarm-measure-digest-1");
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    d.Add(what);
    d.Add(std::to_string(v.size()));
    for (const std::string& x : v) d.Add(x);
  };
  auto number = [&](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    d.Add(buf);
  };
  list("grid", grid);
  list("block", block);
  d.Add("smem");
  d.Add(smem);
  list("dims", dims);
  d.Add("args");
  d.Add(std::to_string(args.size()));
  for (const ArgSpec& a : args) {
    d.Add(a.name);
    d.Add(a.kind == ArgSpec::Kind::kBuffer ? "buffer" : a.kind == ArgSpec::Kind::kScalar ? "scalar" : "tensormap");
    d.Add(a.dir);
    d.Add(a.dtype);
    list("shape", a.shape);
    d.Add(a.init);
    // Real data from the package: its bytes are the input (added only for
    // such inits, so that other ops' digests stay what they were).
    if (a.init.rfind("file(", 0) == 0 && a.init.size() > 6) {
      auto it = package.find(a.init.substr(5, a.init.size() - 6));
      d.Add(it == package.end() ? std::string_view() : std::string_view(it->second));
    }
    d.Add(a.scalar_type);
    d.Add(a.value);
    if (a.kind == ArgSpec::Kind::kTensorMap) {  // only for maps: other ops' digests stay what they were
      d.Add(a.map_of);
      list("box", a.box);
      d.Add(std::to_string(a.swizzle));
    }
  }
  if (check.mode != CheckSpec::Mode::kReference) {
    d.Add(check.mode == CheckSpec::Mode::kChecker   ? "check-by-checker"
          : check.mode == CheckSpec::Mode::kDefault ? "check-by-default"
                                                    : "check-skipped");
  }
  list("check-grid", check.grid);
  list("check-block", check.block);
  d.Add("tolerances");
  number(check.rtol);
  number(check.atol);
  number(check.max_mismatch);
  if (timing == L2Timing::kHot) d.Add("l2-hot");  // only when hot: cold digests stay what they were
  return d.Hex();
}

namespace {

// What of a spec its kernel hash covers besides the toolchain, in the
// hash's input format: the spec's costly part, kept where several
// toolchains hash one spec.
std::string KernelHashPrefix(const OpSpec& spec) {
  // Unframed on purpose: the contract is hash(SourceDigest + "\0" +
  // MeasureDigest + "\0" + timing policy version + "\0" + toolchain).
  std::string prefix = spec.SourceDigest();
  prefix += '\0';
  prefix += spec.MeasureDigest();
  prefix += '\0';
  prefix += std::to_string(kTimingPolicyVersion);
  prefix += '\0';
  return prefix;
}

std::string KernelHashOfPrefix(std::string input, const std::string& toolchain) {
  input += toolchain;
  unsigned char out[16];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(input.data()), input.size(),
                     nullptr, 0);
  return HexOf(out, sizeof out);
}

}  // namespace

std::string KernelHash(const OpSpec& spec, const std::string& toolchain) {
  return KernelHashOfPrefix(KernelHashPrefix(spec), toolchain);
}

std::string OpHash(const OpSpec& spec, const std::string& toolchain) { return KernelHash(spec, toolchain); }

std::string CudaArchOf(const OpSpec& spec, int cc_major, int cc_minor) {
  std::string arch = CudaArch(cc_major, cc_minor);
  if (spec.arch_specific && cc_major >= 9) arch += "a";
  return arch;
}

std::string OpHash(const OpSpec& spec, const DeviceInfo& device) { return OpHash(spec, TargetOf(device).toolchain); }

const std::string& OpHashMemo::Of(const OpSpec& spec, const std::string& toolchain) {
  auto [it, fresh] = hashes_.try_emplace(std::make_pair(spec.name, toolchain));
  if (fresh) it->second = OpHash(spec, toolchain);
  return it->second;
}

SpecsByOpHash::SpecsByOpHash(const std::vector<const OpSpec*>& specs, const std::set<std::string>& toolchains) {
  for (const OpSpec* spec : specs) {
    const std::string prefix = KernelHashPrefix(*spec);
    for (const std::string& t : toolchains)
      specs_.emplace(std::make_pair(spec->name, KernelHashOfPrefix(prefix, t)), spec);
  }
}

const OpSpec* SpecsByOpHash::Find(const std::string& op, const std::string& op_hash) const {
  auto it = specs_.find(std::make_pair(op, op_hash));
  return it == specs_.end() ? nullptr : it->second;
}

std::string PackageDigest(const OpPackage& pkg) {
  if (sodium_init() < 0) return {};
  crypto_generichash_state st;
  unsigned char out[16];
  crypto_generichash_init(&st, nullptr, 0, sizeof(out));
  auto feed = [&](const std::string& s) {
    uint64_t n = s.size();  // length-prefixed so that file boundaries count
    crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(&n), sizeof(n));
    crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  for (const auto& [name, text] : pkg) {
    feed(name);
    feed(text);
  }
  crypto_generichash_final(&st, out, sizeof(out));
  return HexOf(out, sizeof out);
}

// --- Include roots ---

Result<IncludeRoots> ParseIncludeRoots(const std::vector<std::string>& args) {
  IncludeRoots roots;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (eq == std::string::npos || !IsIncludeRootName(name))
      return Status::Error("include root '" + arg + "': expected NAME=PATH, NAME of letters, digits, '_', '.', '-'");
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::absolute(arg.substr(eq + 1), ec);
    if (ec || !std::filesystem::is_directory(path, ec))
      return Status::Error("include root '" + arg + "': " + arg.substr(eq + 1) + " is no folder");
    if (!roots.emplace(name, path.lexically_normal().string()).second)
      return Status::Error("include root '" + name + "' given twice");
  }
  return roots;
}

std::string KernelHashWithIncludes(const std::string& kernel_hash, const std::string& include_digest) {
  Digest d(16);
  d.Add("tunefarm-kernel-hash-with-includes-1");
  d.Add(kernel_hash);
  d.Add(include_digest);
  return d.Hex();
}

bool MeasuresKernel(const Measurement& m, const std::string& op_hash) {
  if (m.kernel_hash == op_hash) return true;
  return !m.include_digest.empty() && m.kernel_hash == KernelHashWithIncludes(op_hash, m.include_digest);
}

namespace {

namespace fs = std::filesystem;

// A header read from an include root: where, and what it looked like then.
struct ReadHeader {
  std::string path;
  uintmax_t size = 0;
  fs::file_time_type mtime;
};
struct CachedDigest {
  std::string digest;
  std::vector<ReadHeader> read;
  // Candidates looked for and not found: one that appears would answer its
  // include instead of what answered it (or of nothing).
  std::set<std::string> missing;
};

bool Unchanged(const CachedDigest& d) {
  std::error_code ec;
  for (const ReadHeader& h : d.read) {
    if (fs::file_size(h.path, ec) != h.size || ec || fs::last_write_time(h.path, ec) != h.mtime || ec) return false;
  }
  for (const std::string& path : d.missing)
    if (fs::exists(path, ec)) return false;
  return true;
}

Result<CachedDigest> ScanIncludeRoots(const OpSpec& spec, const std::vector<std::pair<std::string, fs::path>>& dirs) {
  auto in_package = [&spec](const std::string& name) -> const std::string* {
    auto it = spec.package.find(name);
    return it == spec.package.end() ? nullptr : &it->second;
  };
  // (root index, path in the root) of headers found, and their texts.
  std::map<std::pair<size_t, std::string>, std::string> found;
  std::vector<std::pair<size_t, std::string>> unread;
  CachedDigest out;
  // The first root holding `target` (for a quoted include, beside its
  // includer in the same root first).
  auto resolve = [&](const std::string& target, const std::pair<size_t, std::string>* includer, bool angled) {
    std::vector<std::pair<size_t, std::string>> cands;
    if (includer && !angled)
      if (auto rel = InFolder(fs::path(includer->second).parent_path() / target)) cands.emplace_back(includer->first, *rel);
    if (auto rel = InFolder(fs::path(target)))
      for (size_t i = 0; i < dirs.size(); ++i) cands.emplace_back(i, *rel);
    for (const auto& c : cands) {
      if (found.count(c)) return;
      std::error_code ec;
      const fs::path path = dirs[c.first].second / c.second;
      if (fs::is_regular_file(path, ec)) {
        found[c];
        unread.push_back(c);
        return;
      }
      out.missing.insert(path.string());
    }
  };
  for (const std::string& file :
       IncludeClosure({spec.source_file, spec.check.reference_file}, in_package, spec.include_dirs)) {
    const std::string* text = in_package(file);
    if (!text) continue;
    for (const auto& [target, angled] : IncludeTargets(*text)) {
      bool packaged = false;
      for (const std::string& c : IncludeCandidates(file, target, angled, spec.include_dirs)) packaged |= spec.package.count(c) > 0;
      if (!packaged) resolve(target, nullptr, angled);
    }
  }
  while (!unread.empty()) {
    const auto at = unread.back();
    unread.pop_back();
    const fs::path path = dirs[at.first].second / at.second;
    // Looked at before it is read: a change while reading shows next time.
    std::error_code ec;
    ReadHeader h{path.string(), fs::file_size(path, ec), fs::last_write_time(path, ec)};
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return Status::Error("include root '" + dirs[at.first].first + "': cannot read " + h.path);
    out.read.push_back(std::move(h));
    for (const auto& [target, angled] : IncludeTargets(text)) resolve(target, &at, angled);
    found[at] = std::move(text);
  }
  Digest d(16);
  d.Add("tunefarm-include-roots-1");
  for (const auto& [at, text] : found) {
    d.Add(dirs[at.first].first);
    d.Add(at.second);
    d.Add(text);
  }
  out.digest = d.Hex();
  return out;
}

}  // namespace

Result<std::string> IncludeRootsDigest(const OpSpec& spec, const IncludeRoots& roots) {
  if (spec.include_roots.empty()) return std::string();
  std::vector<std::pair<std::string, fs::path>> dirs;
  std::string key = spec.SourceDigest();
  for (const std::string& name : spec.include_roots) {
    auto it = roots.find(name);
    if (it == roots.end())
      return Status::Error(spec.origin + ": include root '" + name + "' is not configured on this host (give --include-root " +
                           name + "=PATH)");
    dirs.emplace_back(name, fs::path(it->second));
    key += '\0' + name + '\0' + it->second;
  }
  static std::mutex mu;
  static std::map<std::string, CachedDigest> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end() && Unchanged(it->second)) return it->second.digest;
  }
  auto scanned = ScanIncludeRoots(spec, dirs);
  if (!scanned.ok()) return scanned.status();
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = *scanned;
  return scanned->digest;
}

}  // namespace tune
