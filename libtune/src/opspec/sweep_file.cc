#include "opspec/sweep_file.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <toml++/toml.h>

#include "base/text.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

Status AddOps(SweepSubmit* s, const std::vector<std::string>& ops, const std::string& ops_dir,
              const std::string& where) {
  for (const auto& op : ops) {
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(ops_dir) / op / "op.toml", ec)) {
      const std::vector<std::string> known = OpNamesIn(ops_dir);
      const std::string near = NearestName(op, known);
      return Status::NotFound(where + ": no op '" + op + "' in " + ops_dir +
                              (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; it has " +
                              (known.empty() ? std::string("none") : Join(known, ", ")) +
                              " (`tunefarm op list --ops-dir " + ops_dir + "`)");
    }
    auto pkg = ReadOpPackage(ops_dir + "/" + op);
    if (!pkg.ok()) return pkg.status().WithPrefix(where + ": op '" + op + "': ");
    s->ops.push_back(op);
    s->op_packages.push_back(std::move(pkg).value());
  }
  return Status::OK();
}

// Why `shape` does not give `spec`'s dims, naming the dim: "lacks K",
// "has 'L', no dim of the op", "has 'k' (did you mean 'K'?)".
std::string ShapeMismatch(const Shape& shape, const OpSpec& spec) {
  for (const auto& [name, value] : shape.dims) {
    if (std::find(spec.dims.begin(), spec.dims.end(), name) != spec.dims.end()) continue;
    const std::string near = NearestName(name, spec.dims);
    return "has '" + name + "'" + (near.empty() ? ", no dim of the op" : " (did you mean '" + near + "'?)");
  }
  for (const std::string& d : spec.dims) {
    const bool given = std::any_of(shape.dims.begin(), shape.dims.end(), [&](const auto& kv) { return kv.first == d; });
    if (!given) return "lacks " + d;
  }
  return "";
}

// Every op needs a shape; every shape must fit some op.
Status CheckShapes(const SweepSubmit& s, const std::string& where) {
  std::vector<OpSpec> specs;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    auto shared = SharedOpSpec(s.op_packages[i], s.ops[i]);
    if (!shared.ok()) return shared.status();
    const OpSpec* spec = shared->get();
    if (ShapesForOp(s, *spec).empty()) {
      std::string dims;
      for (const auto& d : spec->dims) dims += (dims.empty() ? "" : ",") + d;
      std::string why;
      if (!s.shapes.empty()) why = ": shape " + s.shapes[0].Canonical() + " " + ShapeMismatch(s.shapes[0], *spec);
      return Status::InvalidArgument(where + ": no shape gives the dims of op '" + s.ops[i] + "' (" + dims + ")" + why);
    }
    specs.push_back(*spec);
  }
  for (const auto& shape : s.shapes) {
    SweepSubmit one;
    one.shapes = {shape};
    bool used = false;
    for (const auto& spec : specs) used = used || !ShapesForOp(one, spec).empty();
    if (!used) return Status::InvalidArgument(where + ": shape " + shape.Canonical() + " fits none of the ops");
  }
  return Status::OK();
}

// One table of a sweep file's config list, its values as they are written:
// integers, booleans or categorical strings (CheckListedSweep checks them
// against the op).
Result<Config> ListedConfigOf(const toml::node& n, const std::string& field) {
  const toml::table* t = n.as_table();
  if (!t || t->empty()) return Status::InvalidArgument(field + ": expected a table of param values, like { BM = 128 }");
  Config c;
  for (const auto& [k, v] : *t) {
    const std::string name(k.str());
    if (auto i = v.value_exact<int64_t>()) {
      c.params.emplace_back(name, ParamValue(*i));
    } else if (auto b = v.value_exact<bool>()) {
      c.params.emplace_back(name, ParamValue::Bool(*b));
    } else if (auto str = v.value_exact<std::string>()) {
      if (Status st = CheckCategoricalText(*str); !st.ok())
        return Status::InvalidArgument(field + " " + ToValidUtf8(name.substr(0, 64)) + ": " + st.message());
      c.params.emplace_back(name, ParamValue::String(*str));
    } else {
      return Status::InvalidArgument(field + " " + ToValidUtf8(name.substr(0, 64)) +
                                     ": expected an integer, a string or a boolean");
    }
  }
  return c;
}

