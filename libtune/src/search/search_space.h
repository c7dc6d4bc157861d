// SearchSpace: an op's config space on one GPU model, walked without being
// enumerated.
//
// A point is one value index per axis. Legality is the spec's constraints,
// evaluated with the device's limits and the largest dsize of the op's
// dtypes (the farm's one config set for every dtype of a sweep, as
// EnumerateConfigs), and, given a shape, the op's shape rules at that shape
// with the dtype's dsize (as ConfigsForShape). So a searched key measures
// only configs an exhaustive sweep of it would measure.
//
// Memory is independent of the space's size: samples are drawn by rejection
// and neighbours are computed, so a 10^8-point space costs what is measured.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/types.h"
#include "opspec/op_definition.h"
#include "tune/status.h"

namespace tune {

using SpacePoint = std::vector<uint16_t>;  // a value index per axis, spec order

class SearchSpace {
 public:
  // Errors: a constraint or shape rule that does not compile, an unknown
  // dtype, a shape lacking a dim of the op, an axis with no values or more
  // than 65,535. `shape` null: no shape rules (every shape's configs).
  static Result<SearchSpace> Create(const OpSpec& spec, const DeviceInfo& device, const std::string& dtype,
                                    const Shape* shape = nullptr);
  // The space of a set of measured configs (a stored exhaustive sweep, for
  // replay): each param an axis of the values seen, sorted; legal means
  // measured. Errors: no configs, configs naming different params.
  static Result<SearchSpace> OfConfigs(const std::vector<Config>& configs);
  SearchSpace(SearchSpace&&) noexcept;
  SearchSpace& operator=(SearchSpace&&) noexcept;
  ~SearchSpace();

  size_t Axes() const;
  const Axis& AxisAt(size_t i) const;
  uint64_t RawSize() const;  // the product of the axes' sizes; UINT64_MAX on overflow

  // Whether every rule passes at `p` (an index in range on every axis).
  // Not thread-safe (the rules share one scope).
  bool Legal(const SpacePoint& p) const;

  Config ToConfig(const SpacePoint& p) const;
  // The point of `c`: nullopt when it names another set of params or a
  // value an axis lacks.
  std::optional<SpacePoint> PointOf(const Config& c) const;

  // A legal point drawn uniformly (rejection over raw points): nullopt when
  // `tries` draws found none (a space too sparse to sample this way).
  std::optional<SpacePoint> Sample(std::mt19937_64& rng, uint32_t tries = 20'000) const;
  // The legal points one step away along one axis (the next smaller and
  // larger value), axis by axis.
  std::vector<SpacePoint> Neighbours(const SpacePoint& p) const;
  // Every legal point in odometer order (last axis fastest), or an error
  // naming the bound when more than `max_legal` are legal or the raw space
  // exceeds kMaxRawConfigPoints.
  Result<std::vector<SpacePoint>> Enumerate(uint64_t max_legal) const;
  // Legal points: counted exactly when the raw space has at most
  // `exact_below` points, else estimated from `samples` uniform raw draws
  // (seeded, so the same space gives the same figure). `exact` tells which.
  uint64_t LegalCount(bool* exact = nullptr, uint64_t exact_below = 2'000'000, uint32_t samples = 200'000) const;

 private:
  SearchSpace();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
