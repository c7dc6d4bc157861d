// A selector for shapes never tuned: from the tuned shapes of one (op,
// dtype, GPU model), a small set of configs that covers every tuned shape
// within a slowdown bound, and a rule that gives an untuned shape the
// config assigned to its nearest tuned shape (log2 dims, the runtime's
// metric). After ROCm's CK dispatcher and Helion's ahead-of-time
// heuristics: a few robust configs generalise better than each shape's own
// winner, which may be a needle that only that shape likes.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include "base/types.h"

namespace tune {

inline constexpr double kSelectorSlowdown = 1.05;

struct SelectorInput {
  std::vector<Shape> shapes;                 // the tuned shapes
  std::vector<Config> candidates;
  // us[c][s]: candidate c's figure on shape s; infinity where not measured
  // (or failed). Every shape needs one finite figure.
  std::vector<std::vector<double>> us;
};

struct Selector {
  std::vector<size_t> chosen;  // candidates kept, in the order the cover took them
  std::vector<size_t> assign;  // per shape: the candidate (of `chosen`) it answers with
};

// Greedy set cover: the candidate within `slowdown` of the most uncovered
// shapes' best first (ties: the lower geometric mean of its ratios to the
// best on the shapes it covers, then the smaller config id), until every
// shape is covered; each shape then takes the fastest chosen candidate
// that covers it. Shapes with no finite figure are assigned nothing
// (SIZE_MAX).
Selector FitSelector(const SelectorInput& in, double slowdown = kSelectorSlowdown);

// The index of the shape of `shapes` nearest to `query`: Euclidean distance
// of log2(max(dim, 1)), dims paired by name (a dim the other lacks counts
// as 1); ties to the first. SIZE_MAX when `shapes` is empty.
size_t NearestShape(const std::vector<Shape>& shapes, const Shape& query);

}  // namespace tune
