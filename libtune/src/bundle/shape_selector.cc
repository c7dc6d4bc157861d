#include "bundle/shape_selector.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

namespace tune {
namespace {

double Log2Of(const Shape& s, const std::string& name) {
  for (const auto& [n, v] : s.dims)
    if (n == name) return std::log2(static_cast<double>(std::max<int64_t>(v, 1)));
  return 0.0;
}

struct Fit {
  const SelectorInput& in;
  std::vector<double> best;                 // per shape
  std::vector<size_t> chosen;               // the cover
  std::vector<std::vector<double>> feats;   // per shape
  std::vector<SelectorNode> nodes;

  // Candidate c's log slowdown on shape s.
  double Cost(size_t c, size_t s) const {
    const double u = in.us[c][s];
    return std::isfinite(u) ? std::log(std::max(u / best[s], 1.0)) : std::log(kSelectorUnmeasured);
  }

  // Greedy set cover: the candidate within kSelectorSlowdown of the most
  // uncovered shapes' best first (ties: the lower geometric mean of its
  // ratios on the shapes it covers, then the smaller config id).
  void Cover(const std::vector<size_t>& shapes) {
    auto covers = [&](size_t c, size_t s) { return std::isfinite(in.us[c][s]) && in.us[c][s] <= kSelectorSlowdown * best[s]; };
    std::vector<size_t> left = shapes;
    while (!left.empty()) {
      size_t pick = SIZE_MAX, pick_n = 0;
      double pick_mean = 0;
      for (size_t c = 0; c < in.candidates.size(); ++c) {
        size_t n = 0;
        double log_sum = 0;
        for (size_t s : left) n += covers(c, s);
        for (size_t s : shapes)
          if (covers(c, s)) log_sum += Cost(c, s);
        if (n == 0) continue;
        const double mean = log_sum / static_cast<double>(n);
        const bool better = n > pick_n || (n == pick_n && (mean < pick_mean ||
                            (mean == pick_mean && in.candidates[c].Id() < in.candidates[pick].Id())));
        if (pick == SIZE_MAX || better) pick = c, pick_n = n, pick_mean = mean;
      }
      if (pick == SIZE_MAX) break;  // cannot happen: each shape's best covers it
      chosen.push_back(pick);
      std::erase_if(left, [&](size_t s) { return covers(pick, s); });
    }
  }

  // The chosen candidate (an index into `chosen`) with the least summed
  // cost over `shapes`, and that cost.
  std::pair<uint32_t, double> Leaf(const std::vector<size_t>& shapes) const {
    uint32_t pick = 0;
    double pick_cost = INFINITY;
    for (uint32_t k = 0; k < chosen.size(); ++k) {
      double cost = 0;
      for (size_t s : shapes) cost += Cost(chosen[k], s);
      if (cost < pick_cost - 1e-12 ||
          (std::fabs(cost - pick_cost) <= 1e-12 && in.candidates[chosen[k]].Id() < in.candidates[chosen[pick]].Id()))
        pick = k, pick_cost = cost;
    }
    return {pick, pick_cost};
  }

