// Beside its includer in the package's include folder.
#pragma once
namespace affine {
constexpr float kScale = 2.0f;
}  // namespace affine
