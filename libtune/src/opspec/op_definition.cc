// Op packages and op.toml (opspec/op_definition.h). Long on purpose: one parser of
// op.toml whose sections check one another (params against rules, args
// against dims, launch against both), so every message names its field the
// same way.
#include "opspec/op_definition.h"

#include "op_confine.h"


#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <toml++/toml.h>
#include <unordered_set>

#include "opspec/expr.h"
#include "base/limits.h"
#include "base/text.h"
#include "base/target.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSpecFile = "op.toml";
constexpr const char* kDeviceVars[] = {"smem_optin", "max_threads", "num_sms", "sm", "l2_bytes"};
constexpr const char* kScalarTypes[] = {"i32", "i64", "f32"};

// Names a param or dim may not take: the device limits and dsize, and the
// functions and constants muparser knows (a variable would shadow them).
bool IsReservedName(const std::string& n) {
  static const std::set<std::string> kReserved = {
      "smem_optin", "max_threads", "num_sms", "sm",    "l2_bytes", "dsize", "cdiv",  "min",
      "max",        "floor",       "ceil",    "log2",  "abs",      "sin",   "cos",   "tan",
      "asin",       "acos",        "atan",    "sinh",  "cosh",     "tanh",  "asinh", "acosh",
      "atanh",      "log",         "log10",   "ln",    "exp",      "sqrt",  "sign",  "rint",
      "sum",        "avg",         "_pi",     "_e",       "true",  "false"};
  return kReserved.count(n) != 0;
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_')) return false;
  return true;
}

template <size_t N>
bool OneOf(const std::string& s, const char* const (&list)[N]) {
  for (const char* item : list)
    if (s == item) return true;
  return false;
}

template <size_t N>
std::string ListOf(const char* const (&list)[N]) {
  std::string out;
  for (const char* item : list) out += (out.empty() ? "" : " | ") + std::string(item);
  return out;
}

// The dtypes of kDTypeTable whose `flag` is set, as "a | b | c".
std::string DTypesWhere(bool DTypeInfo::*flag) {
  std::string out;
  for (const DTypeInfo& d : kDTypeTable)
    if (d.*flag) out += (out.empty() ? "" : " | ") + std::string(d.name);
  return out;
}

bool IsDType(const std::string& s, bool DTypeInfo::*flag) {
  const DTypeInfo* d = FindDType(s);
  return d && d->*flag;
}

std::string SpecFileName(const std::string& origin) {
  if (origin.empty()) return kSpecFile;
  if (origin.size() >= 5 && origin.compare(origin.size() - 5, 5, ".toml") == 0) return origin;
  return origin.back() == '/' ? origin + kSpecFile : origin + "/" + kSpecFile;
}

std::string PosText(const toml::source_region& src) {
  return ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column);
}

Result<toml::table> ParseToml(const std::string& text, const std::string& file) {
  try {
    return toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    std::string what(e.description());
    std::replace(what.begin(), what.end(), '\n', ' ');
    return Status::InvalidArgument(file + PosText(e.source()) + ": " + what);
  }
}

// --- op.toml parsing ---

class SpecParser {
 public:
  SpecParser(const OpPackage& package, const std::string& origin)
      : package_(package), file_(SpecFileName(origin)) {}

  Result<OpSpec> Parse() {
    auto it = package_.find(kSpecFile);
    if (it == package_.end()) return Status::InvalidArgument(file_ + ": missing from the op package");
    TUNE_RETURN_IF_ERROR(CheckPackageSize());
    auto doc = ParseToml(it->second, file_);
    if (!doc.ok()) return doc.status();
    root_ = &doc.value();
    spec_.package = package_;

    TUNE_RETURN_IF_ERROR(
        OnlyKeys(*root_, "", {"op", "params", "arch_defaults", "constraints", "launch", "args", "check", "metrics",
                              "program", "baseline"}));
    TUNE_RETURN_IF_ERROR(ParseProgram());
    TUNE_RETURN_IF_ERROR(ParseOp());
    TUNE_RETURN_IF_ERROR(ParseParams());
    TUNE_RETURN_IF_ERROR(ParseDefault());
    TUNE_RETURN_IF_ERROR(ParseArchDefaults());
    TUNE_RETURN_IF_ERROR(ParseConstraints());
    TUNE_RETURN_IF_ERROR(ParseLaunch());
    TUNE_RETURN_IF_ERROR(ParseArgs());
    TUNE_RETURN_IF_ERROR(ParseCheck());
    TUNE_RETURN_IF_ERROR(ParseMetrics());
    TUNE_RETURN_IF_ERROR(ParseBaseline());
    TUNE_RETURN_IF_ERROR(CheckConfined());
    TUNE_RETURN_IF_ERROR(CompileAll());
    return std::move(spec_);
  }

  OpSpec& spec() { return spec_; }

 private:
  // Before anything reads the package: what the coordinator receives was
  // never bounded by `submit`'s reading of a folder.
  Status CheckPackageSize() const {
    if (package_.size() > kMaxPackageFiles)
      return Status::InvalidArgument(file_ + ": the op package has " + std::to_string(package_.size()) +
                           " files, more than the limit of " + std::to_string(kMaxPackageFiles) + " files per package");
    size_t bytes = 0;
    for (const auto& [name, contents] : package_) bytes += name.size() + contents.size();
    if (bytes > kMaxPackageBytes)
      return Status::InvalidArgument(file_ + ": the op package holds " + std::to_string(bytes) +
                           " bytes, more than the limit of " + std::to_string(kMaxPackageBytes) + " bytes per package");
    return Status::OK();
  }

  // op_confine.h: names, options and includes that keep NVRTC inside the
  // package and the toolkit.
  Status CheckConfined() const {
    for (const auto& [name, contents] : package_) {
      Status st = CheckPackageFileName(name);
      if (!st.ok()) return Status::InvalidArgument(file_ + ": " + st.message());
    }
    for (const std::string& o : spec_.compile_options) {
      Status st = CheckCompileOption(o);
      if (!st.ok()) return Err("[op] options", st.message());
    }
    auto get = [this](const std::string& name) -> const std::string* {
      auto it = package_.find(name);
      return it == package_.end() ? nullptr : &it->second;
    };
    auto resolves = [&](const std::string& includer, const std::string& target) {
      for (const std::string& cand : IncludeCandidates(includer, target, false, spec_.include_dirs))
        if (get(cand)) return true;
      return false;
    };
    for (const std::string& name :
         IncludeClosure({spec_.source_file, spec_.check.reference_file}, get, spec_.include_dirs)) {
      const std::string* text = get(name);
      if (!text) continue;
      Status st = CheckIncludes(name, *text, resolves);
      if (!st.ok()) return Status::InvalidArgument(file_ + ": " + st.message());
    }
    return Status::OK();
  }

  Status Err(const std::string& field, const std::string& msg) const {
    return Status::InvalidArgument(file_ + ": " + field + ": " + msg);
  }

  Status OnlyKeys(const toml::table& t, const std::string& where,
                  std::initializer_list<const char*> allowed) const {
    for (auto&& [k, v] : t) {
      (void)v;
      const std::string key(k.str());
      bool ok = false;
      for (const char* a : allowed) ok = ok || key == a;
      if (ok) continue;
      if (where.empty()) return Status::InvalidArgument(file_ + ": [" + key + "]: unknown table");
      return Err(where + " " + key, "unknown field");
    }
    return Status::OK();
  }