  // Appends the subtree of `shapes`, parent before children; its index.
  uint32_t Grow(const std::vector<size_t>& shapes, size_t depth) {
    const auto [leaf, leaf_cost] = Leaf(shapes);
    const auto at = static_cast<uint32_t>(nodes.size());
    nodes.push_back(SelectorNode{true, 0, 0, 0, 0, leaf});
    if (depth == 0 || shapes.size() < 2 || nodes.size() + 2 > kMaxSelectorNodes) return at;
    double best_cost = leaf_cost - kSelectorMinGain;
    uint32_t best_f = 0;
    double best_t = 0;
    bool split = false;
    for (uint32_t f = 0; f < feats.front().size(); ++f) {
      std::vector<double> values;
      for (size_t s : shapes) values.push_back(feats[s][f]);
      std::sort(values.begin(), values.end());
      values.erase(std::unique(values.begin(), values.end()), values.end());
      for (size_t i = 0; i + 1 < values.size(); ++i) {
        const double t = 0.5 * (values[i] + values[i + 1]);
        std::vector<size_t> lo, hi;
        for (size_t s : shapes) (feats[s][f] <= t ? lo : hi).push_back(s);
        const double cost = Leaf(lo).second + Leaf(hi).second;
        if (cost < best_cost - 1e-12) best_cost = cost, best_f = f, best_t = t, split = true;
      }
    }
    if (!split) return at;
    std::vector<size_t> lo, hi;
    for (size_t s : shapes) (feats[s][best_f] <= best_t ? lo : hi).push_back(s);
    const uint32_t l = Grow(lo, depth - 1);
    const uint32_t r = Grow(hi, depth - 1);
    nodes[at] = SelectorNode{false, best_f, best_t, l, r, 0};
    return at;
  }
};

}  // namespace

size_t SelectorFeatureCount(size_t ndims) { return ndims + ndims * (ndims - (ndims > 0)) / 2; }

void SelectorFeatures(const double* log2_dims, size_t ndims, double* out) {
  size_t k = 0;
  for (size_t i = 0; i < ndims; ++i) out[k++] = log2_dims[i];
  for (size_t i = 0; i < ndims; ++i)
    for (size_t j = i + 1; j < ndims; ++j) out[k++] = log2_dims[i] + log2_dims[j];
}

std::vector<double> ShapeFeatures(const std::vector<std::string>& dims, const Shape& shape) {
  std::vector<double> logs, out(SelectorFeatureCount(dims.size()));
  for (const std::string& d : dims) logs.push_back(Log2Of(shape, d));
  SelectorFeatures(logs.data(), logs.size(), out.data());
  return out;
}

ShapeSelector FitShapeSelector(const SelectorInput& in) {
  ShapeSelector out;
  if (in.shapes.empty() || in.candidates.empty() || in.candidates.size() > kMaxSelectorCandidates) return out;
  for (const auto& [name, v] : in.shapes.front().dims) out.dims.push_back(name);
  if (out.dims.size() > kMaxSelectorDims) return out;
  Fit fit{in, std::vector<double>(in.shapes.size(), INFINITY), {}, {}, {}};
  std::vector<size_t> shapes;  // those with a finite figure
  for (size_t s = 0; s < in.shapes.size(); ++s) {
    for (size_t c = 0; c < in.candidates.size(); ++c) fit.best[s] = std::min(fit.best[s], in.us[c][s]);
    if (std::isfinite(fit.best[s]) && fit.best[s] > 0) shapes.push_back(s);
  }
  if (shapes.empty()) return out;
  fit.Cover(shapes);
  if (fit.chosen.empty()) return out;
  for (const Shape& s : in.shapes) fit.feats.push_back(ShapeFeatures(out.dims, s));
  fit.Grow(shapes, kSelectorDepth);
  out.candidates = std::move(fit.chosen);
  out.nodes = std::move(fit.nodes);
  return out;
}

uint32_t SelectorAnswer(const std::vector<SelectorNode>& nodes, const double* features) {
  uint32_t at = 0;
  while (!nodes[at].leaf) at = features[nodes[at].feature] <= nodes[at].threshold ? nodes[at].left : nodes[at].right;
  return nodes[at].candidate;
}

size_t SelectorLeaves(const std::vector<SelectorNode>& nodes) {
  return static_cast<size_t>(std::count_if(nodes.begin(), nodes.end(), [](const SelectorNode& n) { return n.leaf; }));
}

Status CheckSelectorNodes(const std::vector<SelectorNode>& nodes, size_t nfeatures, size_t ncandidates) {
  if (nodes.empty()) return Status::Error("no nodes");
  if (nodes.size() > kMaxSelectorNodes) return Status::Error(std::to_string(nodes.size()) + " nodes, over the bound of " +
                                                             std::to_string(kMaxSelectorNodes));
  for (size_t i = 0; i < nodes.size(); ++i) {
    const SelectorNode& n = nodes[i];
    const std::string at = "node " + std::to_string(i) + ": ";
    if (n.leaf) {
      if (n.candidate >= ncandidates) return Status::Error(at + "candidate " + std::to_string(n.candidate) + " of " +
                                                           std::to_string(ncandidates));
      continue;
    }
    if (n.feature >= nfeatures) return Status::Error(at + "feature " + std::to_string(n.feature) + " of " +
                                                     std::to_string(nfeatures));
    if (!std::isfinite(n.threshold)) return Status::Error(at + "threshold not finite");
    if (n.left <= i || n.right <= i || n.left >= nodes.size() || n.right >= nodes.size())
      return Status::Error(at + "a child that does not follow it");
  }
  return Status::OK();
}

size_t NearestShape(const std::vector<Shape>& shapes, const Shape& query) {
  size_t best = SIZE_MAX;
  double best_d = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < shapes.size(); ++i) {
    double d = 0;
    for (const auto& [name, v] : query.dims) d += std::pow(Log2Of(query, name) - Log2Of(shapes[i], name), 2);
    for (const auto& [name, v] : shapes[i].dims) {
      bool shared = false;
      for (const auto& [qn, qv] : query.dims) shared = shared || qn == name;
      if (!shared) d += std::pow(Log2Of(shapes[i], name), 2);
    }
    if (d < best_d) best_d = d, best = i;
  }
  return best;
}

}  // namespace tune
