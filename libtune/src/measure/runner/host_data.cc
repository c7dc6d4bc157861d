#include "measure/runner/host_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>
#include <sstream>
#include <thread>

#include "base/types.h"

namespace tune::runner {
namespace {

// splitmix64: tiny, fast, and the same sequence everywhere (std::
// distributions are implementation-defined, and inputs must not differ
// between builds of the worker).
struct SplitMix {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform01() { return double(Next() >> 11) * (1.0 / 9007199254740992.0); }  // [0,1)
};

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    if (mant == 0) return BitsFloat(sign);
    // Subnormal: value = mant * 2^-24.
    float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7F800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t FloatToHalf(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000);
  uint32_t abs = u & 0x7FFFFFFF;
  if (abs >= 0x7F800000u) return uint16_t(sign | 0x7C00 | (abs > 0x7F800000u ? 0x200 : 0));
  if (abs >= 0x477FF000u) return uint16_t(sign | 0x7C00);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): scale to units of 2^-24 and round to even.
    float a = BitsFloat(abs);
    float scaled = a * 16777216.0f;  // 2^24
    float r = std::nearbyint(scaled);
    return uint16_t(sign | uint16_t(r));
  }
  uint32_t exp = ((abs >> 23) - 112) << 10;
  uint32_t mant = (abs >> 13) & 0x3FF;
  uint32_t rest = abs & 0x1FFF;
  uint32_t h = exp | mant;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

float Bf16ToFloat(uint16_t b) { return BitsFloat(uint32_t(b) << 16); }

uint16_t FloatToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
  return uint16_t((u + rounding) >> 16);
}

