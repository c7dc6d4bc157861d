// The bounds on what a client, a peer or a file may make the farm hold or
// compute, in one place: the op parser, the coordinator and the bundle
// loader refuse the same things, each with a one-line error naming the
// bound, the value and the limit. Each is checked in time linear in the
// input, before anything grows with it. README.md ("Bounds") lists them.
//
// Other bounds live beside the code they guard and are listed there too:
// kMaxRawConfigPoints and kMaxExplainedPoints (config_space.h), kMaxDims
// (runtime.h), kMaxFrameBytes (protocol.h), the text bounds (text.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tune {

// Values of one [params] axis. An axis is a list a person writes; larger
// ones are an attack on the duplicate check and on every config's storage.
inline constexpr size_t kMaxAxisValues = 4096;

// Params of one op ([params] axes), and so of one config anywhere: in a
// results row, a bundle entry or default. Every config is bound by name to
// its axes, whose cost grows with this.
inline constexpr size_t kMaxOpParams = 64;

// Dims of one op ([op] dims), and so of one shape: what a deployment's
// lookup takes (runtime.h kMaxDims is the same bound).
inline constexpr size_t kMaxOpDims = 16;

// Files of one op package and their bytes in all, as read by `submit` and as
// received by the coordinator: a package travels in every work unit and is
// kept in the store. A whole library belongs in an include root.
inline constexpr size_t kMaxPackageFiles = 1000;
inline constexpr size_t kMaxPackageBytes = size_t(32) << 20;

// Versions (distinct packages) of one op the store keeps: submitting a new
// one removes the oldest beyond this that no running sweep needs. Rows of a
// removed version stay; publishing them needs their package again.
inline constexpr size_t kMaxRetainedOpVersions = 8;

// (config, shape) pairs one sweep may queue on one GPU model: legal configs
// x shapes x dtypes, summed over its ops (--max-sweep-pairs). A pair costs
// the coordinator a config's worth of memory until it is leased.
inline constexpr uint64_t kDefaultMaxSweepPairs = 4'000'000;

// (config, shape) pairs queued over every running sweep of the farm
// (--max-farm-pairs).
inline constexpr uint64_t kDefaultMaxFarmPairs = 16'000'000;

// Sweeps one client (its CURVE key; without CURVE, its address) may submit
// in any 60 s, refused ones included (--max-sweeps-per-minute).
inline constexpr uint32_t kDefaultMaxSweepsPerMinute = 30;

}  // namespace tune
