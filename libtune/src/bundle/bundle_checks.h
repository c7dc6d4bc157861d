// What the bundle's binary and JSON forms check alike (private to publish).
#pragma once

#include <cstdint>

#include "bundle/bundle.h"

namespace tune {

// 2: launch plans may take tensor maps (a reader of 1 would see scalars
// without a program); a bundle without them is still written as 1.
inline constexpr uint32_t kBundleFormatVersion = 2;

// A format version this libtune reads.
Status CheckVersion(uint32_t v);
// The version `b` is written as: its own, raised to what its parts need.
uint32_t FormatVersionOf(const Bundle& b);
// Values a deployment relies on: programs that evaluate safely over the
// plan's variables, three of each geometry, images whose bytes match their
// SHA-256. The message names the plan or image.
Status CheckBundleParts(const Bundle& b);
// The bounds of base/limits.h that keep a lookup fast: params per config
// (entries, defaults of every kind), variables per launch plan and shape
// rules (params, dims and dsize). The message names the
// entry, the bound, the value and the limit.
Status CheckBundleBounds(const Bundle& b);

}  // namespace tune