uint64_t Fnv1a64(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Result<InitSpec> ParseInit(const std::string& init_text) {
  std::string init = init_text.empty() ? "uniform(-1,1)" : init_text;
  static const std::regex kTwo(R"(\s*(uniform|normal)\s*\(\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\)\s*)");
  static const std::regex kOnes(R"(\s*ones\s*(\(\s*\))?\s*)");
  static const std::regex kZeros(R"(\s*zeros\s*(\(\s*\))?\s*)");
  static const std::regex kInt(R"(\s*int\s*\(\s*([-+]?[0-9]{1,9})\s*,\s*([-+]?[0-9]{1,9})\s*\)\s*)");
  InitSpec spec;
  std::smatch m;
  if (std::regex_match(init, m, kTwo)) {
    spec.kind = m[1] == "uniform" ? InitSpec::Kind::kUniform : InitSpec::Kind::kNormal;
    try {
      spec.a = std::stod(m[2]);
      spec.b = std::stod(m[3]);
    } catch (...) {
      return Status::Error("init '" + init + "': bad number");
    }
  } else if (std::regex_match(init, kOnes)) {
    spec.kind = InitSpec::Kind::kOnes;
  } else if (std::regex_match(init, kZeros)) {
    spec.kind = InitSpec::Kind::kZeros;
    spec.a = spec.b = 0;
  } else if (std::regex_match(init, m, kInt)) {
    spec.kind = InitSpec::Kind::kInt;
    spec.a = double(std::stoll(m[1]));
    spec.b = double(std::stoll(m[2]));
    if (spec.a > spec.b) return Status::Error("init '" + init + "': int(lo,hi) needs lo <= hi");
  } else {
    return Status::Error("init '" + init + "': expected uniform(lo,hi), normal(mean,std), int(lo,hi), ones or zeros");
  }
  return spec;
}

double InitValue(const InitSpec& init, bool integral, uint64_t seed, int64_t index) {
  if (init.kind == InitSpec::Kind::kOnes) return 1.0;
  if (init.kind == InitSpec::Kind::kZeros) return 0.0;
  SplitMix rng{seed ^ (uint64_t(index) * 0xD1B54A32D192ED03ull)};
  const double u1 = rng.Uniform01();
  if (init.kind == InitSpec::Kind::kInt) return std::min(std::floor(init.a + (init.b - init.a + 1) * u1), init.b);
  if (init.kind == InitSpec::Kind::kUniform)
    return integral ? std::min(std::floor(init.a + (init.b - init.a + 1) * u1), init.b)
                    : init.a + (init.b - init.a) * u1;
  const double u2 = rng.Uniform01();
  double v = init.a + init.b * std::sqrt(-2.0 * std::log(std::max(u1, 1e-300))) * std::cos(6.283185307179586 * u2);
  return integral ? std::nearbyint(v) : v;
}

Result<std::string> MakeInput(const std::string& dtype, const std::string& init_text, int64_t elems,
                              uint64_t seed) {
  auto parsed = ParseInit(init_text);
  if (!parsed.ok()) return parsed.status();
  const InitSpec init = *parsed;
  const DTypeInfo* info = FindDType(dtype);
  if (!info || !info->buffer) return Status::Error("unknown dtype '" + dtype + "'");
  const int width = info->bytes;
  if (elems < 0) return Status::Error("negative element count");

  enum { kF32, kI32, kF16, kBf16 } type = dtype == "f32" ? kF32 : dtype == "i32" ? kI32 : dtype == "f16" ? kF16 : kBf16;
  std::string bytes(size_t(elems) * width, '\0');
  // Element i is a pure function of (seed, i), so the buffer is the same
  // however many threads fill it.
  auto fill = [&, type](int64_t begin, int64_t end) {
    bool nonzero = false;
    char* out = bytes.data();
    for (int64_t i = begin; i < end; ++i) {
      const double v = InitValue(init, type == kI32, seed, i);
      char* p = out + size_t(i) * width;
      switch (type) {
        case kF32: {
          float f = float(v);
          nonzero |= f != 0.0f;
          std::memcpy(p, &f, 4);
          break;
        }
        case kI32: {
          int32_t n = int32_t(v);
          nonzero |= n != 0;
          std::memcpy(p, &n, 4);
          break;
        }
        default: {
          uint16_t h = type == kF16 ? FloatToHalf(float(v)) : FloatToBf16(float(v));
          nonzero |= (h & 0x7FFF) != 0;
          std::memcpy(p, &h, 2);
        }
      }
    }
    return nonzero;
  };
  // Large problems (10^8 elements) would take seconds on one core, and are
  // rebuilt by every new runner after a crash.
  const int64_t kChunk = int64_t(1) << 20;
  int threads = int(std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), (elems + kChunk - 1) / kChunk));
  bool any_nonzero = false;
  if (threads <= 1) {
    any_nonzero = fill(0, elems);
  } else {
    std::vector<char> nonzero(size_t(threads), 0);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        int64_t begin = elems * t / threads, end = elems * (t + 1) / threads;
        nonzero[size_t(t)] = fill(begin, end) ? 1 : 0;
      });
    }
    for (auto& th : pool) th.join();
    for (char z : nonzero) any_nonzero |= z != 0;
  }
  if (elems > 0 && !any_nonzero && !ZerosAllowed(init))
    return Status::Error("init '" + (init_text.empty() ? std::string("uniform(-1,1)") : init_text) +
                         "' gives all zeros for " + dtype);
  return bytes;
}

