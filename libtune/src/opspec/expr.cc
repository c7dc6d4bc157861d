#include "opspec/expr.h"

#include "base/launch_program.h"
#include "base/text.h"

#include <muParser.h>

#include <algorithm>
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

namespace {

struct Token {
  enum Kind { kName, kString, kCompare, kOther } kind;
  size_t begin, end;  // [begin, end) of the text
  std::string text;   // a name, a string's contents, "==" or "!="
};

Result<std::vector<Token>> Tokens(const std::string& text, const std::string& where) {
  std::vector<Token> out;
  const auto is_word = [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); };
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"') {
      const size_t close = text.find('"', i + 1);
      if (close == std::string::npos) return Status::InvalidArgument(where + ": a string without its closing '\"'");
      out.push_back({Token::kString, i, close + 1, text.substr(i + 1, close - i - 1)});
      i = close + 1;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < text.size() && is_word(text[j])) ++j;
      out.push_back({Token::kName, i, j, text.substr(i, j - i)});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t j = i;  // 1e5 and 0x10 are one token, not a number and a name
      while (j < text.size() && (is_word(text[j]) || text[j] == '.')) ++j;
      out.push_back({Token::kOther, i, j, text.substr(i, j - i)});
      i = j;
    } else if ((c == '=' || c == '!') && i + 1 < text.size() && text[i + 1] == '=') {
      out.push_back({Token::kCompare, i, i + 2, text.substr(i, 2)});
      i += 2;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else {
      out.push_back({Token::kOther, i, i + 1, std::string(1, c)});
      ++i;
    }
  }
  return out;
}

}  // namespace

Result<std::string> LowerCategorical(const std::string& text, const StringAxes& axes, const std::string& where) {
  if (text.find('"') == std::string::npos && axes.empty() && text.find("true") == std::string::npos &&
      text.find("false") == std::string::npos)
    return text;
  auto tokens = Tokens(text, where);
  if (!tokens.ok()) return tokens.status();
  const std::vector<Token>& t = *tokens;
  // The replacement of each token that changes, by its index.
  std::map<size_t, std::string> replace;
  std::set<size_t> compared;  // string-axis names in a comparison with a value
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind == Token::kName && (t[i].text == "true" || t[i].text == "false")) {
      replace[i] = t[i].text == "true" ? "1" : "0";
      continue;
    }
    if (t[i].kind != Token::kString) continue;
    // NAME == "v" or "v" == NAME.
    size_t name = t.size();
    if (i >= 2 && t[i - 1].kind == Token::kCompare && t[i - 2].kind == Token::kName) name = i - 2;
    if (i + 2 < t.size() && t[i + 1].kind == Token::kCompare && t[i + 2].kind == Token::kName) name = i + 2;
    const std::string literal = "\"" + t[i].text + "\"";
    if (name == t.size())
      return Status::InvalidArgument(where + ": the string " + literal +
                                     " is not compared with a string param (NAME == " + literal + ")");
    const auto axis = axes.find(t[name].text);
    if (axis == axes.end())
      return Status::InvalidArgument(where + ": " + t[name].text + " is compared with the string " + literal +
                                     ", but it is not a string param");
    if (std::find(axis->second.begin(), axis->second.end(), t[i].text) == axis->second.end())
      return Status::InvalidArgument(where + ": " + literal + " is not one of the values of " + t[name].text + " (" +
                                     Join(axis->second, ", ") + ")");
    // Neither side may take part in arithmetic: a string has no number.
    const size_t lo = std::min(i, name), hi = std::max(i, name);
    // Nor in another comparison, which muparser would take first
    // (A < S == "x" reads (A < S) == "x").
    const auto binds_tighter = [&](size_t k) {
      return k < t.size() && (t[k].kind == Token::kCompare ||
                              (t[k].kind == Token::kOther && t[k].text.size() == 1 &&
                               std::string_view("+-*/%^<>").find(t[k].text[0]) != std::string_view::npos));
    };
    if ((lo > 0 && binds_tighter(lo - 1)) || binds_tighter(hi + 1))
      return Status::InvalidArgument(where + ": " + t[name].text + " == " + literal +
                                     " takes part in arithmetic or another comparison; put it in parentheses");
    replace[i] = std::to_string(CategoricalCode(t[i].text));
    compared.insert(name);
  }
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != Token::kName || compared.count(i) || !axes.count(t[i].text)) continue;
    return Status::InvalidArgument(where + ": " + t[i].text +
                                   " is a string param: compare it with one of its values, like " + t[i].text +
                                   " == \"" + axes.at(t[i].text).front() + "\" (it is not a number)");
  }
  std::string out;
  size_t at = 0;
  for (const auto& [i, with] : replace) {
    out.append(text, at, t[i].begin - at);
    out += with;
    at = t[i].end;
  }
  out.append(text, at, std::string::npos);
  return out;
}

}  // namespace tune