  const toml::table* Table(const char* name, bool required, Status* st) const {
    const toml::node* n = root_->get(name);
    if (!n) {
      if (required) *st = Status::InvalidArgument(file_ + ": [" + std::string(name) + "]: missing table");
      return nullptr;
    }
    if (!n->is_table()) {
      *st = Status::InvalidArgument(file_ + ": [" + std::string(name) + "]: expected a table");
      return nullptr;
    }
    return n->as_table();
  }

  Status String(const toml::table& t, const std::string& where, const char* key, bool required,
                std::string* out) const {
    const toml::node* n = t.get(key);
    if (!n) return required ? Err(where + " " + key, "missing") : Status::OK();
    if (!n->is_string() || n->as_string()->get().empty())
      return Err(where + " " + key, "expected a non-empty string");
    *out = n->as_string()->get();
    return Status::OK();
  }

  // An expression is a string; a bare integer is accepted as its text.
  // An expression's text, with what it says of string and boolean params
  // lowered into numbers (LowerCategorical): what follows compiles numbers.
  Status ExprText(const toml::node& n, const std::string& field, std::string* out) {
    if (n.is_string() && !n.as_string()->get().empty()) {
      StringAxes categorical;
      for (const Axis& a : spec_.axes) {
        if (a.kind() != ParamValue::Kind::kString) continue;
        auto& values = categorical[a.name];
        for (const ParamValue& v : a.values) values.push_back(v.text());
      }
      auto lowered = LowerCategorical(n.as_string()->get(), categorical, file_ + ": " + field);
      if (!lowered.ok()) return lowered.status();
      if (*lowered != n.as_string()->get()) spec_.written.emplace(*lowered, n.as_string()->get());
      *out = std::move(lowered).value();
      return Status::OK();
    }
    if (n.is_integer()) {
      *out = std::to_string(n.as_integer()->get());
      return Status::OK();
    }
    return Err(field, "expected an expression (a non-empty string)");
  }

  Status ExprList(const toml::table& t, const std::string& where, const char* key, size_t exact,
                  bool required, std::vector<std::string>* out) {
    const std::string field = where + " " + key;
    const toml::node* n = t.get(key);
    if (!n) return required ? Err(field, "missing") : Status::OK();
    const toml::array* a = n->as_array();
    const std::string want = exact ? "expected " + std::to_string(exact) + " expressions"
                                   : "expected a non-empty array of expressions";
    if (!a || (exact && a->size() != exact) || (!exact && a->empty())) return Err(field, want);
    out->clear();
    for (size_t i = 0; i < a->size(); ++i) {
      std::string text;
      TUNE_RETURN_IF_ERROR(ExprText(*a->get(i), field + "[" + std::to_string(i) + "]", &text));
      out->push_back(std::move(text));
    }
    return Status::OK();
  }

  Status Names(const toml::table& t, const std::string& where, const char* key, bool required,
               bool allow_empty, std::vector<std::string>* out, bool unique = true) const {
    const std::string field = where + " " + key;
    const toml::node* n = t.get(key);
    if (!n) return required ? Err(field, "missing") : Status::OK();
    const toml::array* a = n->as_array();
    const char* want = allow_empty ? "expected an array of strings" : "expected a non-empty array of strings";
    if (!a || (!allow_empty && a->empty())) return Err(field, want);
    std::unordered_set<std::string> seen(out->begin(), out->end());
    for (const toml::node& item : *a) {
      if (!item.is_string() || item.as_string()->get().empty()) return Err(field, want);
      const std::string s = item.as_string()->get();
      if (unique && !seen.insert(s).second) return Err(field, "'" + s + "' appears twice");
      out->push_back(s);
    }
    return Status::OK();
  }

