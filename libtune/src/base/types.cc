#include "base/types.h"

#include "base/target.h"

#include "base/text.h"

#include <sodium.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <charconv>

namespace tune {
namespace {

// libsodium picks its fastest BLAKE2b implementation in sodium_init(); the
// reference one is used before that, with identical output, so the call is an
// optimisation and its result does not matter.
void EnsureSodium() {
  static const int kInit = sodium_init();
  (void)kInit;
}


}  // namespace

namespace {

// "A=x,B=y" in the given order, each value spelled by `text`.
template <typename Pairs, typename Text>
std::string JoinPairs(const Pairs& v, Text text) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += v[i].first;
    out += '=';
    out += text(v[i].second);
  }
  return out;
}

// The inverse of JoinPairs: each value read by `read` (false: malformed);
// empty text is no pairs. `*out` is left alone on failure.
template <typename Value, typename Read>
bool ParsePairs(const std::string& text, Read read, std::vector<std::pair<std::string, Value>>* out) {
  std::vector<std::pair<std::string, Value>> parsed;
  for (size_t pos = 0; !text.empty();) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view item(text.data() + pos, end - pos);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    Value value;
    if (!read(item.substr(eq + 1), &value)) return false;
    parsed.emplace_back(std::string(item.substr(0, eq)), std::move(value));
    if (end == text.size()) break;
    pos = end + 1;
  }
  if (out) *out = std::move(parsed);
  return true;
}

bool ReadInt(std::string_view num, int64_t* value) {
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), *value);
  return !num.empty() && ec == std::errc() && ptr == num.data() + num.size();
}

}  // namespace

std::string JoinNamedValues(const NamedValues& v) {
  return JoinPairs(v, [](int64_t n) { return std::to_string(n); });
}

bool ParseNamedValues(const std::string& text, NamedValues* out) { return ParsePairs<int64_t>(text, ReadInt, out); }

int64_t ValueOf(const NamedValues& v, const std::string& name, int64_t fallback) {
  for (const auto& [n, value] : v)
    if (n == name) return value;
  return fallback;
}

ParamValue ParamValue::Bool(bool b) {
  ParamValue v(b ? 1 : 0);
  v.kind_ = Kind::kBool;
  return v;
}

ParamValue ParamValue::String(std::string text) {
  ParamValue v(CategoricalCode(text));
  v.kind_ = Kind::kString;
  v.text_ = std::move(text);
  return v;
}

ParamValue ParamValue::Of(int64_t number, const std::string& text) {
  if (text.empty()) return ParamValue(number);
  if (text == "true" || text == "false") return Bool(text == "true");
  return String(text);
}

std::string ParamValue::ToString() const {
  switch (kind_) {
    case Kind::kBool: return number_ ? "true" : "false";
    case Kind::kString: return text_;
    case Kind::kInt: break;
  }
  return std::to_string(number_);
}

int64_t CategoricalCode(std::string_view text) {
  EnsureSodium();
  unsigned char digest[8];
  crypto_generichash(digest, sizeof digest, reinterpret_cast<const unsigned char*>(text.data()), text.size(),
                     nullptr, 0);
  uint64_t bits = 0;
  for (unsigned char b : digest) bits = (bits << 8) | b;
  constexpr uint64_t kTop = uint64_t{1} << 52;
  return static_cast<int64_t>(kTop | (bits & (kTop - 1)));
}

