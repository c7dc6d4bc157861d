// Launch programs: the op's launch expressions (grid, block, dynamic shared
// memory, scalar arguments) as a deployment evaluates them, without the
// farm's expression parser. A program is postfix code over a table of
// variables (the op's params, its dims, dsize and the device limits, named in
// the bundle's launch plan). `publish` compiles them (CompileLaunchProgram in
// opspec/expr.h) and checks that they agree with the farm's own evaluation on
// every entry it ships.
//
// This header needs only the C++ standard library and tune/status.h: it is
// part of tunefarm::runtime.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tune/status.h"

namespace tune {

// One instruction. kConst and kVar take the next operand (a value; a
// variable index); kSelect pops else, then, cond and pushes cond ? then : else.
enum class ProgramOp : uint8_t {
  kConst, kVar,
  kNeg, kNot,
  kAdd, kSub, kMul, kDiv, kMod, kPow,
  kLt, kLe, kGt, kGe, kEq, kNe, kAnd, kOr,
  kSelect,
  kCdiv, kMin, kMax, kFloor, kCeil, kLog2, kAbs,
  kLast = kAbs,
};

struct LaunchProgram {
  std::vector<uint8_t> code;      // ProgramOp values
  std::vector<double> operands;   // consumed in order by kConst and kVar
  std::string text;               // the expression it came from (messages, JSON)
};

// Arithmetic shared with the farm's expressions (opspec/expr.h), so that both
// evaluate alike: integer ceil-division and C remainder while the operands
// are exact integers, NaN for a zero divisor.
double CeilDiv(double a, double b);
double CRemainder(double a, double b);

// Checks that `p` is well formed for `nvars` variables: known opcodes, every
// operand present and used, variable indices in range, one value left on the
// stack, depth at most kMaxProgramStack. Bundles are checked once at load;
// Evaluate trusts a checked program.
inline constexpr size_t kMaxProgramStack = 64;
Status CheckLaunchProgram(const LaunchProgram& p, size_t nvars);

// Evaluates a checked program. NaN on arithmetic failure.
double EvalLaunchProgram(const LaunchProgram& p, std::span<const double> vars);

// The farm's rounding of an expression's value to an integer: toward zero,
// NaN gives 0, out of range saturates (tune::Expr::EvalInt).
int64_t ProgramValueToInt(double v);

}  // namespace tune