  Status Number(const toml::table& t, const std::string& where, const char* key, double* out) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::OK();
    if (n->is_integer()) {
      *out = static_cast<double>(n->as_integer()->get());
    } else if (n->is_floating_point()) {
      *out = n->as_floating_point()->get();
    } else {
      return Err(where + " " + key, "expected a number");
    }
    if (!(*out >= 0)) return Err(where + " " + key, "expected a number >= 0");
    return Status::OK();
  }

  Status CheckVarName(const std::string& field, const std::string& name) const {
    if (!IsIdentifier(name))
      return Err(field, "'" + name + "' is not a valid name (letters, digits, '_')");
    if (IsReservedName(name)) return Err(field, "'" + name + "' is a reserved name");
    return Status::OK();
  }

  Status NeedFile(const std::string& field, const std::string& name) const {
    if (package_.count(name) == 0) return Err(field, "file '" + name + "' is not in the op folder");
    return Status::OK();
  }

  Status ParseOp() {
    Status st;
    const toml::table* op = Table("op", true, &st);
    if (!op) return st;
    TUNE_RETURN_IF_ERROR(OnlyKeys(*op, "[op]", {"name", "source", "kernel", "dims", "dtypes", "default",
                                                "arch_specific", "options", "buckets", "include",
                                                "include_roots", "timing"}));
    TUNE_RETURN_IF_ERROR(String(*op, "[op]", "name", true, &spec_.name));
    if (spec_.program) {
      for (const char* k : {"source", "kernel", "arch_specific", "options", "include", "include_roots"})
        if (op->get(k)) return Err(std::string("[op] ") + k, "does not apply to a program op (its [program] builds it)");
    } else {
      TUNE_RETURN_IF_ERROR(String(*op, "[op]", "source", true, &spec_.source_file));
      TUNE_RETURN_IF_ERROR(NeedFile("[op] source", spec_.source_file));
      TUNE_RETURN_IF_ERROR(String(*op, "[op]", "kernel", true, &spec_.kernel));
      if (!IsIdentifier(spec_.kernel)) return Err("[op] kernel", "'" + spec_.kernel + "' is not a C identifier");
    }
    TUNE_RETURN_IF_ERROR(Names(*op, "[op]", "dims", true, true, &spec_.dims));
    if (spec_.dims.size() > kMaxOpDims)
      return Err("[op] dims", std::to_string(spec_.dims.size()) + " dims, more than the limit of " +
                                  std::to_string(kMaxOpDims) + " dims per op");
    for (const std::string& d : spec_.dims) TUNE_RETURN_IF_ERROR(CheckVarName("[op] dims", d));
    TUNE_RETURN_IF_ERROR(Names(*op, "[op]", "dtypes", true, false, &spec_.dtypes));
    for (const std::string& d : spec_.dtypes)
      if (!IsDType(d, &DTypeInfo::op))
        return Err("[op] dtypes", "unknown dtype '" + d + "' (expected " + DTypesWhere(&DTypeInfo::op) + ")");
    if (const toml::node* n = op->get("arch_specific")) {
      if (!n->is_boolean()) return Err("[op] arch_specific", "expected true or false");
      spec_.arch_specific = n->as_boolean()->get();
    }
    if (op->get("options")) {
      TUNE_RETURN_IF_ERROR(Names(*op, "[op]", "options", false, true, &spec_.compile_options, false));
    }
    if (op->get("timing")) {
      std::string timing;
      TUNE_RETURN_IF_ERROR(String(*op, "[op]", "timing", true, &timing));
      if (!ParseL2Timing(timing, &spec_.timing))
        return Err("[op] timing", "'" + timing + "' is not cold or hot (how each sample meets the L2 cache)");
    }
    TUNE_RETURN_IF_ERROR(ParseIncludes(*op));
    TUNE_RETURN_IF_ERROR(ParseBuckets(*op));
    op_ = op;
    return Status::OK();
  }

  // include = ["include"]: folders of the package; include_roots =
  // ["cutlass"]: names each compiling host maps to a folder of its own.
  Status ParseIncludes(const toml::table& op) {
    TUNE_RETURN_IF_ERROR(Names(op, "[op]", "include", false, false, &spec_.include_dirs));
    for (std::string& dir : spec_.include_dirs) {
      const auto rel = InFolder(fs::path(dir));
      if (!rel || *rel == ".") return Err("[op] include", "'" + dir + "' is not a folder inside the op folder");
      dir = *rel;
      const auto first = package_.lower_bound(dir + "/");
      if (first == package_.end() || first->first.rfind(dir + "/", 0) != 0)
        return Err("[op] include", "folder '" + dir + "' holds no file of the op package");
    }
    TUNE_RETURN_IF_ERROR(Names(op, "[op]", "include_roots", false, false, &spec_.include_roots));
    for (const std::string& name : spec_.include_roots)
      if (!IsIncludeRootName(name))
        return Err("[op] include_roots", "'" + name + "' is not a root name (letters, digits, '_', '.', '-')");
    return Status::OK();
  }

  // buckets = { M = "pow2", N = "exact", K = [1024, 4096] }
  Status ParseBuckets(const toml::table& op) {
    const toml::node* n = op.get("buckets");
    if (!n) return Status::OK();
    const toml::table* t = n->as_table();
    if (!t) return Err("[op] buckets", "expected a table of dim = \"exact\" | \"pow2\" | [values]");
    for (auto&& [k, v] : *t) {
      const std::string dim(k.str());
      const std::string field = "[op] buckets " + dim;
      if (std::find(spec_.dims.begin(), spec_.dims.end(), dim) == spec_.dims.end())
        return Err(field, "'" + dim + "' is not a dim");
      DimBucket b;
      if (v.is_string() && v.as_string()->get() == "pow2") {
        b.kind = DimBucket::Kind::kPow2;
      } else if (v.is_string() && v.as_string()->get() == "exact") {
        b.kind = DimBucket::Kind::kExact;
      } else if (const toml::array* a = v.as_array()) {
        b.kind = DimBucket::Kind::kList;
        for (const toml::node& item : *a) {
          if (!item.is_integer()) return Err(field, "expected a list of integers");
          b.values.push_back(item.as_integer()->get());
        }
        if (Status st = b.Check(); !st.ok()) return Err(field, st.message());
      } else {
        return Err(field, "expected \"exact\", \"pow2\" or a list of values");
      }
      if (b.kind != DimBucket::Kind::kExact) spec_.buckets.emplace(dim, std::move(b));
    }
    return Status::OK();
  }

  Status ParseParams() {
    Status st;
    const toml::table* params = Table("params", false, &st);
    if (!st.ok()) return st;
    if (!params) return Status::OK();
    if (params->size() > kMaxOpParams)
      return Err("[params]", std::to_string(params->size()) + " params, more than the limit of " +
                                 std::to_string(kMaxOpParams) + " params per op");
    // toml++ keeps keys sorted; the spec's axis order is the order written.
    std::vector<std::pair<toml::source_position, std::string>> order;
    for (auto&& [k, v] : *params) {
      (void)v;
      order.emplace_back(k.source().begin, std::string(k.str()));
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.first.line != b.first.line ? a.first.line < b.first.line : a.first.column < b.first.column;
    });
    for (const auto& [pos, name] : order) {
      (void)pos;
      const std::string field = "[params] " + name;
      const toml::array* a = params->get(name)->as_array();
      std::string want = "expected a non-empty array of integers, strings or booleans";
      if (name == "constraints") want += " (constraints belong in [constraints] rules)";
      if (!a || a->empty() || (name == "constraints" && a->get(0)->is_string())) return Err(field, want);
      if (a->size() > kMaxAxisValues)
        return Err(field, std::to_string(a->size()) + " values, more than the limit of " +
                              std::to_string(kMaxAxisValues) + " values per axis");
      TUNE_RETURN_IF_ERROR(CheckVarName(field, name));
      if (std::find(spec_.dims.begin(), spec_.dims.end(), name) != spec_.dims.end())
        return Err(field, "'" + name + "' is also a dim");
      Axis axis{name, {}};
      axis.values.reserve(a->size());
      for (const toml::node& item : *a) {
        auto v = AxisValue(item, field);
        if (!v.ok()) return v.status();
        if (!axis.values.empty() && v->kind() != axis.kind())
          return Err(field, "mixes kinds of values (an axis holds integers, strings or booleans)");
        if (std::find(axis.values.begin(), axis.values.end(), *v) != axis.values.end())
          return Err(field, "value " + v->ToString() + " appears twice");
        axis.values.push_back(std::move(v).value());
      }
      spec_.axes.push_back(std::move(axis));
    }
    // A string value's macros (ParamMacros: NAME=value, NAME_value) must
    // not meet another param, a dim or another value's macro: NAME=BM would
    // expand to BM's value.
    std::set<std::string> macros;
    for (const Axis& a : spec_.axes) macros.insert(a.name);
    const auto named = [&](const std::string& n) {
      return macros.count(n) || std::find(spec_.dims.begin(), spec_.dims.end(), n) != spec_.dims.end();
    };
    for (const Axis& a : spec_.axes) {
      if (a.kind() != ParamValue::Kind::kString) continue;
      for (const ParamValue& v : a.values) {
        if (named(v.text()))
          return Err("[params] " + a.name, "value " + v.text() + " is also the name of a param or dim");
        const std::string macro = a.name + "_" + v.text();
        if (named(macro))
          return Err("[params] " + a.name, "value " + v.text() + " makes the macro " + macro +
                                               ", which is also the name of a param, a dim or another value's macro");
        macros.insert(macro);
      }
    }
    return Status::OK();
  }

  // One [params] value: an integer, a boolean, or a string that can be a
  // macro token (kernels receive it as one, op_definition.h).
  Result<ParamValue> AxisValue(const toml::node& item, const std::string& field) const {
    if (item.is_integer()) return ParamValue(item.as_integer()->get());
    if (item.is_boolean()) return ParamValue::Bool(item.as_boolean()->get());
    if (item.is_string()) {
      const std::string& text = item.as_string()->get();
      if (Status st = CheckCategoricalText(text); !st.ok()) return Err(field, st.message());
      return ParamValue::String(text);
    }
    return Err(field, "expected integers, strings or booleans");
  }

  Status ParseDefault() {
    const toml::node* n = op_->get("default");
    if (!n) {
      if (spec_.axes.empty()) return Status::OK();
      return Err("[op] default", "missing");
    }
    return ConfigOf(*n, "[op] default", &spec_.default_config);
  }

  // [arch_defaults]: sm_80 = { BM = 128, ... }: the default on GPUs of that
  // architecture, where the op's default does not fit (shared memory).
  Status ParseArchDefaults() {
    Status st;
    const toml::table* t = Table("arch_defaults", false, &st);
    if (!st.ok() || !t) return st;
    for (auto&& [k, v] : *t) {
      const std::string arch(k.str());
      const std::string field = "[arch_defaults] " + arch;
      if (!IsCudaArch(arch)) return Err(field, "expected an architecture name like sm_80 or sm_90a");
      Config c;
      TUNE_RETURN_IF_ERROR(ConfigOf(v, field, &c));
      spec_.arch_defaults.emplace(arch, std::move(c));
    }
    return Status::OK();
  }

  // A table of one value per param, each among its axis's values.
  Status ConfigOf(const toml::node& n, const std::string& field, Config* out) {
    const toml::table* t = n.as_table();
    if (!t) return Err(field, "expected a table of param values, e.g. { BM = 128 }");
    for (auto&& [k, v] : *t) {
      (void)v;
      if (!spec_.FindAxis(std::string(k.str()))) return Err(field, "'" + std::string(k.str()) + "' is not a param");
    }
    for (const Axis& axis : spec_.axes) {
      const toml::node* value = t->get(axis.name);
      if (!value) return Err(field, "no value for param '" + axis.name + "'");
      auto v = AxisValue(*value, field + " " + axis.name);
      if (!v.ok()) return v.status();
      if (std::find(axis.values.begin(), axis.values.end(), *v) == axis.values.end())
        return Err(field + " " + axis.name, v->ToString() + " is not one of the values in [params] " + axis.name);
      out->params.emplace_back(axis.name, std::move(v).value());
    }
    return Status::OK();
  }

  Status ParseConstraints() {
    Status st;
    const toml::table* t = Table("constraints", false, &st);
    if (!st.ok()) return st;
    if (!t) return Status::OK();
    TUNE_RETURN_IF_ERROR(OnlyKeys(*t, "[constraints]", {"rules"}));
    if (!t->get("rules")) return Status::OK();
    const toml::array* a = t->get("rules")->as_array();
    if (!a) return Err("[constraints] rules", "expected an array of expressions");
    for (size_t i = 0; i < a->size(); ++i) {
      std::string text;
      TUNE_RETURN_IF_ERROR(ExprText(*a->get(i), "[constraints] rules[" + std::to_string(i) + "]", &text));
      spec_.constraints.push_back(std::move(text));
    }
    return Status::OK();
  }

  // A program op launches its kernel itself: the farm's launch, arguments
  // and reference do not apply, and the trivial launch stands in for them.
  Status NotForPrograms() {
    for (const char* table : {"launch", "args"})
      if (root_->get(table)) return Status::InvalidArgument(file_ + ": [" + std::string(table) + "]: does not apply to a program op");
    spec_.grid = spec_.block = spec_.check.grid = spec_.check.block = {"1", "1", "1"};
    return Status::OK();
  }

  Status ParseLaunch() {
    if (spec_.program) return NotForPrograms();
    Status st;
    const toml::table* t = Table("launch", true, &st);
    if (!t) return st;
    TUNE_RETURN_IF_ERROR(OnlyKeys(*t, "[launch]", {"grid", "block", "smem"}));
    TUNE_RETURN_IF_ERROR(ExprList(*t, "[launch]", "grid", 3, true, &spec_.grid));
    TUNE_RETURN_IF_ERROR(ExprList(*t, "[launch]", "block", 3, true, &spec_.block));
    if (const toml::node* n = t->get("smem")) TUNE_RETURN_IF_ERROR(ExprText(*n, "[launch] smem", &spec_.smem));
    return Status::OK();
  }

  Status CheckInit(const std::string& field, const std::string& init) const {
    std::string s;
    for (char c : init)
      if (!std::isspace(static_cast<unsigned char>(c))) s += c;
    if (s == "ones" || s == "zeros") return Status::OK();
    const std::string want = "expected uniform(lo,hi) | normal(mean,std) | int(lo,hi) | ones | zeros | file(name.npy)";
    if (s.rfind("file(", 0) == 0 && s.back() == ')') {
      const std::string name = s.substr(5, s.size() - 6);
      if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0)
        return Err(field, "file(" + name + "): expected a .npy file of the op folder");
      return NeedFile(field, name);
    }
    if (s.rfind("int(", 0) == 0 && s.back() == ')') {
      const std::string body = s.substr(4, s.size() - 5);
      const size_t comma = body.find(',');
      char* end = nullptr;
      const std::string a_text = body.substr(0, comma), b_text = comma == std::string::npos ? "" : body.substr(comma + 1);
      const long long a = std::strtoll(a_text.c_str(), &end, 10);
      const bool a_ok = !a_text.empty() && !*end;
      const long long b = std::strtoll(b_text.c_str(), &end, 10);
      if (!a_ok || b_text.empty() || *end) return Err(field, "int(lo,hi) takes two integers");
      if (!(a <= b)) return Err(field, "int(lo,hi) needs lo <= hi");
      if (std::llabs(a) > (1ll << 24) || std::llabs(b) > (1ll << 24))
        return Err(field, "int(lo,hi): bounds beyond 2^24 are not exact in f32");
      return Status::OK();
    }
    for (const char* fn : {"uniform", "normal"}) {
      const std::string prefix = std::string(fn) + "(";
      if (s.compare(0, prefix.size(), prefix) != 0 || s.back() != ')') continue;
      const std::string body = s.substr(prefix.size(), s.size() - prefix.size() - 1);
      const size_t comma = body.find(',');
      if (comma == std::string::npos) return Err(field, want);
      char* end = nullptr;
      const std::string a_text = body.substr(0, comma), b_text = body.substr(comma + 1);
      const double a = std::strtod(a_text.c_str(), &end);
      if (a_text.empty() || *end) return Err(field, want);
      const double b = std::strtod(b_text.c_str(), &end);
      if (b_text.empty() || *end) return Err(field, want);
      if (prefix == "uniform(" && !(a < b)) return Err(field, "uniform(lo,hi) needs lo < hi");
      if (prefix == "normal(" && !(b > 0)) return Err(field, "normal(mean,std) needs std > 0");
      return Status::OK();
    }
    return Err(field, want);
  }

  // int(lo,hi) draws integers every dtype the buffer may take holds exactly:
  // f16 up to 2048, bf16 up to 256.
  Status CheckIntBounds(const std::string& field, const ArgSpec& arg) const {
    long long lo = 0, hi = 0;
    if (std::sscanf(arg.init.c_str(), " int ( %lld , %lld )", &lo, &hi) != 2) return Status::OK();
    const std::vector<std::string> dtypes = arg.dtype == "$dtype" ? spec_.dtypes : std::vector<std::string>{arg.dtype};
    for (const std::string& d : dtypes) {
      const DTypeInfo* info = FindDType(d);
      const long long exact = info ? info->exact_integers : 0;
      if (std::llabs(lo) > exact || std::llabs(hi) > exact)
        return Err(field, "int(" + std::to_string(lo) + "," + std::to_string(hi) + ") is not exact in " + d +
                              " (integers up to " + std::to_string(exact) + " are)");
    }
    return Status::OK();
  }

  Status ParseArgs() {
    if (spec_.program) return Status::OK();
    const toml::node* n = root_->get("args");
    if (!n) return Status::InvalidArgument(file_ + ": [[args]]: missing (one [[args]] table per kernel parameter)");
    const toml::array* a = n->as_array();
    if (!a || a->empty() || !a->is_array_of_tables())
      return Status::InvalidArgument(file_ + ": [[args]]: expected one [[args]] table per kernel parameter");
    std::unordered_set<std::string> arg_names;
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& t = *a->get(i)->as_table();
      ArgSpec arg;
      const std::string at = "[[args]] #" + std::to_string(i + 1);
      TUNE_RETURN_IF_ERROR(String(t, at, "name", true, &arg.name));
      const std::string where = "[[args]] " + arg.name;
      TUNE_RETURN_IF_ERROR(CheckVarName(where + " name", arg.name));
      if (!arg_names.insert(arg.name).second) return Err(where + " name", "'" + arg.name + "' appears twice");
      if (t.get("tensor_map")) {
        arg.kind = ArgSpec::Kind::kTensorMap;
        TUNE_RETURN_IF_ERROR(OnlyKeys(t, where, {"name", "tensor_map", "box", "swizzle"}));
        TUNE_RETURN_IF_ERROR(String(t, where, "tensor_map", true, &arg.map_of));
        const auto of = std::find_if(spec_.args.begin(), spec_.args.end(),
                                     [&](const ArgSpec& b) { return b.name == arg.map_of; });
        if (of == spec_.args.end() || of->kind != ArgSpec::Kind::kBuffer)
          return Err(where + " tensor_map", "'" + arg.map_of + "' is not a buffer declared before it in [[args]]");
        TUNE_RETURN_IF_ERROR(ExprList(t, where, "box", 0, true, &arg.box));
        if (arg.box.size() != of->shape.size() || arg.box.size() > 5)
          return Err(where + " box", "needs one expression per dim of " + arg.map_of + "'s shape (" +
                                         std::to_string(of->shape.size()) + "; at most 5)");
        if (const toml::node* sw = t.get("swizzle")) {
          const auto* v = sw->as_integer();
          if (!v || (v->get() != 0 && v->get() != 32 && v->get() != 64 && v->get() != 128))
            return Err(where + " swizzle", "expected 0, 32, 64 or 128 (bytes)");
          arg.swizzle = int(v->get());
        }
      } else if (t.get("scalar")) {
        arg.kind = ArgSpec::Kind::kScalar;
        for (const char* k : {"dir", "dtype", "shape", "init"})
          if (t.get(k)) return Err(where + " " + k, "does not apply to a scalar");
        TUNE_RETURN_IF_ERROR(OnlyKeys(t, where, {"name", "scalar", "value"}));
        TUNE_RETURN_IF_ERROR(String(t, where, "scalar", true, &arg.scalar_type));
        if (!OneOf(arg.scalar_type, kScalarTypes))
          return Err(where + " scalar",
                     "unknown type '" + arg.scalar_type + "' (expected " + ListOf(kScalarTypes) + ")");
        const toml::node* v = t.get("value");
        if (!v) return Err(where + " value", "missing");
        TUNE_RETURN_IF_ERROR(ExprText(*v, where + " value", &arg.value));
      } else {
        arg.kind = ArgSpec::Kind::kBuffer;
        if (t.get("value")) return Err(where + " value", "applies to scalars only (add scalar = \"i32\")");
        TUNE_RETURN_IF_ERROR(OnlyKeys(t, where, {"name", "dir", "dtype", "shape", "init"}));
        TUNE_RETURN_IF_ERROR(String(t, where, "dir", true, &arg.dir));
        if (arg.dir != "in" && arg.dir != "out" && arg.dir != "inout")
          return Err(where + " dir", "expected in | out | inout, got '" + arg.dir + "'");
        TUNE_RETURN_IF_ERROR(String(t, where, "dtype", true, &arg.dtype));
        if (arg.dtype != "$dtype" && !IsDType(arg.dtype, &DTypeInfo::buffer))
          return Err(where + " dtype",
                     "unknown dtype '" + arg.dtype + "' (expected $dtype | " + DTypesWhere(&DTypeInfo::buffer) + ")");
        TUNE_RETURN_IF_ERROR(ExprList(t, where, "shape", 0, true, &arg.shape));
        TUNE_RETURN_IF_ERROR(String(t, where, "init", false, &arg.init));
        if (!arg.init.empty()) {
          if (arg.dir == "out") return Err(where + " init", "applies to in/inout buffers only");
          TUNE_RETURN_IF_ERROR(CheckInit(where + " init", arg.init));
          TUNE_RETURN_IF_ERROR(CheckIntBounds(where + " init", arg));
          // A file's name is read from the text: kept without spaces.
          std::string bare;
          for (char c : arg.init)
            if (!std::isspace(static_cast<unsigned char>(c))) bare += c;
          if (bare.rfind("file(", 0) == 0) arg.init = bare;
        } else if (arg.dir != "out") {
          arg.init = "uniform(-1,1)";
        }
      }
      spec_.args.push_back(std::move(arg));
    }
    return Status::OK();
  }

  Status ParseCheck() {
    Status st;
    const toml::table* t = Table("check", !spec_.program, &st);
    if (!t) return st;
    bool skip = false, against_default = false;
    for (auto [key, out] : {std::pair<const char*, bool*>{"skip", &skip}, {"default", &against_default}}) {
      if (const toml::node* n = t->get(key)) {
        if (!n->is_boolean()) return Err(std::string("[check] ") + key, "expected true or false");
        *out = n->as_boolean()->get();
      }
    }
    if (skip && against_default) return Err("[check]", "skip = true and default = true exclude each other");
    if (skip) spec_.check.mode = CheckSpec::Mode::kSkip;
    if (against_default) spec_.check.mode = CheckSpec::Mode::kDefault;
    if (spec_.program) {
      // The program checks its own output; these reach it as its tolerances.
      TUNE_RETURN_IF_ERROR(
          OnlyKeys(*t, "[check] of a program op", {"rtol", "atol", "max_mismatch", "skip", "default"}));
      return Tolerances(*t);
    }
    TUNE_RETURN_IF_ERROR(OnlyKeys(
        *t, "[check]", {"reference", "checker", "skip", "default", "grid", "block", "rtol", "atol", "max_mismatch"}));
    if ((t->get("reference") ? 1 : 0) + (t->get("checker") ? 1 : 0) + (skip ? 1 : 0) + (against_default ? 1 : 0) != 1)
      return Err("[check]", "needs exactly one of reference = \"file:kernel\", checker = \"file:kernel\", "
                            "default = true or skip = true");
    if (skip || against_default) {
      for (const char* k : {"grid", "block"})
        if (t->get(k))
          return Err(std::string("[check] ") + k,
                     std::string("does not apply with ") + (skip ? "skip" : "default") + " = true");
      spec_.check.grid = spec_.check.block = {"1", "1", "1"};
      return Tolerances(*t);
    }
    const std::string key = t->get("checker") ? "checker" : "reference";
    if (key == "checker") spec_.check.mode = CheckSpec::Mode::kChecker;
    const std::string field = "[check] " + key;
    std::string ref;
    TUNE_RETURN_IF_ERROR(String(*t, "[check]", key.c_str(), true, &ref));
    const size_t colon = ref.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == ref.size())
      return Err(field, "expected \"file:kernel\", got '" + ref + "'");
    spec_.check.reference_file = ref.substr(0, colon);
    spec_.check.reference_kernel = ref.substr(colon + 1);
    if (!IsIdentifier(spec_.check.reference_kernel))
      return Err(field, "'" + spec_.check.reference_kernel + "' is not a C identifier");
    TUNE_RETURN_IF_ERROR(NeedFile(field, spec_.check.reference_file));
    TUNE_RETURN_IF_ERROR(ExprList(*t, "[check]", "grid", 3, true, &spec_.check.grid));
    TUNE_RETURN_IF_ERROR(ExprList(*t, "[check]", "block", 3, true, &spec_.check.block));
    return Tolerances(*t);
  }

  Status Tolerances(const toml::table& t) {
    TUNE_RETURN_IF_ERROR(Number(t, "[check]", "rtol", &spec_.check.rtol));
    TUNE_RETURN_IF_ERROR(Number(t, "[check]", "atol", &spec_.check.atol));
    TUNE_RETURN_IF_ERROR(Number(t, "[check]", "max_mismatch", &spec_.check.max_mismatch));
    if (spec_.check.max_mismatch > 1) return Err("[check] max_mismatch", "expected a share between 0 and 1");
    return Status::OK();
  }

  Status ParseProgram() {
    Status st;
    const toml::table* t = Table("program", false, &st);
    if (!st.ok() || !t) return st;
    const std::string where = "[program]";
    TUNE_RETURN_IF_ERROR(
        OnlyKeys(*t, where, {"files", "build", "run", "serve", "version", "timeout", "build_timeout", "start_timeout"}));
    ProgramSpec p;
    std::vector<std::string> named;
    TUNE_RETURN_IF_ERROR(Names(*t, where, "files", false, true, &named));
    for (const std::string& name : named) {
      // A folder named in files arrives as the files under it.
      const std::string folder = name.back() == '/' ? name : name + "/";
      bool found = package_.count(name) != 0;
      for (const auto& [file, text] : package_) {
        (void)text;
        if (file == name || file.rfind(folder, 0) == 0) {
          found = true;
          if (std::find(p.files.begin(), p.files.end(), file) == p.files.end()) p.files.push_back(file);
        }
      }
      if (!found) return Err("[program] files", "'" + name + "' is not in the op folder");
    }
    TUNE_RETURN_IF_ERROR(String(*t, where, "build", false, &p.build));
    TUNE_RETURN_IF_ERROR(String(*t, where, "run", false, &p.run));
    TUNE_RETURN_IF_ERROR(String(*t, where, "serve", false, &p.serve));
    TUNE_RETURN_IF_ERROR(String(*t, where, "version", false, &p.version));
    if (p.run.empty() == p.serve.empty())
      return Err("[program]", "needs exactly one of run (a process per measurement) or serve (one per GPU)");
    for (const std::string* cmd : {&p.build, &p.run, &p.serve, &p.version}) {
      if (!IsValidUtf8(*cmd) || cmd->size() > 4096 || cmd->find('\0') != std::string::npos)
        return Err("[program]", "commands are UTF-8 text of at most 4096 bytes");
    }
    auto seconds = [&](const char* key, double* out) -> Status {
      if (!t->get(key)) return Status::OK();
      TUNE_RETURN_IF_ERROR(Number(*t, where, key, out));
      if (!(*out > 0 && *out <= 86400)) return Err(where + " " + key, "expected seconds in (0, 86400]");
      return Status::OK();
    };
    TUNE_RETURN_IF_ERROR(seconds("timeout", &p.timeout_seconds));
    TUNE_RETURN_IF_ERROR(seconds("build_timeout", &p.build_timeout_seconds));
    TUNE_RETURN_IF_ERROR(seconds("start_timeout", &p.start_timeout_seconds));
    spec_.program = std::move(p);
    return Status::OK();
  }

  Status ParseMetrics() {
    Status st;
    const toml::table* t = Table("metrics", false, &st);
    if (!st.ok()) return st;
    if (!t) return Status::OK();
    TUNE_RETURN_IF_ERROR(OnlyKeys(*t, "[metrics]", {"flops", "bytes"}));
    if (const toml::node* n = t->get("flops")) TUNE_RETURN_IF_ERROR(ExprText(*n, "[metrics] flops", &spec_.flops));
    if (const toml::node* n = t->get("bytes")) TUNE_RETURN_IF_ERROR(ExprText(*n, "[metrics] bytes", &spec_.bytes));
    return Status::OK();
  }

  Status ParseBaseline() {
    Status st;
    const toml::table* t = Table("baseline", false, &st);
    if (!st.ok() || !t) return st;
    BaselineSpec b;
    const toml::node* lib = t->get("library");
    if (spec_.program) {
      // The harness times the module's baseline(dtype) (docs/program-ops.md);
      // the name is what reports call it.
      TUNE_RETURN_IF_ERROR(OnlyKeys(*t, "[baseline] of a program op", {"library"}));
      if (!lib || !lib->is_string() || !CheckCategoricalText(lib->as_string()->get()).ok())
        return Err("[baseline] library", "expected a name (letters, digits, '_'), like \"torch\"");
      b.library = lib->as_string()->get();
      spec_.baseline = std::move(b);
      return Status::OK();
    }
    TUNE_RETURN_IF_ERROR(OnlyKeys(*t, "[baseline]", {"library", "a", "b", "c", "m", "n", "k"}));
    if (!lib || !lib->is_string()) return Err("[baseline] library", "expected \"cublaslt\"");
    b.library = lib->as_string()->get();
    if (!OneOf(b.library, kBaselineLibraries))
      return Err("[baseline] library", "unknown library '" + b.library + "' (expected " + ListOf(kBaselineLibraries) + ")");
    // C[M,N] = A[M,K] * B[N,K]^T: two inputs and an output of the sweep's dtype.
    const std::pair<const char*, std::string*> buffers[] = {{"a", &b.a}, {"b", &b.b}, {"c", &b.c}};
    for (const auto& [key, out] : buffers) {
      const std::string field = std::string("[baseline] ") + key;
      const toml::node* n = t->get(key);
      if (!n || !n->is_string()) return Err(field, "expected the name of a buffer of [[args]]");
      *out = n->as_string()->get();
      const auto arg = std::find_if(spec_.args.begin(), spec_.args.end(), [&](const ArgSpec& a) { return a.name == *out; });
      if (arg == spec_.args.end() || arg->kind != ArgSpec::Kind::kBuffer)
        return Err(field, "'" + *out + "' is not a buffer of [[args]]");
      const bool output = std::string(key) == "c";
      if (output != (arg->dir != "in")) return Err(field, "'" + *out + "' must be " + (output ? "an output" : "an input"));
      if (arg->dtype != "$dtype") return Err(field, "'" + *out + "' must have the sweep's dtype (\"$dtype\")");
      if (arg->shape.size() != 2) return Err(field, "'" + *out + "' must be a matrix (a shape of two dims)");
    }
    // The check compares every output with the reference: the product is
    // the op's only one. An inout buffer (a workspace) the library leaves as
    // it found it, which is what the reference must do too.
    for (const ArgSpec& arg : spec_.args)
      if (arg.kind == ArgSpec::Kind::kBuffer && arg.dir == "out" && arg.name != b.c)
        return Err("[baseline] c", "the op has another output, '" + arg.name + "', which the library does not write");
    for (const std::string& d : spec_.dtypes)
      if (d != "f16" && d != "bf16" && d != "f32")
        return Err("[baseline] library", "cuBLASLt has no GEMM of the op's dtype " + d);
    const std::pair<const char*, std::string*> sizes[] = {{"m", &b.m}, {"n", &b.n}, {"k", &b.k}};
    for (const auto& [key, out] : sizes) {
      const toml::node* n = t->get(key);
      if (!n) return Err(std::string("[baseline] ") + key, "missing");
      TUNE_RETURN_IF_ERROR(ExprText(*n, std::string("[baseline] ") + key, out));
    }
    spec_.baseline = std::move(b);
    return Status::OK();
  }

  // Every expression must compile against exactly the names it may read.
  Status CompileAll() {
    ExprScope full, legality, reference;
    for (const Axis& a : spec_.axes) {
      full.Set(a.name, 1);
      legality.Set(a.name, 1);
    }
    for (const std::string& d : spec_.dims) {
      full.Set(d, 1);
      reference.Set(d, 1);
    }
    for (ExprScope* s : {&full, &legality, &reference}) s->Set("dsize", 2);
    for (const char* v : kDeviceVars) {
      full.Set(v, 1);
      legality.Set(v, 1);
    }
    auto compile = [&](ExprScope& scope, const std::string& text, const std::string& field,
                       const char* hint) -> Status {
      auto e = Expr::Compile(text, &scope, file_ + ": " + field);
      if (e.ok()) return Status::OK();
      // A name that exists elsewhere in the spec deserves a word on why it is
      // out of reach here.
      if (e.status().code() == StatusCode::kNotFound) {
        for (const std::string& name : ExprIdentifiers(text))
          if (full.Has(name) && !scope.Has(name)) return Status::NotFound(e.status().message() + " (" + hint + ")");
      }
      return e.status();
    };
    const char* kReferenceHint = "the reference launch sees dims and dsize only";
    // A rule that names a dim decides per (config, shape); the others decide
    // a model's space once.
    std::vector<std::string> model_rules;
    for (size_t i = 0; i < spec_.constraints.size(); ++i) {
      const std::string& rule = spec_.constraints[i];
      bool reads_dims = false;
      for (const std::string& name : ExprIdentifiers(rule))
        reads_dims = reads_dims || std::find(spec_.dims.begin(), spec_.dims.end(), name) != spec_.dims.end();
      TUNE_RETURN_IF_ERROR(compile(reads_dims ? full : legality, rule, "[constraints] rules[" + std::to_string(i) + "]", ""));
      (reads_dims ? spec_.shape_constraints : model_rules).push_back(rule);
    }
    spec_.constraints = std::move(model_rules);
    for (size_t i = 0; i < 3; ++i) {
      TUNE_RETURN_IF_ERROR(compile(full, spec_.grid[i], "[launch] grid[" + std::to_string(i) + "]", ""));
      TUNE_RETURN_IF_ERROR(compile(full, spec_.block[i], "[launch] block[" + std::to_string(i) + "]", ""));
    }
    TUNE_RETURN_IF_ERROR(compile(full, spec_.smem, "[launch] smem", ""));
    for (const ArgSpec& arg : spec_.args) {
      const std::string where = "[[args]] " + arg.name;
      if (arg.kind == ArgSpec::Kind::kScalar) {
        TUNE_RETURN_IF_ERROR(compile(full, arg.value, where + " value", ""));
      } else if (arg.kind == ArgSpec::Kind::kTensorMap) {
        for (size_t i = 0; i < arg.box.size(); ++i)
          TUNE_RETURN_IF_ERROR(compile(full, arg.box[i], where + " box[" + std::to_string(i) + "]", ""));
      } else {
        for (size_t i = 0; i < arg.shape.size(); ++i)
          TUNE_RETURN_IF_ERROR(compile(full, arg.shape[i], where + " shape[" + std::to_string(i) + "]", ""));
      }
    }
    if (spec_.check.mode == CheckSpec::Mode::kDefault) {
      // Every config's outputs are compared element by element with the
      // default config's, on the same buffers and scalars.
      const char* kDefaultHint = "with [check] default = true, buffers and scalars see dims and dsize only";
      for (const ArgSpec& arg : spec_.args) {
        const std::string where = "[[args]] " + arg.name;
        if (arg.kind == ArgSpec::Kind::kScalar) TUNE_RETURN_IF_ERROR(compile(reference, arg.value, where + " value", kDefaultHint));
        if (arg.kind != ArgSpec::Kind::kBuffer) continue;
        for (size_t i = 0; i < arg.shape.size(); ++i)
          TUNE_RETURN_IF_ERROR(compile(reference, arg.shape[i], where + " shape[" + std::to_string(i) + "]", kDefaultHint));
      }
    }
    for (size_t i = 0; i < 3; ++i) {
      TUNE_RETURN_IF_ERROR(
          compile(reference, spec_.check.grid[i], "[check] grid[" + std::to_string(i) + "]", kReferenceHint));
      TUNE_RETURN_IF_ERROR(
          compile(reference, spec_.check.block[i], "[check] block[" + std::to_string(i) + "]", kReferenceHint));
    }
    TUNE_RETURN_IF_ERROR(compile(full, spec_.flops, "[metrics] flops", ""));
    TUNE_RETURN_IF_ERROR(compile(full, spec_.bytes, "[metrics] bytes", ""));
    if (spec_.baseline && !spec_.program) {
      const BaselineSpec& b = *spec_.baseline;
      const std::pair<const char*, const std::string*> sizes[] = {{"m", &b.m}, {"n", &b.n}, {"k", &b.k}};
      for (const auto& [key, text] : sizes)
        TUNE_RETURN_IF_ERROR(compile(reference, *text, std::string("[baseline] ") + key, "the baseline's sizes see dims and dsize only"));
    }
    return Status::OK();
  }

  const OpPackage& package_;
  std::string file_;
  const toml::table* root_ = nullptr;
  const toml::table* op_ = nullptr;
  OpSpec spec_;
};

