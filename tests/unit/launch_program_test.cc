// Launch programs (base/launch_program.h) against the farm's own expressions
// (opspec/expr.h): what a deployment evaluates must be what the farm measured.
#include "base/launch_program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "opspec/expr.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

const std::vector<std::string> kVars = {"M", "N", "K", "BM", "BN", "BK", "dsize"};

// Both evaluations of `text` at `values` (kVars order).
void ExpectAgree(const std::string& text, const std::vector<double>& values) {
  ExprScope scope;
  for (size_t i = 0; i < kVars.size(); ++i) scope.Set(kVars[i], values[i]);
  auto expr = Expr::Compile(text, &scope, "test");
  ASSERT_TRUE(expr.ok()) << expr.status().message();
  auto prog = CompileLaunchProgram(text, kVars, "test");
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  const double want = expr->Eval(), got = EvalLaunchProgram(*prog, values);
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << text;
  } else {
    EXPECT_DOUBLE_EQ(got, want) << text;
    EXPECT_EQ(ProgramValueToInt(got), expr->EvalInt()) << text;
  }
}

TEST(LaunchProgram, AgreesWithTheFarmsExpressionsOnEveryOperator) {
  const std::vector<std::string> texts = {
      "2 + 3 * 4", "2 ^ 10", "-2 ^ 2", "2 ^ -1", "7 / 2", "7 % 3", "-7 % 3", "2 + 7 % 4 * 2",
      "cdiv(M, BM)", "cdiv(-M, BM)", "min(M, N) + max(K, 3)", "floor(M / 3) + ceil(N / 7)", "log2(K)", "abs(3 - M)",
      "M > N ? M : N", "M < 4 || N >= 8 && !(K == 2)", "!M", "M != N", "1e3 + .5", "(M + N) * (K - 1)",
      "max(BK*(BM+BN)*dsize*3, BM*(BN+8)*dsize)", "M > 0 ? N > 0 ? 1 : 2 : 3", "cdiv(M, 0)", "M % 0",
      "+M - -N"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dim(0, 5000);
  for (const std::string& t : texts) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> v;
      for (size_t i = 0; i < kVars.size(); ++i) v.push_back(dim(rng));
      ExpectAgree(t, v);
    }
  }
}

TEST(LaunchProgram, EveryShippedOpsLaunchCompilesAndAgrees) {
  for (const char* op : {"gemm", "gemm_sm90", "rmsnorm", "elementwise"}) {
    auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/ops/" + op);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    std::vector<std::string> vars;
    for (const Axis& a : spec->axes) vars.push_back(a.name);
    for (const std::string& d : spec->dims) vars.push_back(d);
    vars.push_back("dsize");
    std::vector<std::string> texts = {spec->smem};
    for (const auto& g : spec->grid) texts.push_back(g);
    for (const auto& b : spec->block) texts.push_back(b);
    for (const std::string& t : texts) {
      auto p = CompileLaunchProgram(t, vars, op);
      ASSERT_TRUE(p.ok()) << p.status().message();
      std::vector<double> values(vars.size(), 64);
      ExprScope scope;
      for (const std::string& v : vars) scope.Set(v, 64);
      auto e = Expr::Compile(t, &scope, op);
      ASSERT_TRUE(e.ok());
      EXPECT_EQ(ProgramValueToInt(EvalLaunchProgram(*p, values)), e->EvalInt()) << op << ": " << t;
    }
  }
}

TEST(LaunchProgram, RefusesWhatTheLaunchLanguageLacksNamingTheToken) {
  auto sin = CompileLaunchProgram("sin(M)", kVars, "ops/x/op.toml: [launch] smem");
  ASSERT_FALSE(sin.ok());
  EXPECT_NE(sin.status().message().find("ops/x/op.toml: [launch] smem: function 'sin'"), std::string::npos)
      << sin.status().message();
  auto unknown = CompileLaunchProgram("Q + 1", kVars, "w");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("'Q'"), std::string::npos);
  EXPECT_FALSE(CompileLaunchProgram("M +", kVars, "w").ok());
  EXPECT_FALSE(CompileLaunchProgram("(M", kVars, "w").ok());
  EXPECT_FALSE(CompileLaunchProgram("M N", kVars, "w").ok());
  EXPECT_FALSE(CompileLaunchProgram("min(M)", kVars, "w").ok());
  EXPECT_FALSE(CompileLaunchProgram("", kVars, "w").ok());
  // Nesting is bounded before it could exhaust the stack.
  auto deep = CompileLaunchProgram(std::string(100000, '(') + "M" + std::string(100000, ')'), kVars, "w");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than"), std::string::npos);
  EXPECT_FALSE(CompileLaunchProgram(std::string(100000, '-') + "M", kVars, "w").ok());
  EXPECT_TRUE(CompileLaunchProgram(std::string(50, '(') + "M" + std::string(50, ')'), kVars, "w").ok());
}

TEST(LaunchProgram, AHostileProgramIsRefusedByTheCheckNotEvaluated) {
  LaunchProgram underflow;
  underflow.code = {static_cast<uint8_t>(ProgramOp::kAdd)};
  EXPECT_FALSE(CheckLaunchProgram(underflow, 3).ok());
  LaunchProgram bad_var;
  bad_var.code = {static_cast<uint8_t>(ProgramOp::kVar)};
  bad_var.operands = {7};
  EXPECT_FALSE(CheckLaunchProgram(bad_var, 3).ok());
  LaunchProgram bad_op;
  bad_op.code = {250};
  EXPECT_FALSE(CheckLaunchProgram(bad_op, 3).ok());
  LaunchProgram two;
  two.code = {static_cast<uint8_t>(ProgramOp::kConst), static_cast<uint8_t>(ProgramOp::kConst)};
  two.operands = {1, 2};
  EXPECT_FALSE(CheckLaunchProgram(two, 0).ok());
  LaunchProgram deep;
  for (size_t i = 0; i <= kMaxProgramStack; ++i) {
    deep.code.push_back(static_cast<uint8_t>(ProgramOp::kConst));
    deep.operands.push_back(1);
  }
  EXPECT_FALSE(CheckLaunchProgram(deep, 0).ok());
  LaunchProgram missing;
  missing.code = {static_cast<uint8_t>(ProgramOp::kConst)};
  EXPECT_FALSE(CheckLaunchProgram(missing, 0).ok());
}

}  // namespace
}  // namespace tune
