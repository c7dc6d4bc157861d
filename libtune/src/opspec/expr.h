// Expressions over params, problem dims and device limits, evaluated with
// muparser. Used for constraints, launch geometry, buffer shapes and metrics.
//
// Operators: + - * / % (integer remainder), ^, comparisons, && || !, ?:
// Functions: cdiv(a,b), min(a,b), max(a,b), floor, ceil, log2, abs.
// Device limits (names fixed): smem_optin, max_threads, num_sms, sm (e.g. 90),
// l2_bytes; plus dsize (byte size of the sweep's dtype).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/launch_program.h"
#include "tune/status.h"
#include "base/types.h"

namespace tune {

// Variables an expression may read. Addresses of values are stable for the
// lifetime of the ExprScope; compiled expressions bind to them, so updating a
// value (Set) is all it takes to re-evaluate. Not thread-safe.
class ExprScope {
 public:
  ExprScope();
  ~ExprScope();
  ExprScope(const ExprScope&) = delete;
  ExprScope& operator=(const ExprScope&) = delete;

  void Set(const std::string& name, double value);  // declares on first use
  void SetAll(const NamedValues& values);
  void SetDevice(const DeviceInfo& device);         // smem_optin, max_threads, ...
  bool Has(const std::string& name) const;
  double* Slot(const std::string& name);            // nullptr when undeclared
  std::vector<std::string> Names() const;           // declared names, sorted

 private:
  std::map<std::string, std::unique_ptr<double>> vars_;
};

// The names an expression mentions; an over-approximation (it also sees
// function names), for callers that ask which variables it reads.
std::set<std::string> ExprIdentifiers(const std::string& text);

// The values of an op's string axes, by axis name.
using StringAxes = std::map<std::string, std::vector<std::string>>;

// Rewrites what an expression says of categorical params into numbers,
// before it is compiled. A string axis is only compared with one of its
// values, `NAME == "value"` or `NAME != "value"` (either way round); the
// value becomes its CategoricalCode (base/types.h), the number the axis
// reads as. `true` and `false` become 1 and 0 (a boolean axis reads as 1 or
// 0 and may stand alone as a condition). Refused, naming `where`: a string
// literal elsewhere or of a value the axis lacks, a string axis used as a
// number (compared with a number or another name, or in arithmetic), and a
// number compared with a string.
Result<std::string> LowerCategorical(const std::string& text, const StringAxes& axes, const std::string& where);

class Expr {
 public:
  Expr(Expr&&) noexcept;
  Expr& operator=(Expr&&) noexcept;
  ~Expr();

  // Compiles `text` against the variables declared in `scope` at this time.
  // An unknown variable (StatusCode::kNotFound) or a syntax error
  // (kInvalidArgument) is an error naming `where` (e.g.
  // "ops/gemm/op.toml: [launch] smem") and the offending token.
  static Result<Expr> Compile(const std::string& text, ExprScope* scope, const std::string& where);

  double Eval() const;          // never throws; NaN on arithmetic failure
  int64_t EvalInt() const;      // Eval rounded toward zero; NaN gives 0, +-inf saturate
  const std::string& text() const;

 private:
  Expr();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Compiles `text` into a launch program (base/launch_program.h) over the
// variables `vars` (a variable's index is its position). The program language
// is the documented one above: numbers, variables, + - * / % ^, unary - + !,
// comparisons, && ||, ?:, and cdiv min max floor ceil log2 abs. Anything
// else muparser would accept (its other functions and constants) is refused
// (kInvalidArgument, naming `where` and the token), as is an unknown
// variable (kNotFound).
Result<LaunchProgram> CompileLaunchProgram(const std::string& text, const std::vector<std::string>& vars,
                                           const std::string& where);

}  // namespace tune
