// What identifies a measurement: the digests of an op's sources and of how
// it is measured, and the kernel hash over both (tune/op_spec.h).
#include <sodium.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "spec/op_confine.h"
#include "tune/op_spec.h"
#include "tune/text.h"

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
  for (const std::string& name : IncludeClosure({source_file, check.reference_file}, get)) {
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
    d.Add(a.kind == ArgSpec::Kind::kBuffer ? "buffer" : "scalar");
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
  }
  if (check.mode != CheckSpec::Mode::kReference)
    d.Add(check.mode == CheckSpec::Mode::kChecker ? "check-by-checker" : "check-skipped");
  list("check-grid", check.grid);
  list("check-block", check.block);
  d.Add("tolerances");
  number(check.rtol);
  number(check.atol);
  number(check.max_mismatch);
  return d.Hex();
}

std::string KernelHash(const OpSpec& spec, const std::string& toolchain) {
  // Unframed on purpose: the contract is hash(SourceDigest + "\0" +
  // MeasureDigest + "\0" + timing policy version + "\0" + toolchain).
  std::string input = spec.SourceDigest();
  input += '\0';
  input += spec.MeasureDigest();
  input += '\0';
  input += std::to_string(kTimingPolicyVersion);
  input += '\0';
  input += toolchain;
  unsigned char out[16];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(input.data()), input.size(),
                     nullptr, 0);
  return HexOf(out, sizeof out);
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

}  // namespace tune
