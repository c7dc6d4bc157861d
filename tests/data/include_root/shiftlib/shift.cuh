// An include root's header (a library outside the op package): its content,
// and that of the headers it reaches, is part of the kernel hash.
#pragma once
#include "shift_value.cuh"

namespace shiftlib {
__device__ __forceinline__ float shift() { return kShift; }
}  // namespace shiftlib