// What a program op's [program] files and an op's [op] include name:
// files, and folders read whole (hidden entries left out: .git, editor
// files, caches). Bounded so that a package still fits a unit's frame
// (a whole library belongs in an include root). Every file is read by
// ReadOpFolderFile, so a link, named or met in a folder, is refused.
Status ReadNamedFiles(const fs::path& root, const std::string& spec_file, const toml::array* files,
                      const std::string& what, OpPackage* package) {
  if (!files) return Status::OK();  // missing or odd: ParseOpSpec says so
  const std::string field = spec_file + ": " + what + ": ";
  size_t bytes = 0;
  for (const auto& [name, text] : *package) bytes += text.size();
  auto add = [&](const std::string& rel) -> Status {
    if (package->count(rel)) return Status::OK();
    if (package->size() >= kMaxPackageFiles)
      return Status::InvalidArgument(field + "more than the limit of " + std::to_string(kMaxPackageFiles) + " files per package");
    std::string contents;
    if (Status st = ReadOpFolderFile(root.string(), rel, kMaxPackageBytes, &contents); !st.ok())
      return Status::InvalidArgument(field + st.message());
    bytes += contents.size();
    if (bytes > kMaxPackageBytes)
      return Status::InvalidArgument(field + "the files hold more than the limit of " + std::to_string(kMaxPackageBytes) +
                           " bytes per package");
    (*package)[rel] = std::move(contents);
    return Status::OK();
  };
  for (const toml::node& item : *files) {
    const std::optional<std::string> name = item.value<std::string>();
    if (!name) continue;
    auto rel = InFolder(fs::path(*name));
    if (!rel) return Status::InvalidArgument(field + "'" + *name + "' is outside the op folder");
    const fs::path path = root / *rel;
    std::error_code ec;
    // Anything but a folder (itself no link) is a file to read, and
    // ReadOpFolderFile refuses it if it is a link or not a regular file.
    if (!fs::is_directory(fs::symlink_status(path, ec))) {
      TUNE_RETURN_IF_ERROR(add(*rel));
      continue;
    }
    // The iterator does not enter linked folders; a link it lists, to a
    // folder or a file, is read as a file and so refused.
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const bool folder = fs::is_directory(it->symlink_status(ec));
      if (it->path().filename().string().front() == '.' || it->path().filename() == "__pycache__") {
        if (folder) it.disable_recursion_pending();
        continue;
      }
      if (!folder) found.push_back(it->path().lexically_relative(root).generic_string());
    }
    if (ec) return Status::IOError(field + "cannot list '" + path.string() + "': " + ec.message());
    std::sort(found.begin(), found.end());
    for (const std::string& r : found) TUNE_RETURN_IF_ERROR(add(r));
  }
  return Status::OK();
}

}  // namespace

