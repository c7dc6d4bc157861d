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

// Op package bytes the store keeps over every op name (--max-package-store-
// bytes), and the new package bytes one sweep submit may bring (the bound
// per client: a submit is one client's, and submits per client are rate-
// bound). A submit that would take the store past the bound first has
// packages pruned that nothing needs (ResultStore::MakeRoomForOps), then is
// refused with a line. 12 op names of 30 MB each once made a 430 MB store.
inline constexpr uint64_t kDefaultMaxStoredPackageBytes = uint64_t{256} << 20;
inline constexpr uint64_t kMaxSubmitNewPackageBytes = uint64_t{64} << 20;
// New op package bytes one client (CURVE key, else address) may bring to the
// store per hour: a client cannot churn the store's bound alone.
inline constexpr uint64_t kDefaultMaxPackageBytesPerClientHour = uint64_t{128} << 20;

// Unpacked op packages a worker keeps on disk (its cache folder's
// packages/ and programs/packages/), in bytes: past it the least recently
// used folders are removed, never one a queued or running unit uses.
inline constexpr uint64_t kDefaultMaxWorkerPackageCacheBytes = uint64_t{256} << 20;

// Remote reads (StoreRead): the bytes one export may take, counted while it
// is written (--max-read-bytes), the bytes of every export made or held at
// once, and the exports one client (CURVE key, else address) may have made
// or held at once, so that no client locks the others out.
inline constexpr uint64_t kDefaultMaxReadBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxHeldReadBytes = uint64_t{4} << 30;
inline constexpr size_t kMaxReadsPerClient = 2;

// Bytes of cubins one ImageReply carries (the coordinator serving stored
// images to a worker before it compiles): the images past it count as
// missing and the worker compiles them. Below the frame bound (protocol.h
// kMaxFrameBytes, 64 MiB) with room for the envelope, so that a reply of
// whole kMaxKernelImageBytes images always fits one frame.
inline constexpr uint64_t kMaxImageReplyBytes = uint64_t{48} << 20;

// Worker names the coordinator counts reused rows by (/api/workers'
// reused_by_worker, tunefarm_rows_reused_total{worker}): names are the
// workers' own, and a farm that restarts unnamed workers (host:pid) would
// make a label per start; past this many the rest count as "(others)".
inline constexpr size_t kMaxReuseWorkerLabels = 256;

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

// A sweep's priority (SweepSubmit::priority): an integer in
// [kMinSweepPriority, kMaxSweepPriority], higher leased first. A sweep that
// names none (an older client's message too) is kDefaultSweepPriority.
inline constexpr uint32_t kMinSweepPriority = 0;
inline constexpr uint32_t kMaxSweepPriority = 100;
inline constexpr uint32_t kDefaultSweepPriority = 50;

// Decompressed bytes of one `search replay` / `search predict` input (a
// `tunefarm results --format csv` file, gzip or plain), counted while it is
// inflated: a gzip bomb is refused here, having cost one buffer. 256 MiB is
// about a million rows, 30 times the largest exhaustive sweep in
// tests/data/search.
inline constexpr uint64_t kMaxReplayInputBytes = uint64_t(256) << 20;

// Bytes of one line of such a file, or of a misses file (`sweep
// from-misses`): a row names one config and one shape, a miss one shape. A
// longer line is refused by its number without being held whole.
inline constexpr size_t kMaxInputLineBytes = size_t(64) << 10;

// Configs of one key that `search replay` replays: the strategies list at
// most this many legal points (kListLegalUpTo, search/strategy_base.h).
inline constexpr size_t kMaxReplayKeyConfigs = 1'000'000;

// Tuned shapes of one (GPU model, op, dtype) that `search predict` fits
// shape selectors on. A fit costs shapes^2 (every threshold of every
// feature partitions the shapes), and predict fits once per shape held
// out: at 256 shapes a fit is milliseconds and a group a few seconds. A
// group with more is refused, naming it.
inline constexpr size_t kMaxFitShapes = 256;

// Lines of the misses files one `sweep from-misses` reads. A line's count
// is at most 2^53 (a JSON number's exact range); a shape's counts add up
// saturating at UINT64_MAX, printed as "or more".
inline constexpr size_t kMaxMissLines = 1'000'000;

// No board draws more (an 8-GPU node's share is about 1 kW a device): a
// power figure or limit past it, from a worker or a program, is refused.
inline constexpr double kMaxPowerW = 5000;

}  // namespace tune
