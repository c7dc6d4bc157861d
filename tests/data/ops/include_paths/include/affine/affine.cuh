// Found as <affine/affine.cuh> through [op] include = ["include"].
#pragma once
#include "scale.cuh"
#include <shiftlib/shift.cuh>

namespace affine {
__device__ __forceinline__ float apply(float v) { return kScale * v + shiftlib::shift(); }
}  // namespace affine