Result<OpPackage> ReadOpPackage(const std::string& dir) {
  const fs::path root(dir);
  const std::string spec_file = (root / kSpecFile).string();
  OpPackage package;
  std::string text;
  if (Status st = ReadOpFolderFile(dir, kSpecFile, kMaxPackageBytes, &text); !st.ok())
    return st.WithPrefix(spec_file + ": ");
  package[kSpecFile] = text;
  auto doc = ParseToml(text, spec_file);
  if (!doc.ok()) return doc.status();

  // The named files are read here; whether they are named well is
  // ParseOpSpec's business, so a missing or odd field is left to it.
  std::vector<std::pair<std::string, std::string>> named;  // field, file
  if (auto s = doc.value()["op"]["source"].value<std::string>()) named.emplace_back("[op] source", *s);
  for (const char* key : {"reference", "checker"}) {
    if (auto r = doc.value()["check"][key].value<std::string>()) {
      const size_t colon = r->rfind(':');
      if (colon != std::string::npos && colon > 0) named.emplace_back("[check] " + std::string(key), r->substr(0, colon));
    }
  }
  const size_t sources = named.size();  // the rest are data, not scanned for includes
  if (const toml::array* args = doc.value()["args"].as_array()) {
    for (const toml::node& arg : *args) {
      const std::string init = arg.as_table() ? (*arg.as_table())["init"].value_or(std::string()) : "";
      if (init.rfind("file(", 0) == 0 && init.size() > 6 && init.back() == ')')
        named.emplace_back("[[args]] init", init.substr(5, init.size() - 6));
    }
  }
  std::vector<std::string> roots;
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& [field, name] = named[i];
    auto rel = InFolder(fs::path(name));
    if (!rel) return Status::InvalidArgument(spec_file + ": " + field + ": '" + name + "' is outside the op folder");
    if (package.count(*rel)) continue;
    std::string contents;
    if (Status st = ReadOpFolderFile(dir, *rel, kMaxPackageBytes, &contents); !st.ok())
      return Status::InvalidArgument(spec_file + ": " + field + ": " + st.message());
    package[*rel] = std::move(contents);
    if (i < sources) roots.push_back(*rel);
  }

  TUNE_RETURN_IF_ERROR(ReadNamedFiles(root, spec_file, doc.value()["program"]["files"].as_array(), "[program] files", &package));
  TUNE_RETURN_IF_ERROR(ReadNamedFiles(root, spec_file, doc.value()["op"]["include"].as_array(), "[op] include", &package));
  std::vector<std::string> include_dirs;
  if (const toml::array* dirs = doc.value()["op"]["include"].as_array())
    for (const toml::node& d : *dirs)
      if (auto rel = d.value<std::string>() ? InFolder(fs::path(*d.value<std::string>())) : std::nullopt)
        include_dirs.push_back(*rel);

  // A candidate that is not there is a toolkit or include-root header; one
  // that is there but may not be read (a link) refuses the package.
  std::set<std::string> absent;
  Status refused;
  auto get = [&](const std::string& name) -> const std::string* {
    auto it = package.find(name);
    if (it != package.end()) return &it->second;
    if (absent.count(name)) return nullptr;
    std::string contents;
    if (Status st = ReadOpFolderFile(dir, name, kMaxPackageBytes, &contents); !st.ok()) {
      absent.insert(name);
      if (st.code() != StatusCode::kNotFound && refused.ok()) refused = st;
      return nullptr;
    }
    return &(package[name] = std::move(contents));
  };
  IncludeClosure(roots, get, include_dirs);
  if (!refused.ok()) return refused.WithPrefix(spec_file + ": an included header: ");
  return package;
}

