#pragma once
namespace shiftlib {
constexpr float kShift = 1.0f;
}  // namespace shiftlib
