// Host-side data for checking kernels: seeded inputs, dtype conversions and
// the output-vs-reference comparison. No CUDA here, so it is unit-testable on
// any host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/status.h"

namespace tune::runner {

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);         // round to nearest even
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);         // round to nearest even

// A parsed input `init` expression: uniform(a,b), normal(mean=a, std=b),
// ones, int(a,b) (uniform integers in [a, b] in any dtype) or zeros. A
// file(name.npy) init is not drawn: NpyToBuffer reads it.
struct InitSpec {
  // Values shared with the device fill kernel.
  enum class Kind { kUniform = 0, kNormal = 1, kOnes = 2, kInt = 3, kZeros = 4 };
  Kind kind = Kind::kUniform;
  double a = -1, b = 1;
};

// Parses `init` ("uniform(lo,hi)", "normal(mean,std)", "ones", "int(lo,hi)",
// "zeros"; empty = "uniform(-1,1)"). Error names the text.
// True when the draw may be all zeros: asked for (zeros, int(0,0)) rather
// than a range that rounds to nothing in the dtype.
inline bool ZerosAllowed(const InitSpec& init) {
  return init.kind == InitSpec::Kind::kZeros || init.kind == InitSpec::Kind::kInt;
}
Result<InitSpec> ParseInit(const std::string& init);

// Element `index` of the seeded draw: splitmix64 of seed ^ (index * odd), so
// element i is the same on every host, in any thread, and on the device (the
// runner's fill kernel computes the same formula; see runner.cc).
double InitValue(const InitSpec& init, bool integral, uint64_t seed, int64_t index);

// Bytes of `elems` elements of `dtype` (f16, bf16, f32, i32) drawn from `init`
// ("uniform(lo,hi)", "normal(mean,std)", "ones"; empty = "uniform(-1,1)").
// Deterministic in `seed` on every host. A draw that would be all zeros
// (e.g. i32 uniform(0,0)) is an error: zeros hide kernels that never read.
Result<std::string> MakeInput(const std::string& dtype, const std::string& init, int64_t elems,
                              uint64_t seed);

// The `elems` elements of a `dtype` buffer from the bytes of a .npy file
// (format 1.0-3.0, C order, little-endian): '<f4' into f32 or bf16 (rounded),
// '<f2' into f16, '<i4' into i32; any shape holding exactly `elems`
// elements. Errors say what the file holds and what the buffer needs.
Result<std::string> NpyToBuffer(const std::string& npy, const std::string& dtype, int64_t elems);

// Elements of a `dtype` buffer as floats.
std::vector<float> DecodeToFloat(const std::string& dtype, const std::string& bytes);

struct Comparison {
  int64_t elements = 0;
  int64_t mismatches = 0;       // outside atol + rtol*|ref|, NaN included
  int64_t nans = 0;             // NaN in the output
  double max_abs_error = 0;     // over elements where both are finite
  int64_t first_bad = -1;       // index (over all compared elements) of the first failure
  double first_bad_out = 0, first_bad_ref = 0;
  double MismatchRatio() const { return elements ? double(mismatches) / double(elements) : 0.0; }
};

// Accumulates out vs ref into `c`: |out - ref| <= atol + rtol*|ref| passes,
// NaN never does.
void Compare(const std::vector<float>& out, const std::vector<float>& ref, double atol, double rtol,
             Comparison* c);

// 64-bit FNV-1a, for seeds derived from names.
uint64_t Fnv1a64(const std::string& s, uint64_t h = 1469598103934665603ull);

}  // namespace tune::runner