// A config list is measured whole: by auto or a strategy that measures a
// space whole (search/strategy_table.h), never searched.
bool MeasuresListWhole(const std::string& name) {
  if (name == kAutoStrategy) return true;
#define TUNE_WHOLE(n, version, searches, factory, help) \
  if (!(searches) && name == n) return true;
  TUNE_SEARCH_STRATEGIES(TUNE_WHOLE)
#undef TUNE_WHOLE
  return false;
}

}  // namespace

Status CheckListedSweep(SweepSubmit* s, const std::string& field) {
  if (s->configs.empty() && s->retime)
    return Status::InvalidArgument(field + ": a retime measures chosen configs again: list them (configs = [...])");
  if (s->configs.empty()) return Status::OK();
  // A retime's figures must rank ahead of the key's other stored rows, which
  // may be of a later pass than its screening: its configs are confirmed.
  if (s->retime && s->confirm_top == 0) {
    s->confirm_top = uint32_t(std::min<size_t>(s->configs.size(), kMaxConfirmTop));
    if (s->confirm_seconds == 0) s->confirm_seconds = kDefaultConfirmSeconds;
  }
  if (s->ops.size() != 1 || s->op_packages.size() != 1)
    return Status::InvalidArgument(field + ": a config list names the params of one op; the sweep has " +
                                   std::to_string(s->ops.size()) + " ops");
  if (!MeasuresListWhole(s->strategy))
    return Status::InvalidArgument(field + ": a config list is measured whole; strategy '" + s->strategy.substr(0, 64) +
                                   "' does not apply");
  if (s->configs.size() > kMaxListedConfigs)
    return Status::InvalidArgument(field + ": " + std::to_string(s->configs.size()) + " configs, more than " +
                                   std::to_string(kMaxListedConfigs));
  auto shared = SharedOpSpec(s->op_packages[0], "op '" + s->ops[0] + "'");
  if (!shared.ok()) return shared.status();
  const OpSpec* spec = shared->get();
  std::vector<std::string> names;
  for (const Axis& axis : spec->axes) names.push_back(axis.name);
  std::map<std::string, size_t> seen;  // canonical text -> index
  for (size_t i = 0; i < s->configs.size(); ++i) {
    const std::string where = field + "[" + std::to_string(i) + "]";
    Config& c = s->configs[i];
    for (const auto& [name, value] : c.params) {
      (void)value;
      if (spec->FindAxis(name)) continue;
      const std::string near = NearestName(name, names);
      return Status::InvalidArgument(where + ": '" + ToValidUtf8(name.substr(0, 64)) + "' is not a param of op '" +
                                     spec->name + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    }
    Config ordered;
    for (const Axis& axis : spec->axes) {
      size_t given = 0;
      const ParamValue* v = nullptr;
      for (const auto& [name, value] : c.params) {
        if (name != axis.name) continue;
        ++given;
        v = &value;
      }
      if (given == 0) return Status::InvalidArgument(where + ": no value for param '" + axis.name + "'");
      if (given > 1) return Status::InvalidArgument(where + ": param '" + axis.name + "' given twice");
      if (std::find(axis.values.begin(), axis.values.end(), *v) == axis.values.end())
        return Status::InvalidArgument(where + ": " + axis.name + " = " + v->ToString() +
                                       " is not one of the values in [params] " + axis.name + " of op '" +
                                       spec->name + "'");
      ordered.params.emplace_back(axis.name, *v);
    }
    auto [it, fresh] = seen.emplace(ordered.Canonical(), i);
    if (!fresh)
      return Status::InvalidArgument(where + ": " + ordered.Canonical() + " is listed twice (as [" +
                                     std::to_string(it->second) + "] too)");
    c = std::move(ordered);
  }
  return Status::OK();
}

std::vector<Shape> ShapesForOp(const SweepSubmit& submit, const OpSpec& spec) {
  std::vector<Shape> out;
  for (const auto& shape : submit.shapes) {
    if (shape.dims.size() != spec.dims.size()) continue;
    Shape ordered;
    bool ok = true;
    for (const auto& d : spec.dims) {
      auto it = std::find_if(shape.dims.begin(), shape.dims.end(),
                             [&](const auto& kv) { return kv.first == d; });
      if (it == shape.dims.end()) {
        ok = false;
        break;
      }
      ordered.dims.push_back(*it);
    }
    if (ok) out.push_back(std::move(ordered));
  }
  return out;
}

Result<SweepSubmit> LoadSweepFile(const std::string& path, const std::string& ops_dir) {
  toml::table root;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status::NotFound(path + ": no such sweep file" + (ec ? " (" + ec.message() + ")" : std::string()));
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(path + ":" + std::to_string(e.source().begin.line) + ": " +
                         std::string(e.description()));
  }
  const toml::table* sweep = root["sweep"].as_table();
  if (!sweep) return Status::InvalidArgument(path + ": missing [sweep] table");
  // A misspelt key would run something else every night, silently.
  static const std::vector<std::string> kTables = {"sweep"};
  static const std::vector<std::string> kKeys = {
      "name",         "ops",        "dtypes",        "gpus",         "shapes",          "configs_per_unit",
      "confirm_top",  "profile_top", "confirm_timing", "refine_pass", "confirm_seconds", "strategy",
      "seed",         "budget",     "budget_seconds", "retry",       "priority",        "configs",
      "retime",       "timing",     "objective"};
  using Known = std::tuple<const char*, const std::vector<std::string>*, const toml::table*>;
  for (const auto& [table, keys, node] : {Known{"", &kTables, &root}, Known{"[sweep] ", &kKeys, sweep}}) {
    for (const auto& [key, value] : *node) {
      const std::string k(key.str());
      if (std::find(keys->begin(), keys->end(), k) != keys->end()) continue;
      const std::string near = NearestName(k, *keys);
      return Status::InvalidArgument(path + ":" + std::to_string(key.source().begin.line) + ": " + table +
                                     "unknown key '" + ToValidUtf8(k.substr(0, 64)) + "'" +
                                     (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    }
  }
  SweepSubmit s;
  auto strings = [&](const char* field, std::vector<std::string>* out, bool required) -> Status {
    const toml::node* n = sweep->get(field);
    if (!n) return required ? Status::InvalidArgument(path + ": [sweep] " + field + ": missing") : Status::OK();
    const toml::array* arr = n->as_array();
    if (!arr || arr->empty()) return Status::InvalidArgument(path + ": [sweep] " + field + ": expected a non-empty array of strings");
    for (const auto& e : *arr) {
      auto v = e.value<std::string>();
      if (!v) return Status::InvalidArgument(path + ": [sweep] " + field + ": expected strings");
      out->push_back(*v);
    }
    return Status::OK();
  };
  s.name = sweep->get("name") && sweep->get("name")->value<std::string>()
               ? *sweep->get("name")->value<std::string>()
               : path;
  std::vector<std::string> ops;
  TUNE_RETURN_IF_ERROR(strings("ops", &ops, true));
  TUNE_RETURN_IF_ERROR(strings("dtypes", &s.dtypes, true));
  TUNE_RETURN_IF_ERROR(strings("gpus", &s.gpu_models, false));
  if (s.gpu_models.empty()) s.gpu_models = {"*"};
  s.confirm_timing = kDefaultConfirmTiming;
  s.refine_pass = true;
  if (auto n = sweep->get("configs_per_unit")) {
    auto v = n->value<int64_t>();
    if (!v || *v <= 0) return Status::InvalidArgument(path + ": [sweep] configs_per_unit: expected a positive integer");
    s.configs_per_unit = static_cast<uint32_t>(*v);
  }
  if (auto n = sweep->get("confirm_top")) {
    auto v = n->value<int64_t>();
    if (!v || *v < 0 || *v > kMaxConfirmTop) {
      return Status::InvalidArgument(path + ": [sweep] confirm_top: expected an integer in 0.." + std::to_string(kMaxConfirmTop));
    }
    s.confirm_top = static_cast<uint32_t>(*v);
    if (s.confirm_seconds == 0) s.confirm_seconds = kDefaultConfirmSeconds;
  }
  if (auto n = sweep->get("profile_top")) {
    auto v = n->value<int64_t>();
    if (!v || *v < 0 || *v > kMaxConfirmTop) {
      return Status::InvalidArgument(path + ": [sweep] profile_top: expected an integer in 0.." + std::to_string(kMaxConfirmTop));
    }
    s.profile_top = static_cast<uint32_t>(*v);
    // The profiles come from the confirm units: at least as many contenders.
    s.confirm_top = std::max(s.confirm_top, s.profile_top);
    if (s.confirm_top > 0 && s.confirm_seconds == 0) s.confirm_seconds = kDefaultConfirmSeconds;
  }
  if (auto n = sweep->get("confirm_timing")) {
    auto v = n->value<std::string>();
    if (!v || !ParseConfirmTiming(*v, &s.confirm_timing)) {
      return Status::InvalidArgument(path + ": [sweep] confirm_timing: expected \"auto\", \"burst\" or \"sustained\"");
    }
  }
  if (auto n = sweep->get("refine_pass")) {
    auto v = n->value<bool>();
    if (!v) return Status::InvalidArgument(path + ": [sweep] refine_pass: expected true or false");
    s.refine_pass = *v;
  }
  if (auto n = sweep->get("confirm_seconds")) {
    auto v = n->value<double>();
    if (!v || !(*v > 0 && *v <= 3600)) {
      return Status::InvalidArgument(path + ": [sweep] confirm_seconds: expected a number of seconds in (0, 3600]");
    }
    s.confirm_seconds = *v;
  }
  s.strategy = kDefaultStrategy;
  if (auto n = sweep->get("strategy")) {
    auto v = n->value<std::string>();
    if (!v) return Status::InvalidArgument(path + ": [sweep] strategy: expected a string");
    s.strategy = *v;
  }
  if (auto n = sweep->get("seed")) {
    auto v = n->value<int64_t>();
    if (!v || *v < 0) return Status::InvalidArgument(path + ": [sweep] seed: expected a non-negative integer");
    s.seed = static_cast<uint64_t>(*v);
  }
  if (auto n = sweep->get("budget")) {
    auto v = n->value<int64_t>();
    if (!v || *v <= 0 || static_cast<uint64_t>(*v) > kMaxSearchBudget)
      return Status::InvalidArgument(path + ": [sweep] budget: expected evaluations per key in 1.." +
                           std::to_string(kMaxSearchBudget));
    s.budget = static_cast<uint64_t>(*v);
  }
  if (auto n = sweep->get("budget_seconds")) {
    auto v = n->value<double>();
    if (!v || !(*v > 0 && *v <= kMaxBudgetSeconds))
      return Status::InvalidArgument(path + ": [sweep] budget_seconds: expected seconds per key in (0, 604800]");
    s.budget_seconds = *v;
  }
  if (auto n = sweep->get("retry")) {
    const toml::array* a = n->as_array();
    if (!a) return Status::InvalidArgument(path + ": [sweep] retry: expected a list of failure classes, like [\"timeout\"]");
    for (const auto& e : *a) {
      auto v = e.value<std::string>();
      if (!v) return Status::InvalidArgument(path + ": [sweep] retry: expected a list of failure classes, like [\"timeout\"]");
      s.retry.push_back(*v);
    }
  }
  if (auto n = sweep->get("priority")) {
    auto v = n->value<int64_t>();
    const std::string field = path + ": [sweep] priority";
    if (!v) {
      return Status::InvalidArgument(field + ": expected an integer in " + std::to_string(kMinSweepPriority) + ".." +
                                     std::to_string(kMaxSweepPriority));
    }
    TUNE_RETURN_IF_ERROR(CheckSweepPriority(*v, field));
    s.priority = static_cast<uint32_t>(*v);
  }
  if (auto n = sweep->get("objective")) {
    auto v = n->value<std::string>();
    if (!v) return Status::InvalidArgument(path + ": [sweep] objective: expected \"time\", \"energy\" or \"edp\"");
    s.objective = *v;
  }
  TUNE_RETURN_IF_ERROR(CheckSearchFields(s, path + ": [sweep] "));
  if (auto n = sweep->get("retime")) {
    auto v = n->value<bool>();
    if (!v) return Status::InvalidArgument(path + ": [sweep] retime: expected true or false");
    s.retime = *v;
  }
  if (auto n = sweep->get("configs")) {
    const std::string field = path + ": [sweep] configs";
    const toml::array* a = n->as_array();
    if (!a || a->empty()) return Status::InvalidArgument(field + ": expected a non-empty array of tables, like [ { BM = 128 } ]");
    if (a->size() > kMaxListedConfigs)
      return Status::InvalidArgument(field + ": " + std::to_string(a->size()) + " configs, more than " +
                                     std::to_string(kMaxListedConfigs));
    for (size_t i = 0; i < a->size(); ++i) {
      auto c = ListedConfigOf((*a)[i], field + "[" + std::to_string(i) + "]");
      if (!c.ok()) return c.status();
      s.configs.push_back(std::move(c).value());
    }
  }
  const toml::array* shapes = sweep->get("shapes") ? sweep->get("shapes")->as_array() : nullptr;
  if (!shapes || shapes->empty()) return Status::InvalidArgument(path + ": [sweep] shapes: expected a non-empty array of tables");
  for (size_t i = 0; i < shapes->size(); ++i) {
    const toml::table* t = (*shapes)[i].as_table();
    const std::string where = path + ": [sweep] shapes[" + std::to_string(i) + "]";
    if (!t || t->empty()) return Status::InvalidArgument(where + ": expected a table of dims, like { M = 1024 }");
    Shape shape;
    for (const auto& [k, v] : *t) {
      auto n = v.value<int64_t>();
      if (!n || *n <= 0) return Status::InvalidArgument(where + " " + std::string(k.str()) + ": expected a positive integer");
      shape.dims.emplace_back(std::string(k.str()), *n);
    }
    s.shapes.push_back(std::move(shape));
  }
  TUNE_RETURN_IF_ERROR(AddOps(&s, ops, ops_dir, path));
  if (auto n = sweep->get("timing")) {
    auto v = n->value<std::string>();
    if (!v) return Status::InvalidArgument(path + ": [sweep] timing: expected \"cold\" or \"hot\"");
    TUNE_RETURN_IF_ERROR(ApplySweepTiming(&s, *v, path + ": [sweep] timing"));
  }
  TUNE_RETURN_IF_ERROR(CheckShapes(s, path));
  TUNE_RETURN_IF_ERROR(CheckListedSweep(&s, path + ": [sweep] configs"));
  return s;
}

Result<SweepSubmit> MakeSweep(const std::string& name, const std::vector<std::string>& ops,
                              const std::vector<std::string>& dtypes,
                              const std::vector<std::string>& shapes,
                              const std::vector<std::string>& gpus, const std::string& ops_dir) {
  SweepSubmit s;
  s.name = name;
  s.strategy = kDefaultStrategy;
  s.confirm_timing = kDefaultConfirmTiming;
  s.refine_pass = true;
  s.dtypes = dtypes;
  s.gpu_models = gpus.empty() ? std::vector<std::string>{"*"} : gpus;
  for (const auto& text : shapes) {
    Shape shape;
    if (!ParseNamedValues(text, &shape.dims) || shape.dims.empty()) {
      return Status::InvalidArgument("--shape '" + text + "': expected NAME=VALUE,... like M=4096,N=4096,K=4096");
    }
    s.shapes.push_back(std::move(shape));
  }
  if (s.dtypes.empty()) return Status::InvalidArgument("no dtype given");
  if (s.shapes.empty()) return Status::InvalidArgument("no shape given");
  TUNE_RETURN_IF_ERROR(AddOps(&s, ops, ops_dir, "sweep '" + name + "'"));
  TUNE_RETURN_IF_ERROR(CheckShapes(s, "sweep '" + name + "'"));
  return s;
}

Status ApplySweepTiming(SweepSubmit* s, const std::string& timing, const std::string& field) {
  if (timing.empty()) return Status::OK();
  L2Timing t;
  if (!ParseL2Timing(timing, &t))
    return Status::InvalidArgument(field + ": '" + ToValidUtf8(timing.substr(0, 64)) +
                                   "' is not cold or hot (how each sample meets the L2 cache)");
  for (size_t i = 0; i < s->op_packages.size(); ++i) {
    auto package = WithTiming(std::move(s->op_packages[i]), t);
    if (!package.ok()) return package.status().WithPrefix(field + ": op '" + s->ops[i] + "': ");
    s->op_packages[i] = std::move(package).value();
  }
  return Status::OK();
}

const std::vector<std::string>& StrategyNames() {
  static const std::vector<std::string> names = {
#define TUNE_NAME(name, version, searches, factory, help) name,
      TUNE_SEARCH_STRATEGIES(TUNE_NAME)
#undef TUNE_NAME
      kAutoStrategy};
  return names;
}

Status CheckStrategyName(const std::string& name, const std::string& field) {
  for (const std::string& n : StrategyNames())
    if (n == name) return Status::OK();
  std::string known;
  for (const std::string& n : StrategyNames()) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument(field + ": unknown strategy '" + name.substr(0, 64) + "' (known: " + known + ")");
}

Status CheckRetryClasses(const std::vector<std::string>& retry, const std::string& field) {
  // Each class once: the list is read for every batch of results, so its
  // length is bounded by the classes there are.
  std::set<FailureClass> seen;
  for (const std::string& name : retry) {
    const FailureClass c = FailureClassFromName(name);
    if (c == FailureClass::kNone || c == FailureClass::kSkipped)
      return Status::InvalidArgument(field + ": '" + name.substr(0, 64) +
                                     "' is not a failure class (compile_error, resources, "
                                     "launch_error, crash, timeout, wrong_result, nan)");
    if (!seen.insert(c).second) return Status::InvalidArgument(field + ": '" + name + "' listed twice");
  }
  return Status::OK();
}

Status CheckSweepPriority(int64_t priority, const std::string& field) {
  if (priority >= int64_t{kMinSweepPriority} && priority <= int64_t{kMaxSweepPriority}) return Status::OK();
  return Status::InvalidArgument(field + ": " + std::to_string(priority) + " is out of range: expected an integer in " +
                                 std::to_string(kMinSweepPriority) + ".." + std::to_string(kMaxSweepPriority) +
                                 " (higher is leased first)");
}

Status CheckSearchFields(const SweepSubmit& s, const std::string& where) {
  TUNE_RETURN_IF_ERROR(CheckStrategyName(s.strategy, where + "strategy"));
  TUNE_RETURN_IF_ERROR(CheckRetryClasses(s.retry, where + "retry"));
  if (s.budget > kMaxSearchBudget)
    return Status::InvalidArgument(where + "budget: " + std::to_string(s.budget) + " evaluations per key, more than " +
                                   std::to_string(kMaxSearchBudget));
  if (!(s.budget_seconds >= 0 && s.budget_seconds <= kMaxBudgetSeconds))
    return Status::InvalidArgument(where + "budget_seconds: expected seconds per key in [0, 604800]");
  Objective objective;
  if (!ParseObjective(s.objective, &objective))
    return Status::InvalidArgument(where + "objective: '" + ToValidUtf8(s.objective) + "': expected time, energy or edp");
  return Status::OK();
}

}  // namespace tune
