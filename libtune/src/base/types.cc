#include "tune/types.h"

#include "tune/text.h"

#include <sodium.h>

#include <algorithm>
#include <cctype>
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

std::string JoinNamedValues(const NamedValues& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += v[i].first;
    out += '=';
    out += std::to_string(v[i].second);
  }
  return out;
}

bool ParseNamedValues(const std::string& text, NamedValues* out) {
  NamedValues parsed;
  if (!text.empty()) {
    size_t pos = 0;
    while (true) {
      size_t end = text.find(',', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view item(text.data() + pos, end - pos);
      size_t eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0) return false;
      std::string_view num = item.substr(eq + 1);
      int64_t value = 0;
      auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
      if (num.empty() || ec != std::errc() || ptr != num.data() + num.size()) return false;
      parsed.emplace_back(std::string(item.substr(0, eq)), value);
      if (end == text.size()) break;
      pos = end + 1;
    }
  }
  if (out) *out = std::move(parsed);
  return true;
}

int64_t ValueOf(const NamedValues& v, const std::string& name, int64_t fallback) {
  for (const auto& [n, value] : v)
    if (n == name) return value;
  return fallback;
}

std::string Config::Canonical() const {
  NamedValues sorted = params;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return JoinNamedValues(sorted);
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

int DTypeSize(const std::string& dtype) {
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "i64") return 8;
  return 0;
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
  if (k.image.compare(0, 4, "\x7f" "ELF") != 0) return Status::InvalidArgument(what + "not an ELF cubin");
  if (Sha256Hex(k.image) != k.sha256) return Status::Corruption(what + "sha256 does not match the image");
  return Status::OK();
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
  max_abs_error = from.max_abs_error;
  mismatch_ratio = from.mismatch_ratio;
  resources = from.resources;
  throttled = from.throttled;
  sm_clock_mhz = from.sm_clock_mhz;
  confirm_timing = from.confirm_timing;
}

}  // namespace tune
