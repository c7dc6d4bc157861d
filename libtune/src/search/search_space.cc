#include "search/search_space.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "opspec/config_space.h"
#include "opspec/expr.h"

namespace tune {

struct SearchSpace::Impl {
  std::vector<Axis> axes;
  // Constraints see the widest dsize of the op, shape rules the dtype's
  // own with the shape's dims: two scopes, each with a slot per axis.
  ExprScope scope, shape_scope;
  std::vector<double*> slots, shape_slots;
  std::vector<Expr> rules, shape_rules;
  uint64_t raw = 0;
  // OfConfigs: the legal points, and no rules.
  bool by_members = false;
  std::set<SpacePoint> members;
};

SearchSpace::SearchSpace() : impl_(std::make_unique<Impl>()) {}
SearchSpace::SearchSpace(SearchSpace&&) noexcept = default;
SearchSpace& SearchSpace::operator=(SearchSpace&&) noexcept = default;
SearchSpace::~SearchSpace() = default;

Result<SearchSpace> SearchSpace::Create(const OpSpec& spec, const DeviceInfo& device, const std::string& dtype,
                                        const Shape* shape) {
  const std::string where = (spec.origin.empty() ? spec.name : spec.origin) + ": ";
  const int dsize = DTypeSize(dtype);
  if (dsize <= 0) return Status::InvalidArgument(where + "unknown dtype '" + dtype + "'");
  // The farm's config set is legal for every dtype of the op (EnumerateConfigs).
  int widest = dsize;
  for (const std::string& d : spec.dtypes) widest = std::max(widest, DTypeSize(d));
  SearchSpace s;
  Impl& m = *s.impl_;
  m.axes = spec.axes;
  m.raw = RawSpaceSize(spec);
  m.scope.SetDevice(device);
  for (const Axis& a : m.axes) {
    if (a.values.empty() || a.values.size() > UINT16_MAX)
      return Status::InvalidArgument(where + "[params] " + a.name + ": " + std::to_string(a.values.size()) +
                                     " values (1 to 65535 searchable)");
    m.scope.Set(a.name, static_cast<double>(a.values[0].Number()));
    m.slots.push_back(m.scope.Slot(a.name));
  }
  m.scope.Set("dsize", widest);
  for (size_t c = 0; c < spec.constraints.size(); ++c) {
    auto e = Expr::Compile(spec.constraints[c], &m.scope, where + "[constraints] rules[" + std::to_string(c) + "]");
    if (!e.ok()) return e.status();
    m.rules.push_back(std::move(e).value());
  }
  if (shape != nullptr && !spec.shape_constraints.empty()) {
    m.shape_scope.SetDevice(device);
    m.shape_scope.Set("dsize", dsize);
    for (const Axis& a : m.axes) {
      m.shape_scope.Set(a.name, static_cast<double>(a.values[0].Number()));
      m.shape_slots.push_back(m.shape_scope.Slot(a.name));
    }
    for (const std::string& d : spec.dims) {
      bool given = false;
      for (const auto& [name, value] : shape->dims) given = given || name == d;
      if (!given) return Status::InvalidArgument(where + "shape " + shape->Canonical() + " lacks dim " + d);
      m.shape_scope.Set(d, static_cast<double>(ValueOf(shape->dims, d)));
    }
    for (const std::string& rule : spec.shape_constraints) {
      auto e = Expr::Compile(rule, &m.shape_scope, where + "[constraints] shape rule " + rule);
      if (!e.ok()) return e.status();
      m.shape_rules.push_back(std::move(e).value());
    }
  }
  return s;
}

Result<SearchSpace> SearchSpace::OfConfigs(const std::vector<Config>& configs) {
  if (configs.empty()) return Status::InvalidArgument("no configs to make a space of");
  SearchSpace s;
  Impl& m = *s.impl_;
  m.by_members = true;
  for (const auto& [name, value] : configs[0].params) {
    for (const Axis& a : m.axes)
      if (a.name == name) return Status::InvalidArgument("config " + configs[0].Canonical() + " names " + name + " twice");
    m.axes.push_back(Axis{name, {}});
  }
  for (const Config& c : configs) {
    if (c.params.size() != m.axes.size())
      return Status::InvalidArgument("config " + c.Canonical() + " names other params than " +
                                     configs[0].Canonical());
    for (size_t i = 0; i < m.axes.size(); ++i) {
      if (c.params[i].first != m.axes[i].name)
        return Status::InvalidArgument("config " + c.Canonical() + " names other params than " +
                                       configs[0].Canonical());
      m.axes[i].values.push_back(c.params[i].second);
    }
  }
  m.raw = 1;
  for (Axis& a : m.axes) {
    std::sort(a.values.begin(), a.values.end());
    a.values.erase(std::unique(a.values.begin(), a.values.end()), a.values.end());
    if (a.values.size() > UINT16_MAX) return Status::InvalidArgument("axis " + a.name + " has over 65535 values");
    m.raw = m.raw > UINT64_MAX / a.values.size() ? UINT64_MAX : m.raw * a.values.size();
  }
  for (const Config& c : configs) {
    const std::optional<SpacePoint> p = s.PointOf(c);
    if (!p) return Status::InvalidArgument("config " + c.Canonical() + " does not fit the space of the others");
    m.members.insert(*p);
  }
  return s;
}

size_t SearchSpace::Axes() const { return impl_->axes.size(); }
const Axis& SearchSpace::AxisAt(size_t i) const { return impl_->axes[i]; }
uint64_t SearchSpace::RawSize() const { return impl_->raw; }

bool SearchSpace::Legal(const SpacePoint& p) const {
  const Impl& m = *impl_;
  if (m.by_members) return m.members.count(p) > 0;
  for (size_t i = 0; i < m.axes.size(); ++i) *m.slots[i] = static_cast<double>(m.axes[i].values[p[i]].Number());
  for (const Expr& r : m.rules)
    if (!(std::fabs(r.Eval()) > 0)) return false;  // zero or NaN rejects
  if (m.shape_rules.empty()) return true;
  for (size_t i = 0; i < m.axes.size(); ++i) *m.shape_slots[i] = static_cast<double>(m.axes[i].values[p[i]].Number());
  for (const Expr& r : m.shape_rules)
    if (!(std::fabs(r.Eval()) > 0)) return false;
  return true;
}

Config SearchSpace::ToConfig(const SpacePoint& p) const {
  Config c;
  c.params.reserve(p.size());
  for (size_t i = 0; i < p.size(); ++i) c.params.emplace_back(impl_->axes[i].name, impl_->axes[i].values[p[i]]);
  return c;
}

std::optional<SpacePoint> SearchSpace::PointOf(const Config& c) const {
  const std::vector<Axis>& axes = impl_->axes;
  if (c.params.size() != axes.size()) return std::nullopt;
  SpacePoint p(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    bool named = false;
    for (const auto& [name, value] : c.params) {
      if (name != axes[i].name) continue;
      const auto it = std::find(axes[i].values.begin(), axes[i].values.end(), value);
      if (it == axes[i].values.end()) return std::nullopt;
      p[i] = static_cast<uint16_t>(it - axes[i].values.begin());
      named = true;
    }
    if (!named) return std::nullopt;
  }
  return p;
}

std::optional<SpacePoint> SearchSpace::Sample(std::mt19937_64& rng, uint32_t tries) const {
  SpacePoint p(impl_->axes.size());
  for (uint32_t t = 0; t < tries; ++t) {
    for (size_t i = 0; i < p.size(); ++i)
      p[i] = static_cast<uint16_t>(std::uniform_int_distribution<size_t>(0, impl_->axes[i].values.size() - 1)(rng));
    if (Legal(p)) return p;
  }
  return std::nullopt;
}

std::vector<SpacePoint> SearchSpace::Neighbours(const SpacePoint& p) const {
  std::vector<SpacePoint> out;
  for (size_t i = 0; i < p.size(); ++i) {
    for (int step : {-1, 1}) {
      const int v = static_cast<int>(p[i]) + step;
      if (v < 0 || v >= static_cast<int>(impl_->axes[i].values.size())) continue;
      SpacePoint q = p;
      q[i] = static_cast<uint16_t>(v);
      if (Legal(q)) out.push_back(std::move(q));
    }
  }
  return out;
}

Result<std::vector<SpacePoint>> SearchSpace::Enumerate(uint64_t max_legal) const {
  const Impl& m = *impl_;
  if (m.raw > kMaxRawConfigPoints)
    return Status::InvalidArgument("the config space has " + std::to_string(m.raw) +
                                   " raw points, more than the limit of " + std::to_string(kMaxRawConfigPoints));
  std::vector<SpacePoint> out;
  SpacePoint p(m.axes.size(), 0);
  while (true) {
    if (Legal(p)) {
      if (out.size() >= max_legal)
        return Status::InvalidArgument("more than " + std::to_string(max_legal) + " legal configs");
      out.push_back(p);
    }
    size_t i = p.size();
    while (i > 0 && ++p[i - 1] == m.axes[i - 1].values.size()) p[--i] = 0;
    if (i == 0) break;
  }
  return out;
}

uint64_t SearchSpace::LegalCount(bool* exact, uint64_t exact_below, uint32_t samples) const {
  const Impl& m = *impl_;
  if (m.raw <= exact_below) {
    if (exact) *exact = true;
    uint64_t n = 0;
    SpacePoint p(m.axes.size(), 0);
    while (true) {
      n += Legal(p) ? 1 : 0;
      size_t i = p.size();
      while (i > 0 && ++p[i - 1] == m.axes[i - 1].values.size()) p[--i] = 0;
      if (i == 0) break;
    }
    return n;
  }
  if (exact) *exact = false;
  std::mt19937_64 rng(0x5eed);
  SpacePoint p(m.axes.size());
  uint64_t hits = 0;
  for (uint32_t s = 0; s < samples; ++s) {
    for (size_t i = 0; i < p.size(); ++i)
      p[i] = static_cast<uint16_t>(std::uniform_int_distribution<size_t>(0, m.axes[i].values.size() - 1)(rng));
    hits += Legal(p) ? 1 : 0;
  }
  return static_cast<uint64_t>(std::llround(static_cast<double>(m.raw) * hits / samples));
}

}  // namespace tune