Result<OpSpec> ParseOpSpec(const OpPackage& package, const std::string& origin) {
  auto spec = SpecParser(package, origin).Parse();
  if (spec.ok()) spec->origin = origin.empty() ? "<package>" : origin;
  return spec;
}

Result<OpPackage> WithTiming(OpPackage package, L2Timing timing) {
  auto it = package.find(kSpecFile);
  if (it == package.end()) return Status::InvalidArgument(std::string("the op package has no ") + kSpecFile);
  auto table = ParseToml(it->second, kSpecFile);
  if (!table.ok()) return table.status();
  const toml::table* op = table->get_as<toml::table>("op");
  if (!op) return Status::InvalidArgument(std::string(kSpecFile) + ": no [op] table to set the timing in");
  // The line that says it: the one the op's own `timing` sits on, else a
  // new one under the [op] header. Lines count from 1.
  std::vector<std::string> lines;
  for (size_t begin = 0; begin <= it->second.size();) {
    const size_t end = std::min(it->second.find('\n', begin), it->second.size());
    lines.push_back(it->second.substr(begin, end - begin));
    begin = end + 1;
  }
  const std::string line = std::string("timing = \"") + L2TimingName(timing) + "\"  # the sweep's timing";
  const toml::node* own = op->get("timing");
  const size_t at = own ? own->source().begin.line : op->source().begin.line;
  if (at == 0 || at > lines.size()) return Status::InvalidArgument(std::string(kSpecFile) + ": cannot place [op] timing");
  if (own) lines[at - 1] = line;
  else lines.insert(lines.begin() + static_cast<ptrdiff_t>(at), line);
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) text += (i ? "\n" : "") + lines[i];
  // What it says now is checked, not assumed (a multi-line value, a table
  // written inline).
  auto again = ParseToml(text, kSpecFile);
  const toml::table* op_again = again.ok() ? again->get_as<toml::table>("op") : nullptr;
  const toml::node* said = op_again ? op_again->get("timing") : nullptr;
  if (!said || said->value_or(std::string()) != L2TimingName(timing))
    return Status::InvalidArgument(std::string(kSpecFile) + ": cannot set [op] timing in its text");
  it->second = std::move(text);
  return package;
}