Status CheckCategoricalText(std::string_view text) {
  const auto word = [](char c, bool first) {
    return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  bool ok = !text.empty() && text.size() <= 64 && word(text[0], true);
  for (size_t i = 1; ok && i < text.size(); ++i) ok = word(text[i], false);
  if (!ok)
    return Status::InvalidArgument("\"" + FirstLine(ToValidUtf8(text)) +
                                   "\" is not a macro token (letters, digits and '_', not starting with a digit, "
                                   "at most 64 characters)");
  if (text == "true" || text == "false")
    return Status::InvalidArgument("\"" + std::string(text) + "\" is a boolean's spelling; use a boolean axis");
  return Status::OK();
}

std::string JoinParamValues(const ParamValues& v) {
  return JoinPairs(v, [](const ParamValue& p) { return p.ToString(); });
}

bool ParseParamValues(const std::string& text, ParamValues* out) {
  return ParsePairs<ParamValue>(
      text,
      [](std::string_view value, ParamValue* v) {
        int64_t n = 0;
        if (ReadInt(value, &n)) *v = ParamValue(n);
        else if (value == "true" || value == "false") *v = ParamValue::Bool(value == "true");
        else if (CheckCategoricalText(value).ok()) *v = ParamValue::String(std::string(value));
        else return false;
        return true;
      },
      out);
}

int64_t ValueOf(const ParamValues& v, const std::string& name, int64_t fallback) {
  for (const auto& [n, value] : v)
    if (n == name) return value.Number();
  return fallback;
}

std::string Config::Canonical() const {
  ParamValues sorted = params;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return JoinParamValues(sorted);
}

std::string Config::Id() const {
  EnsureSodium();
  const std::string text = Canonical();
  // BLAKE2b with an 8-byte digest length (a distinct function, not a
  // truncation of the 32-byte one); libsodium's one-shot call accepts it even
  // though crypto_generichash_BYTES_MIN is 16.
  unsigned char digest[8];
  crypto_generichash(digest, sizeof digest, reinterpret_cast<const unsigned char*>(text.data()),
                     text.size(), nullptr, 0);
  return HexOf(digest, sizeof digest);
}

const DTypeInfo* FindDType(std::string_view dtype) {
  for (const DTypeInfo& d : kDTypeTable)
    if (dtype == d.name) return &d;
  return nullptr;
}

int DTypeSize(const std::string& dtype) {
  const DTypeInfo* d = FindDType(dtype);
  return d ? d->bytes : 0;
}

std::string Sha256Hex(std::string_view bytes) {
  EnsureSodium();
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return HexOf(digest, sizeof digest);
}

Status CheckKernelImage(const KernelImage& k) {
  auto name_ok = [](const std::string& v) {
    return !v.empty() && v.size() <= 128 &&
           std::all_of(v.begin(), v.end(), [](char c) { return c > ' ' && c < 127 && c != '/'; });
  };
  const std::pair<const char*, const std::string*> fields[] = {
      {"kernelHash", &k.kernel_hash}, {"configId", &k.config_id}, {"dtype", &k.dtype}, {"arch", &k.arch}};
  for (const auto& [field, value] : fields) {
    if (!name_ok(*value)) return Status::InvalidArgument("kernel image: bad " + std::string(field));
  }
  const std::string what = "kernel image " + k.Key() + ": ";
  if (k.image.empty()) return Status::InvalidArgument(what + "empty image");
  if (k.image.size() > kMaxKernelImageBytes)
    return Status::InvalidArgument(what + std::to_string(k.image.size()) + " bytes, over the limit of " +
                                   std::to_string(kMaxKernelImageBytes));
  if (Sha256Hex(k.image) != k.sha256) return Status::Corruption(what + "sha256 does not match the image");
  if (Status st = CheckCubin(k.image, k.arch); !st.ok()) return st.WithPrefix(what);
  for (const auto* list : {&k.witnesses, &k.conflicts}) {
    if (list->size() > kMaxKernelWitnesses) return Status::InvalidArgument(what + "too many witnesses");
    for (const std::string& w : *list)
      if (w.empty() || w.size() > 256 || !std::all_of(w.begin(), w.end(), [](char c) { return c >= ' ' && c < 127; }))
        return Status::InvalidArgument(what + "a witness that is no printable name");
  }
  return Status::OK();
}

namespace {
constexpr std::string_view kKeyWitness = "key:";
}  // namespace

std::string WitnessOfKey(const std::string& z85_key) {
  return z85_key.empty() ? std::string() : std::string(kKeyWitness) + z85_key;
}

bool KernelImage::Corroborated() const {
  // "key:" and a 40-character Z85 key exactly (a worker name of a store
  // older than this rule is none, short of that very form).
  static constexpr std::string_view kZ85 =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  const auto keys = std::count_if(witnesses.begin(), witnesses.end(), [](const std::string& w) {
    return w.size() == kKeyWitness.size() + 40 && w.starts_with(kKeyWitness) &&
           w.find_first_not_of(kZ85, kKeyWitness.size()) == std::string::npos;
  });
  return keys >= 2 && conflicts.empty();
}

namespace {

// ELF64 fields, read little-endian at `off` (the caller checked the bounds).
uint64_t Le(std::string_view b, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(b[off + size_t(i)]);
  return v;
}

constexpr uint16_t kEmCuda = 190;
constexpr uint16_t kEtExec = 2;


}  // namespace

Status CheckCubin(std::string_view b, const std::string& arch) {
  if (b.size() < 64 || b.compare(0, 4, "\x7f" "ELF") != 0) return Status::InvalidArgument("not an ELF cubin");
  if (b[4] != 2 || b[5] != 1) return Status::InvalidArgument("not a 64-bit little-endian ELF (no cubin)");
  if (Le(b, 18, 2) != kEmCuda)
    return Status::InvalidArgument("an ELF for machine " + std::to_string(Le(b, 18, 2)) + ", not CUDA (" +
                                   std::to_string(kEmCuda) + ")");
  if (Le(b, 16, 2) != kEtExec) return Status::InvalidArgument("a CUDA ELF that is no executable cubin");
  const int sm = ArchSm(arch);
  if (sm == 0) return Status::InvalidArgument("arch '" + arch + "' is no sm_NN");
  // The SM sits in the flags' second byte from ELF ABI version 8 (CUDA 13)
  // on, in the first byte before.
  const uint64_t flags = Le(b, 48, 4);
  const int flag_sm = uint8_t(b[8]) >= 8 ? int((flags >> 8) & 0xff) : int(flags & 0xff);
  if (flag_sm != sm)
    return Status::InvalidArgument("a cubin for sm_" + std::to_string(flag_sm) + ", not " + arch);
  const uint64_t shoff = Le(b, 40, 8), shentsize = Le(b, 58, 2), shnum = Le(b, 60, 2);
  if (shnum == 0 || shentsize != 64 || shoff > b.size() || shnum * 64 > b.size() - shoff)
    return Status::InvalidArgument("a cubin whose section table lies outside it");
  return Status::OK();
}

Status CheckCubinEntries(std::string_view b, const std::vector<std::string>& entries) {
  std::set<std::string, std::less<>> functions;
  if (b.size() < 64) return Status::InvalidArgument("not an ELF cubin");
  const uint64_t shoff = Le(b, 40, 8), shnum = Le(b, 60, 2);
  if (Le(b, 58, 2) != 64 || shoff > b.size() || shnum * 64 > b.size() - shoff)
    return Status::InvalidArgument("a cubin whose section table lies outside it");
  for (uint64_t i = 0; i < shnum; ++i) {
    const size_t sh = size_t(shoff + i * 64);
    if (Le(b, sh + 4, 4) != 2) continue;  // SHT_SYMTAB
    const uint64_t off = Le(b, sh + 24, 8), size = Le(b, sh + 32, 8), link = Le(b, sh + 40, 4);
    if (off > b.size() || size > b.size() - off || link >= shnum) continue;
    const size_t str_sh = size_t(shoff + link * 64);
    const uint64_t str_off = Le(b, str_sh + 24, 8), str_size = Le(b, str_sh + 32, 8);
    if (str_off > b.size() || str_size > b.size() - str_off) continue;
    const std::string_view strtab = b.substr(size_t(str_off), size_t(str_size));
    for (uint64_t sym = 0; sym + 24 <= size; sym += 24) {
      const size_t at = size_t(off + sym);
      const uint8_t info = uint8_t(b[at + 4]);
      if ((info & 0xf) != 2 || (info >> 4) != 1) continue;  // STT_FUNC, STB_GLOBAL
      const uint64_t name = Le(b, at, 4);
      if (name >= strtab.size()) continue;
      const size_t end = strtab.find('\0', size_t(name));
      if (end == std::string_view::npos) continue;
      functions.emplace(strtab.substr(size_t(name), end - size_t(name)));
    }
  }
  for (const std::string& e : entries)
    if (!functions.count(e)) return Status::InvalidArgument("a cubin without the kernel '" + e + "'");
  return Status::OK();
}

Result<std::vector<uint32_t>> CubinKernelParamSizes(std::string_view b, const std::string& entry) {
  if (b.size() < 64) return Status::InvalidArgument("not an ELF cubin");
  const uint64_t shoff = Le(b, 40, 8), shnum = Le(b, 60, 2), shstrndx = Le(b, 62, 2);
  if (Le(b, 58, 2) != 64 || shoff > b.size() || shnum * 64 > b.size() - shoff || shstrndx >= shnum)
    return Status::InvalidArgument("a cubin whose section table lies outside it");
  const size_t names_sh = size_t(shoff + shstrndx * 64);
  const uint64_t names_off = Le(b, names_sh + 24, 8), names_size = Le(b, names_sh + 32, 8);
  if (names_off > b.size() || names_size > b.size() - names_off)
    return Status::InvalidArgument("a cubin whose section names lie outside it");
  const std::string_view names = b.substr(size_t(names_off), size_t(names_size));
  const std::string want = ".nv.info." + entry;
  for (uint64_t i = 0; i < shnum; ++i) {
    const size_t sh = size_t(shoff + i * 64);
    const uint64_t name = Le(b, sh, 4);
    if (name >= names.size() || names.substr(size_t(name), want.size() + 1) != std::string_view(want.c_str(), want.size() + 1))
      continue;
    const uint64_t off = Le(b, sh + 24, 8), size = Le(b, sh + 32, 8);
    if (off > b.size() || size > b.size() - off) return Status::InvalidArgument("a cubin whose " + want + " lies outside it");
    // Records: a format byte and an attribute byte, then two bytes of value
    // (EIFMT_NVAL 1, EIFMT_BVAL 2, EIFMT_HVAL 3) or a 16-bit size and that
    // many bytes (EIFMT_SVAL 4). A section this does not read to its end
    // tells nothing: NotFound, as for a kernel without one.
    std::map<uint32_t, uint32_t> by_ordinal;
    constexpr uint8_t kSval = 4, kKparamInfo = 0x17;
    const std::string unread = "a cubin whose " + want + " this reader does not follow";
    uint64_t at = off;
    while (at + 4 <= off + size) {
      const uint8_t format = uint8_t(b[size_t(at)]), attr = uint8_t(b[size_t(at + 1)]);
      if (format >= 1 && format < kSval) {
        at += 4;
        continue;
      }
      if (format != kSval) return Status::NotFound(unread);
      const uint64_t len = Le(b, size_t(at + 2), 2);
      if (len > off + size - at - 4) return Status::NotFound(unread);
      if (attr == kKparamInfo && len >= 12) {
        // index (32 bits), ordinal (16), offset (16), then the size in the
        // top 14 bits of the last 32.
        const uint32_t ordinal = uint32_t(Le(b, size_t(at + 8), 2));
        by_ordinal[ordinal] = uint32_t((Le(b, size_t(at + 12), 4) >> 18) & 0x3fff);
      }
      at += 4 + len;
    }
    if (at != off + size) return Status::NotFound(unread);
    std::vector<uint32_t> sizes;
    for (const auto& [ordinal, bytes] : by_ordinal) {
      if (ordinal != sizes.size()) return Status::InvalidArgument(want + ": parameter " + std::to_string(sizes.size()) + " missing");
      sizes.push_back(bytes);
    }
    return sizes;
  }
  return Status::NotFound("a cubin without " + want);
}

const char* Measurement::StatusName() const {
  if (failure != FailureClass::kNone) return FailureClassName(failure);
  if (!check_passed && !unchecked) return "check_not_passed";
  if (samples == 0) return "no_samples";
  return unchecked ? "unchecked" : "ok";
}

const char* FailureClassName(FailureClass c) {
  switch (c) {
    case FailureClass::kNone: return "none";
    case FailureClass::kCompileError: return "compile_error";
    case FailureClass::kResources: return "resources";
    case FailureClass::kLaunchError: return "launch_error";
    case FailureClass::kCrash: return "crash";
    case FailureClass::kTimeout: return "timeout";
    case FailureClass::kWrongResult: return "wrong_result";
    case FailureClass::kNan: return "nan";
    case FailureClass::kSkipped: return "skipped";
  }
  return "none";
}

FailureClass FailureClassFromName(const std::string& name) {
  static constexpr FailureClass kAll[] = {
      FailureClass::kNone,    FailureClass::kCompileError, FailureClass::kResources,
      FailureClass::kLaunchError, FailureClass::kCrash,    FailureClass::kTimeout,
      FailureClass::kWrongResult, FailureClass::kNan,      FailureClass::kSkipped};
  for (FailureClass c : kAll)
    if (name == FailureClassName(c)) return c;
  return FailureClass::kNone;
}

const char* ConfirmTimingName(ConfirmTiming t) {
  switch (t) {
    case ConfirmTiming::kSustained: return "sustained";
    case ConfirmTiming::kBurst: return "burst";
    case ConfirmTiming::kAuto: return "auto";
  }
  return "sustained";
}

bool ParseConfirmTiming(const std::string& name, ConfirmTiming* out) {
  for (ConfirmTiming t : {ConfirmTiming::kSustained, ConfirmTiming::kBurst, ConfirmTiming::kAuto}) {
    if (name == ConfirmTimingName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

const char* L2TimingName(L2Timing t) { return t == L2Timing::kHot ? "hot" : "cold"; }

bool ParseL2Timing(const std::string& name, L2Timing* out) {
  for (L2Timing t : {L2Timing::kCold, L2Timing::kHot}) {
    if (name == L2TimingName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

const char* ObjectiveName(Objective o) {
  return o == Objective::kEnergy ? "energy" : o == Objective::kEdp ? "edp" : "time";
}

bool ParseObjective(const std::string& name, Objective* out) {
  for (Objective o : {Objective::kTime, Objective::kEnergy, Objective::kEdp}) {
    if (name == ObjectiveName(o)) {
      *out = o;
      return true;
    }
  }
  return false;
}

std::string NormaliseGpuModel(const std::string& device_name) {
  std::string out;
  bool pending_dash = false;
  for (unsigned char ch : device_name) {
    if (std::isalnum(ch)) {
      if (pending_dash && !out.empty()) out += '-';
      pending_dash = false;
      out += static_cast<char>(std::tolower(ch));
    } else {
      pending_dash = true;
    }
  }
  static const std::string kVendor = "nvidia-";
  if (out.size() > kVendor.size() && out.compare(0, kVendor.size(), kVendor) == 0)
    out.erase(0, kVendor.size());
  return out;
}

int64_t DimBucket::Of(int64_t v) const {
  switch (kind) {
    case Kind::kPow2: {
      if (v <= 1) return 1;
      if (v > (int64_t(1) << 62)) return v;
      int64_t p = 1;
      while (p < v) p <<= 1;
      return p;
    }
    case Kind::kList: {
      if (values.empty()) return v;
      auto it = std::lower_bound(values.begin(), values.end(), v);
      return it == values.end() ? values.back() : *it;
    }
    case Kind::kExact:
      break;
  }
  return v;
}

Status DimBucket::Check() const {
  if (kind == Kind::kList) {
    if (values.empty() || values.size() > kMaxBucketValues)
      return Status::Error("a bucket list holds 1 to " + std::to_string(kMaxBucketValues) + " values");
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] < 1 || values[i] > (int64_t(1) << 40))
        return Status::Error("bucket value " + std::to_string(values[i]) + " is outside [1, 2^40]");
      if (i > 0 && values[i] <= values[i - 1]) return Status::Error("bucket values must ascend");
    }
    return Status::OK();
  }
  if (!values.empty()) return Status::Error("only a bucket list has values");
  if (kind != Kind::kExact && kind != Kind::kPow2) return Status::Error("unknown bucket kind");
  return Status::OK();
}

void Measurement::CopyOutcome(const Measurement& from) {
  failure = from.failure;
  failure_message = from.failure_message;
  median_us = from.median_us;
  mean_us = from.mean_us;
  stdev_us = from.stdev_us;
  min_us = from.min_us;
  max_us = from.max_us;
  ci95_us = from.ci95_us;
  samples = from.samples;
  check_passed = from.check_passed;
  unchecked = from.unchecked;
  against_default = from.against_default;
  max_abs_error = from.max_abs_error;
  mismatch_ratio = from.mismatch_ratio;
  resources = from.resources;
  throttled = from.throttled;
  sm_clock_mhz = from.sm_clock_mhz;
  energy_uj = from.energy_uj;
  power_w = from.power_w;
  power_limit_w = from.power_limit_w;
  confirm_timing = from.confirm_timing;
}

const char* CoverageStateName(KeyCoverage::State state) {
  switch (state) {
    case KeyCoverage::State::kExhausted: return "exhausted";
    case KeyCoverage::State::kSearched: return "searched";
    case KeyCoverage::State::kPartial: break;
  }
  return "partial";
}

}  // namespace tune
