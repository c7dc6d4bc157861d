#include "opspec/expr.h"

#include "base/launch_program.h"

#include <muParser.h>

#include <cctype>
#include <cmath>
#include <limits>

namespace tune {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Not(double a) { return a == 0 ? 1.0 : 0.0; }
double Floor(double a) { return std::floor(a); }
double Ceil(double a) { return std::ceil(a); }

bool IsIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_')) return false;
  return true;
}

std::string Describe(const mu::ParserError& e, const std::string& text) {
  const std::string token = e.GetToken();
  if (e.GetCode() == mu::ecUNASSIGNABLE_TOKEN && IsIdentifier(token)) {
    // muparser reports unknown names and unknown functions alike; a '(' after
    // the name tells them apart.
    size_t after = static_cast<size_t>(e.GetPos()) + token.size();
    while (after < text.size() && std::isspace(static_cast<unsigned char>(text[after]))) ++after;
    if (after < text.size() && text[after] == '(') return "unknown function '" + token + "'";
    return "unknown variable '" + token + "'";
  }
  std::string msg = e.GetMsg();
  while (!msg.empty() && (msg.back() == '.' || std::isspace(static_cast<unsigned char>(msg.back()))))
    msg.pop_back();
  return msg;
}

}  // namespace

ExprScope::ExprScope() = default;
ExprScope::~ExprScope() = default;

void ExprScope::Set(const std::string& name, double value) {
  auto it = vars_.find(name);
  if (it == vars_.end()) it = vars_.emplace(name, std::make_unique<double>(0.0)).first;
  *it->second = value;
}

void ExprScope::SetAll(const NamedValues& values) {
  for (const auto& [name, value] : values) Set(name, static_cast<double>(value));
}

void ExprScope::SetDevice(const DeviceInfo& device) {
  Set("smem_optin", static_cast<double>(device.smem_per_block_optin));
  Set("max_threads", device.max_threads_per_block);
  Set("num_sms", device.num_sms);
  Set("sm", device.cc_major * 10 + device.cc_minor);
  Set("l2_bytes", static_cast<double>(device.l2_bytes));
}

bool ExprScope::Has(const std::string& name) const { return vars_.count(name) != 0; }

double* ExprScope::Slot(const std::string& name) {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second.get();
}

std::vector<std::string> ExprScope::Names() const {
  std::vector<std::string> names;
  names.reserve(vars_.size());
  for (const auto& kv : vars_) names.push_back(kv.first);
  return names;
}

struct Expr::Impl {
  mu::Parser parser;
  std::string text;
};

Expr::Expr() : impl_(std::make_unique<Impl>()) {}
Expr::Expr(Expr&&) noexcept = default;
Expr& Expr::operator=(Expr&&) noexcept = default;
Expr::~Expr() = default;

std::set<std::string> ExprIdentifiers(const std::string& text) {
  std::set<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = text[i];
    if (std::isalpha(c) || c == '_') {
      size_t j = i + 1;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      out.insert(text.substr(i, j - i));
      i = j;
    } else if (std::isdigit(c) || c == '.') {
      // Skip numbers whole, exponents included ("1e3" is not a name).
      size_t j = i + 1;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

Result<Expr> Expr::Compile(const std::string& text, ExprScope* scope, const std::string& where) {
  const std::string quoted = " in '" + text + "'";
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    return Status::InvalidArgument(where + ": empty expression");
  Expr expr;
  expr.impl_->text = text;
  mu::Parser& p = expr.impl_->parser;
  try {
    p.DefineFun("cdiv", CeilDiv);
    p.DefineFun("floor", Floor);
    p.DefineFun("ceil", Ceil);
    p.DefineOprt("%", CRemainder, mu::prMUL_DIV, mu::oaLEFT, true);
    p.DefineInfixOprt("!", Not);
    if (scope) {
      for (const std::string& name : scope->Names()) p.DefineVar(name, scope->Slot(name));
    }
    p.SetExpr(text);
    // muparser parses lazily on the first evaluation; doing it here turns
    // every syntax error and unknown name into a compile error.
    (void)p.Eval();
    if (p.GetNumResults() != 1)
      return Status::InvalidArgument(where + ": expected one expression, got " +
                           std::to_string(p.GetNumResults()) + quoted);
  } catch (const mu::ParserError& e) {
    const std::string what = where + ": " + Describe(e, text) + quoted;
    return e.GetCode() == mu::ecUNASSIGNABLE_TOKEN && IsIdentifier(e.GetToken()) ? Status::NotFound(what)
                                                                                : Status::InvalidArgument(what);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(where + ": " + e.what() + quoted);
  }
  return expr;
}

double Expr::Eval() const {
  try {
    return impl_->parser.Eval();
  } catch (...) {
    return kNaN;
  }
}

int64_t Expr::EvalInt() const { return ProgramValueToInt(Eval()); }

const std::string& Expr::text() const { return impl_->text; }

}  // namespace tune
