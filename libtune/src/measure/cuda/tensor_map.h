// Tensor maps for [[args]] of kind tensor_map: the CUtensorMap a kernel's
// copy engine reads (cp.async.bulk.tensor), encoded on the host for each
// launch from the buffer it describes. Private to measure/cuda and the
// launcher's callers of it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "measure/cuda/cuda_driver.h"
#include "tune/status.h"

namespace tune::cuda {

// The encoding of a row-major buffer of `dtype` ("f16" | "bf16" | "f32" |
// "i32") at `address` with `extents` (outermost dim first, as in op.toml),
// copied in boxes of `box` elements (same order), swizzled in shared memory
// by `swizzle` bytes (0 | 32 | 64 | 128). Elements outside the buffer read
// as zeros and are not written. What the copy engine cannot do is refused
// before the driver is asked, with a line naming `what`: a rank above 5, an
// extent of 0 or above 2^32, a row pitch that is no multiple of 16 bytes, an
// address not 16-byte aligned, a box dim outside 1..256, an innermost box
// row that is no multiple of 16 bytes or wider than the swizzle.
struct TensorMapLayout {
  CUtensorMapDataType dtype{};
  uint32_t rank = 0;
  uint64_t dims[5] = {};     // innermost first, as the driver takes them
  uint64_t strides[4] = {};  // bytes, of dims 1..rank-1
  uint32_t box[5] = {};
  uint32_t element_strides[5] = {1, 1, 1, 1, 1};
  CUtensorMapSwizzle swizzle{};
};
Result<TensorMapLayout> LayTensorMap(const std::string& what, const std::string& dtype, uint64_t address,
                                     std::span<const int64_t> extents, std::span<const int64_t> box, int swizzle);

// Encodes `layout` for `address` into `map`.
CuStatus EncodeTensorMap(const Driver& d, const TensorMapLayout& layout, CUdeviceptr address, CUtensorMap* map);

}  // namespace tune::cuda
