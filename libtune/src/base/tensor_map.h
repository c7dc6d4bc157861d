// Tensor maps ([[args]] of kind tensor_map): how a buffer is described to the
// copy engine (cp.async.bulk.tensor), computed for the driver's
// cuTensorMapEncodeTiled. The farm's runner and the deployments' launcher
// encode one per launch from the buffer's address; this is the layout they
// share. Standard library only: the values are the driver ABI's.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tune/status.h"

namespace tune {

// The arguments of cuTensorMapEncodeTiled but the address: a row-major
// buffer of `dtype` ("f16" | "bf16" | "f32" | "i32") with `extents`
// (outermost dim first, as in op.toml), copied in boxes of `box` elements
// (same order), swizzled in shared memory by `swizzle` bytes (0 | 32 | 64 |
// 128). Elements outside the buffer read as zeros and are not written.
struct TensorMapLayout {
  int dtype = 0;    // CUtensorMapDataType
  uint32_t rank = 0;
  uint64_t dims[5] = {};     // innermost first, as the driver takes them
  uint64_t strides[4] = {};  // bytes, of dims 1..rank-1
  uint32_t box[5] = {};
  uint32_t element_strides[5] = {1, 1, 1, 1, 1};
  int swizzle = 0;  // CUtensorMapSwizzle
  static constexpr int kInterleaveNone = 0, kL2Promotion256B = 3, kOobFillZeros = 0;
  static constexpr int kF16 = 6, kBF16 = 9, kF32 = 7, kI32 = 3;  // CU_TENSOR_MAP_DATA_TYPE_*
};

// What the copy engine cannot do is refused before the driver is asked, with
// a line naming `what`: a rank above 5, an extent of 0 or above 2^32, a row
// pitch that is no multiple of 16 bytes, a box dim outside 1..256, an
// innermost box row that is no multiple of 16 bytes or wider than the
// swizzle.
Result<TensorMapLayout> LayTensorMap(const std::string& what, const std::string& dtype,
                                     std::span<const int64_t> extents, std::span<const int64_t> box, int swizzle);

// The address must be non-null and 16-byte aligned (else a one-line error
// naming `what`).
Status CheckTensorMapAddress(const std::string& what, uint64_t address);

}  // namespace tune
