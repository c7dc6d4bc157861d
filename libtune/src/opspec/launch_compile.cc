// CompileLaunchProgram (opspec/expr.h): a recursive-descent parser of the
// documented expression language that emits postfix code. Precedence, lowest
// first, as muparser's: ?: , ||, &&, comparisons, + -, * / %, unary - + !, ^
// (right-associative, so -2^2 is -4).
#include <cctype>
#include <cstdlib>

#include "opspec/expr.h"

namespace tune {
namespace {

class Compiler {
 public:
  Compiler(const std::string& text, const std::vector<std::string>& vars) : s_(text), vars_(vars) {
    out_.text = text;
  }

  Status Run() {
    TUNE_RETURN_IF_ERROR(Ternary());
    Skip();
    if (pos_ != s_.size()) return Error("unexpected '" + s_.substr(pos_, 1) + "'");
    return Status::OK();
  }
  LaunchProgram Take() { return std::move(out_); }

 private:
  Status Error(const std::string& what) const {
    return Status::InvalidArgument(what + " at position " + std::to_string(pos_ + 1));
  }
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(const char* tok) {
    Skip();
    const size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(pos_, n, tok) != 0) return false;
    pos_ += n;
    return true;
  }
  void Emit(ProgramOp op) { out_.code.push_back(static_cast<uint8_t>(op)); }
  void Emit(ProgramOp op, double operand) {
    Emit(op);
    out_.operands.push_back(operand);
  }

  // Nesting bound: a spec of ((((... must not exhaust the stack.
  static constexpr int kMaxNesting = 256;