Result<std::string> NpyToBuffer(const std::string& npy, const std::string& dtype, int64_t elems) {
  auto bad = [](const std::string& why) { return Status::Error(".npy: " + why); };
  static const char kMagic[] = "\x93NUMPY";
  if (npy.size() < 10 || npy.compare(0, 6, kMagic, 6) != 0) return bad("not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(npy[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = size_t(static_cast<unsigned char>(npy[8])) | size_t(static_cast<unsigned char>(npy[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (npy.size() < 12) return bad("truncated header");
    for (int i = 0; i < 4; ++i) header_len |= size_t(static_cast<unsigned char>(npy[8 + i])) << (8 * i);
    start = 12;
  } else {
    return bad("format version " + std::to_string(major) + " (1 to 3 are read)");
  }
  // Headers are a hundred-odd bytes; a long one is refused before any regex
  // (std::regex recurses per character).
  if (header_len > 4096) return bad("a header of " + std::to_string(header_len) + " bytes (at most 4096 are read)");
  if (start + header_len > npy.size()) return bad("truncated header");
  const std::string header = npy.substr(start, header_len);
  std::smatch m;
  static const std::regex kDescr(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex kFortran(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex kShape(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(header, m, kDescr)) return bad("no 'descr' in the header");
  const std::string descr = m[1];
  if (std::regex_search(header, m, kFortran) && m[1] == "True") return bad("Fortran order (save it C-contiguous)");
  if (!std::regex_search(header, m, kShape)) return bad("no 'shape' in the header");
  int64_t count = 1;
  std::stringstream dims(m[1].str());
  for (std::string d; std::getline(dims, d, ',');) {
    if (d.find_first_not_of(" ") == std::string::npos) continue;
    const long long v = std::atoll(d.c_str());
    if (v < 0 || (v > 0 && count > (int64_t(1) << 40) / v)) return bad("shape (" + m[1].str() + ") is too large");
    count *= v;
  }
  const size_t item = descr == "<f4" || descr == "<i4" ? 4 : descr == "<f2" ? 2 : 0;
  const bool fits = (descr == "<f4" && (dtype == "f32" || dtype == "bf16")) || (descr == "<f2" && dtype == "f16") ||
                    (descr == "<i4" && dtype == "i32");
  if (!fits || item == 0)
    return bad("holds '" + descr + "'; a " + dtype + " buffer reads " +
               (dtype == "f32" || dtype == "bf16" ? "'<f4'" : dtype == "f16" ? "'<f2'" : "'<i4'"));
  if (count != elems)
    return bad("holds " + std::to_string(count) + " elements; the buffer has " + std::to_string(elems));
  const size_t data = start + header_len;
  if (npy.size() - data != size_t(count) * item)
    return bad("holds " + std::to_string(npy.size() - data) + " bytes of data for " + std::to_string(count) +
               " elements of " + std::to_string(item) + " bytes");
  if (dtype != "bf16") return npy.substr(data);
  std::string out(size_t(count) * 2, '\0');
  for (int64_t i = 0; i < count; ++i) {
    float f;
    std::memcpy(&f, npy.data() + data + size_t(i) * 4, 4);
    const uint16_t b = FloatToBf16(f);
    std::memcpy(out.data() + size_t(i) * 2, &b, 2);
  }
  return out;
}

std::vector<float> DecodeToFloat(const std::string& dtype, const std::string& bytes) {
  std::vector<float> out;
  if (dtype == "f32") {
    out.resize(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
  } else if (dtype == "i32") {
    out.resize(bytes.size() / 4);
    for (size_t i = 0; i < out.size(); ++i) {
      int32_t n;
      std::memcpy(&n, bytes.data() + 4 * i, 4);
      out[i] = float(n);
    }
  } else if (dtype == "f16" || dtype == "bf16") {
    const bool half = dtype == "f16";
    out.resize(bytes.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = half ? HalfToFloat(h) : Bf16ToFloat(h);
    }
  }
  return out;
}

void Compare(const std::vector<float>& out, const std::vector<float>& ref, double atol, double rtol,
             Comparison* c) {
  size_t n = std::min(out.size(), ref.size());
  const int64_t base = c->elements;
  auto bad = [&](size_t i, double o, double r) {
    ++c->mismatches;
    if (c->first_bad < 0) {
      c->first_bad = base + int64_t(i);
      c->first_bad_out = o;
      c->first_bad_ref = r;
    }
  };
  for (size_t i = 0; i < n; ++i) {
    double o = out[i], r = ref[i];
    if (std::isnan(o)) {
      ++c->nans;
      bad(i, o, r);
      continue;
    }
    double err = std::fabs(o - r);
    if (std::isfinite(err) && err > c->max_abs_error) c->max_abs_error = err;
    // Written so that NaN/inf in the reference or the error fails too.
    if (!(err <= atol + rtol * std::fabs(r)) && !(std::isinf(o) && o == r)) bad(i, o, r);
  }
  // A size mismatch is a failure of every element without a partner.
  for (size_t i = n; i < std::max(out.size(), ref.size()); ++i) bad(i, 0, 0);
  c->elements += int64_t(std::max(out.size(), ref.size()));
}

}  // namespace tune::runner
