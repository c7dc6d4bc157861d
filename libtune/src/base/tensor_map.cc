#include "base/tensor_map.h"

namespace tune {

Result<TensorMapLayout> LayTensorMap(const std::string& what, const std::string& dtype,
                                     std::span<const int64_t> extents, std::span<const int64_t> box, int swizzle) {
  auto bad = [&](const std::string& why) { return Status::InvalidArgument("tensor map " + what + ": " + why); };
  TensorMapLayout l;
  uint64_t width = 0;
  if (dtype == "f16") {
    l.dtype = TensorMapLayout::kF16, width = 2;
  } else if (dtype == "bf16") {
    l.dtype = TensorMapLayout::kBF16, width = 2;
  } else if (dtype == "f32") {
    l.dtype = TensorMapLayout::kF32, width = 4;
  } else if (dtype == "i32") {
    l.dtype = TensorMapLayout::kI32, width = 4;
  } else {
    return bad("no tensor map of dtype '" + dtype + "'");
  }
  switch (swizzle) {
    case 0: l.swizzle = 0; break;
    case 32: l.swizzle = 1; break;
    case 64: l.swizzle = 2; break;
    case 128: l.swizzle = 3; break;
    default: return bad("swizzle " + std::to_string(swizzle) + " is not 0, 32, 64 or 128");
  }
  if (extents.empty() || extents.size() > 5 || box.size() != extents.size())
    return bad("needs 1 to 5 dims and a box dim for each");
  l.rank = uint32_t(extents.size());
  uint64_t pitch = width;
  for (uint32_t i = 0; i < l.rank; ++i) {
    const int64_t e = extents[l.rank - 1 - i], b = box[l.rank - 1 - i];
    if (e < 1 || e > (int64_t(1) << 32)) return bad("extent " + std::to_string(e) + " is outside 1..2^32");
    if (b < 1 || b > 256) return bad("box dim " + std::to_string(b) + " is outside 1..256");
    l.dims[i] = uint64_t(e);
    l.box[i] = uint32_t(b);
    if (i > 0) {
      if (pitch % 16 != 0)
        return bad("a row of " + std::to_string(pitch) + " bytes is no multiple of 16 (the copy engine's pitch)");
      l.strides[i - 1] = pitch;
    }
    if (__builtin_mul_overflow(pitch, uint64_t(e), &pitch) || (i + 1 < l.rank && pitch >= (uint64_t(1) << 40)))
      return bad("a stride reaches 2^40 bytes, the copy engine's limit");
  }
  const uint64_t row = l.box[0] * width;
  if (row % 16 != 0) return bad("the box's innermost row of " + std::to_string(row) + " bytes is no multiple of 16");
  if (swizzle > 0 && row > uint64_t(swizzle))
    return bad("the box's innermost row of " + std::to_string(row) + " bytes is wider than the " +
               std::to_string(swizzle) + "-byte swizzle");
  return l;
}

Status CheckTensorMapAddress(const std::string& what, uint64_t address) {
  if (address == 0) return Status::InvalidArgument("tensor map " + what + ": the buffer is null");
  if (address % 16 == 0) return Status::OK();
  return Status::InvalidArgument("tensor map " + what + ": the buffer's address is not 16-byte aligned");
}

}  // namespace tune