Result<OpSpec> LoadOpSpec(const std::string& dir) {
  auto package = ReadOpPackage(dir);
  if (!package.ok()) return package.status();
  return ParseOpSpec(package.value(), dir);
}

std::vector<std::string> OpNamesIn(const std::string& ops_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(ops_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (it->is_directory(file_ec) && std::filesystem::is_regular_file(it->path() / "op.toml", file_ec))
      names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> ParamMacros(const OpSpec& spec, const Config& config) {
  std::vector<std::string> out;
  for (const auto& [name, value] : config.params) {
    if (value.kind() != ParamValue::Kind::kString) {
      out.push_back(name + "=" + std::to_string(value.Number()));
      continue;
    }
    out.push_back(name + "=" + value.text());
    const Axis* axis = spec.FindAxis(name);
    if (!axis) {
      out.push_back(name + "_" + value.text() + "=1");
      continue;
    }
    for (const ParamValue& v : axis->values) out.push_back(name + "_" + v.text() + (v == value ? "=1" : "=0"));
  }
  return out;
}

const std::string& OpSpec::Written(const std::string& expr) const {
  const auto it = written.find(expr);
  return it == written.end() ? expr : it->second;
}

const Axis* OpSpec::FindAxis(const std::string& axis_name) const {
  for (const Axis& a : axes)
    if (a.name == axis_name) return &a;
  return nullptr;
}


}  // namespace tune
