// The selector a bundle ships for shapes never tuned (the runtime's
// `predicted` level). From the tuned shapes of one (op, dtype, GPU model):
//
// 1. a cover: few configs that hold every tuned shape within a slowdown
//    bound of its best. After ROCm's CK dispatcher and Helion's
//    ahead-of-time heuristics: a few robust configs generalise better than
//    each shape's own winner, which may be a needle only that shape likes;
// 2. a small decision tree over shape features (log2 of each dim and of
//    each pair's product: a GEMM's tile count follows M*N, which no single
//    dim shows) whose leaves name configs of the cover. It is fitted to
//    cost, not to labels: a leaf takes the config with the least summed
//    log slowdown over its shapes, and a split is kept only where it saves
//    more than kSelectorMinGain.
//
// Measured on 18 tuned GEMM shapes of an H100, each held out in turn
// (bench/search.md): the tree's configs were 1.004x of the held-out shapes'
// best in geometric mean; the nearest tuned shape's winner, 1.052x.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tune/status.h"
#include "base/types.h"

namespace tune {

inline constexpr double kSelectorSlowdown = 1.05;  // the cover's bound
inline constexpr size_t kSelectorDepth = 3;
inline constexpr double kSelectorMinGain = 1e-3;   // summed log slowdown a split must save
// The slowdown charged for a config not measured (or failed) on a shape.
inline constexpr double kSelectorUnmeasured = 4.0;
// What a bundle's selector may hold (checked when a bundle is read).
inline constexpr size_t kMaxSelectorNodes = 1024, kMaxSelectorCandidates = 256, kMaxSelectorDims = 8;

struct SelectorInput {
  std::vector<Shape> shapes;  // the tuned shapes, with the same dim names
  std::vector<Config> candidates;
  // us[c][s]: candidate c's figure on shape s; infinity where not measured
  // (or failed). Every shape needs one finite figure.
  std::vector<std::vector<double>> us;
};

// A node of the tree: a leaf names candidates[candidate]; a split sends
// features[feature] <= threshold left. Children come after their parent
// (so that a walk ends), nodes[0] is the root.
struct SelectorNode {
  bool leaf = true;
  uint32_t feature = 0;
  double threshold = 0;
  uint32_t left = 0, right = 0;
  uint32_t candidate = 0;
};

struct ShapeSelector {
  std::vector<std::string> dims;    // the order the features read the dims in
  std::vector<size_t> candidates;   // the cover: indices into SelectorInput::candidates
  std::vector<SelectorNode> nodes;  // empty when nothing could be fitted
};

// The cover and the tree. Deterministic: ties go to the smaller config id,
// the lower feature, the lower threshold.
ShapeSelector FitShapeSelector(const SelectorInput& in);

// Features of a shape from the log2 of its dims (log2(max(dim, 1)), in the
// selector's order): those, then log2 of each pair's product (i < j).
size_t SelectorFeatureCount(size_t ndims);
void SelectorFeatures(const double* log2_dims, size_t ndims, double* out);
// The same for `shape`, its dims read in `dims` order (one it lacks: 1).
std::vector<double> ShapeFeatures(const std::vector<std::string>& dims, const Shape& shape);

// The leaf's candidate (an index into ShapeSelector::candidates) for
// `features`. The nodes must have passed CheckSelectorNodes.
uint32_t SelectorAnswer(const std::vector<SelectorNode>& nodes, const double* features);

size_t SelectorLeaves(const std::vector<SelectorNode>& nodes);

// Nodes a walk can take: a root, children after their parents, features
// and candidates in range, finite thresholds. One line naming the node.
Status CheckSelectorNodes(const std::vector<SelectorNode>& nodes, size_t nfeatures, size_t ncandidates);

// The index of the shape of `shapes` nearest to `query`: Euclidean distance
// of log2(max(dim, 1)), dims paired by name (a dim the other lacks counts
// as 1); ties to the first. SIZE_MAX when `shapes` is empty. The
// runtime's nearest-shape metric, for tools that compare against it.
size_t NearestShape(const std::vector<Shape>& shapes, const Shape& query);

}  // namespace tune
