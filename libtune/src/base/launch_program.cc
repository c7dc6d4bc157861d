#include "base/launch_program.h"

#include <cmath>
#include <limits>

namespace tune {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Integer arithmetic is exact only while values fit a double's mantissa; past
// that the expression is meaningless for launch geometry anyway.
bool IsExactInt(double v) { return std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 0x1p53; }

// Stack effect of each op: values popped, then one pushed.
int Pops(ProgramOp op) {
  switch (op) {
    case ProgramOp::kConst:
    case ProgramOp::kVar: return 0;
    case ProgramOp::kNeg:
    case ProgramOp::kNot:
    case ProgramOp::kFloor:
    case ProgramOp::kCeil:
    case ProgramOp::kLog2:
    case ProgramOp::kAbs: return 1;
    case ProgramOp::kSelect: return 3;
    default: return 2;
  }
}

}  // namespace

double CeilDiv(double a, double b) {
  if (b == 0 || !std::isfinite(a) || !std::isfinite(b)) return kNaN;
  if (IsExactInt(a) && IsExactInt(b)) {
    const auto x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) == (y < 0))) ++q;
    return static_cast<double>(q);
  }
  return std::ceil(a / b);
}

double CRemainder(double a, double b) {
  if (b == 0) return kNaN;
  if (IsExactInt(a) && IsExactInt(b)) return static_cast<double>(static_cast<int64_t>(a) % static_cast<int64_t>(b));
  return std::fmod(a, b);
}

int64_t ProgramValueToInt(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (v <= -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

Status CheckLaunchProgram(const LaunchProgram& p, size_t nvars) {
  const std::string where = "launch program '" + p.text + "': ";
  size_t depth = 0, operand = 0;
  for (uint8_t c : p.code) {
    if (c > static_cast<uint8_t>(ProgramOp::kLast)) return Status::Corruption(where + "unknown opcode " + std::to_string(c));
    const auto op = static_cast<ProgramOp>(c);
    if (op == ProgramOp::kConst || op == ProgramOp::kVar) {
      if (operand >= p.operands.size()) return Status::Corruption(where + "an operand is missing");
      const double v = p.operands[operand++];
      if (op == ProgramOp::kVar && !(v >= 0 && v < static_cast<double>(nvars) && std::floor(v) == v))
        return Status::Corruption(where + "variable index out of range");
    }
    const size_t pops = static_cast<size_t>(Pops(op));
    if (depth < pops) return Status::Corruption(where + "stack underflow");
    depth = depth - pops + 1;
    if (depth > kMaxProgramStack) return Status::Corruption(where + "deeper than " + std::to_string(kMaxProgramStack));
  }
  if (operand != p.operands.size()) return Status::Corruption(where + "unused operands");
  if (depth != 1) return Status::Corruption(where + "leaves " + std::to_string(depth) + " values, not one");
  return Status::OK();
}

double EvalLaunchProgram(const LaunchProgram& p, std::span<const double> vars) {
  double stack[kMaxProgramStack];
  size_t top = 0, operand = 0;
  for (uint8_t c : p.code) {
    const auto op = static_cast<ProgramOp>(c);
    if (op == ProgramOp::kConst) {
      stack[top++] = p.operands[operand++];
      continue;
    }
    if (op == ProgramOp::kVar) {
      stack[top++] = vars[static_cast<size_t>(p.operands[operand++])];
      continue;
    }
    const size_t pops = static_cast<size_t>(Pops(op));
    top -= pops;
    const double a = stack[top], b = pops > 1 ? stack[top + 1] : 0, e = pops > 2 ? stack[top + 2] : 0;
    double r = kNaN;
    switch (op) {
      case ProgramOp::kNeg: r = -a; break;
      case ProgramOp::kNot: r = a == 0 ? 1.0 : 0.0; break;
      case ProgramOp::kAdd: r = a + b; break;
      case ProgramOp::kSub: r = a - b; break;
      case ProgramOp::kMul: r = a * b; break;
      case ProgramOp::kDiv: r = a / b; break;
      case ProgramOp::kMod: r = CRemainder(a, b); break;
      case ProgramOp::kPow: r = std::pow(a, b); break;
      case ProgramOp::kLt: r = a < b; break;
      case ProgramOp::kLe: r = a <= b; break;
      case ProgramOp::kGt: r = a > b; break;
      case ProgramOp::kGe: r = a >= b; break;
      case ProgramOp::kEq: r = a == b; break;
      case ProgramOp::kNe: r = a != b; break;
      case ProgramOp::kAnd: r = (a != 0) && (b != 0); break;
      case ProgramOp::kOr: r = (a != 0) || (b != 0); break;
      case ProgramOp::kSelect: r = a != 0 ? b : e; break;
      case ProgramOp::kCdiv: r = CeilDiv(a, b); break;
      case ProgramOp::kMin: r = std::fmin(a, b); break;
      case ProgramOp::kMax: r = std::fmax(a, b); break;
      case ProgramOp::kFloor: r = std::floor(a); break;
      case ProgramOp::kCeil: r = std::ceil(a); break;
      case ProgramOp::kLog2: r = std::log2(a); break;
      case ProgramOp::kAbs: r = std::fabs(a); break;
      default: break;
    }
    stack[top++] = r;
  }
  return top == 1 ? stack[0] : kNaN;
}

}  // namespace tune