  Status Ternary() {
    if (++depth_ > kMaxNesting) return Error("nested deeper than " + std::to_string(kMaxNesting));
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    TUNE_RETURN_IF_ERROR(Or());
    if (!Eat("?")) return Status::OK();
    TUNE_RETURN_IF_ERROR(Ternary());
    if (!Eat(":")) return Error("expected ':'");
    TUNE_RETURN_IF_ERROR(Ternary());
    Emit(ProgramOp::kSelect);
    return Status::OK();
  }
  Status Or() {
    TUNE_RETURN_IF_ERROR(And());
    while (Eat("||")) {
      TUNE_RETURN_IF_ERROR(And());
      Emit(ProgramOp::kOr);
    }
    return Status::OK();
  }
  Status And() {
    TUNE_RETURN_IF_ERROR(Compare());
    while (Eat("&&")) {
      TUNE_RETURN_IF_ERROR(Compare());
      Emit(ProgramOp::kAnd);
    }
    return Status::OK();
  }
  Status Compare() {
    TUNE_RETURN_IF_ERROR(Sum());
    for (;;) {
      ProgramOp op;
      if (Eat("<=")) op = ProgramOp::kLe;
      else if (Eat(">=")) op = ProgramOp::kGe;
      else if (Eat("==")) op = ProgramOp::kEq;
      else if (Eat("!=")) op = ProgramOp::kNe;
      else if (Eat("<")) op = ProgramOp::kLt;
      else if (Eat(">")) op = ProgramOp::kGt;
      else return Status::OK();
      TUNE_RETURN_IF_ERROR(Sum());
      Emit(op);
    }
  }
  Status Sum() {
    TUNE_RETURN_IF_ERROR(Product());
    for (;;) {
      ProgramOp op;
      if (Eat("+")) op = ProgramOp::kAdd;
      else if (Eat("-")) op = ProgramOp::kSub;
      else return Status::OK();
      TUNE_RETURN_IF_ERROR(Product());
      Emit(op);
    }
  }
  Status Product() {
    TUNE_RETURN_IF_ERROR(Unary());
    for (;;) {
      ProgramOp op;
      if (Eat("*")) op = ProgramOp::kMul;
      else if (Eat("/")) op = ProgramOp::kDiv;
      else if (Eat("%")) op = ProgramOp::kMod;
      else return Status::OK();
      TUNE_RETURN_IF_ERROR(Unary());
      Emit(op);
    }
  }
  Status Unary() {
    if (++depth_ > kMaxNesting) return Error("nested deeper than " + std::to_string(kMaxNesting));
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    if (Eat("-")) {
      TUNE_RETURN_IF_ERROR(Unary());
      Emit(ProgramOp::kNeg);
      return Status::OK();
    }
    if (Eat("+")) return Unary();
    Skip();
    if (s_.compare(pos_, 2, "!=") != 0 && Eat("!")) {
      TUNE_RETURN_IF_ERROR(Unary());
      Emit(ProgramOp::kNot);
      return Status::OK();
    }
    return Power();
  }
  Status Power() {
    TUNE_RETURN_IF_ERROR(Primary());
    if (Eat("^")) {
      TUNE_RETURN_IF_ERROR(Unary());
      Emit(ProgramOp::kPow);
    }
    return Status::OK();
  }
  Status Primary() {
    Skip();
    if (pos_ >= s_.size()) return Error("unexpected end");
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '(') {
      ++pos_;
      TUNE_RETURN_IF_ERROR(Ternary());
      if (!Eat(")")) return Error("expected ')'");
      return Status::OK();
    }
    if (std::isdigit(c) || c == '.') {
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      const double v = std::strtod(begin, &end);
      if (end == begin) return Error("bad number");
      pos_ += static_cast<size_t>(end - begin);
      Emit(ProgramOp::kConst, v);
      return Status::OK();
    }
    if (!(std::isalpha(c) || c == '_')) return Error("unexpected '" + s_.substr(pos_, 1) + "'");
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    const std::string name = s_.substr(start, pos_ - start);
    if (Eat("(")) return Call(name);
    for (size_t i = 0; i < vars_.size(); ++i) {
      if (vars_[i] == name) {
        Emit(ProgramOp::kVar, static_cast<double>(i));
        return Status::OK();
      }
    }
    return Status::NotFound("unknown variable '" + name + "'");
  }
  // After "name(".
  Status Call(const std::string& name) {
    struct Fn {
      const char* name;
      int args;
      ProgramOp op;
    };
    static constexpr Fn kFns[] = {{"cdiv", 2, ProgramOp::kCdiv}, {"min", 2, ProgramOp::kMin},
                                  {"max", 2, ProgramOp::kMax},   {"floor", 1, ProgramOp::kFloor},
                                  {"ceil", 1, ProgramOp::kCeil}, {"log2", 1, ProgramOp::kLog2},
                                  {"abs", 1, ProgramOp::kAbs}};
    const Fn* fn = nullptr;
    for (const Fn& f : kFns)
      if (name == f.name) fn = &f;
    if (!fn) return Error("function '" + name + "' is not in the launch language");
    for (int i = 0; i < fn->args; ++i) {
      if (i > 0 && !Eat(",")) return Error(name + "() takes " + std::to_string(fn->args) + " arguments");
      TUNE_RETURN_IF_ERROR(Ternary());
    }
    if (!Eat(")")) return Error(name + "() takes " + std::to_string(fn->args) + " arguments");
    Emit(fn->op);
    return Status::OK();
  }

  const std::string& s_;
  const std::vector<std::string>& vars_;
  size_t pos_ = 0;
  int depth_ = 0;
  LaunchProgram out_;
};

}  // namespace

Result<LaunchProgram> CompileLaunchProgram(const std::string& text, const std::vector<std::string>& vars,
                                           const std::string& where) {
  Compiler c(text, vars);
  if (Status st = c.Run(); !st.ok()) return st.WithPrefix(where + ": ").WithSuffix(" in '" + text + "'");
  LaunchProgram p = c.Take();
  if (Status st = CheckLaunchProgram(p, vars.size()); !st.ok())
    return Status::InvalidArgument(where + ": " + st.message());
  return p;
}

}  // namespace tune
