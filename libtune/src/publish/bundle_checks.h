// What the bundle's binary and JSON forms check alike (private to publish).
#pragma once

#include <cstdint>

#include "publish/bundle.h"

namespace tune {

inline constexpr uint32_t kBundleFormatVersion = 1;

// A format version this libtune reads.
Status CheckVersion(uint32_t v);
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
