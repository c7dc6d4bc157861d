#include "opspec/expr.h"

#include <gtest/gtest.h>

#include <set>

#include <cmath>

namespace tune {
namespace {

double Eval(const std::string& text, ExprScope* scope = nullptr) {
  ExprScope empty;
  auto e = Expr::Compile(text, scope ? scope : &empty, "test");
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? e->Eval() : std::nan("");
}

TEST(Expr, OperatorsAndFunctions) {
  EXPECT_EQ(Eval("2 + 3 * 4"), 14);
  EXPECT_EQ(Eval("2 ^ 10"), 1024);
  EXPECT_EQ(Eval("7 / 2"), 3.5);
  EXPECT_EQ(Eval("7 % 3"), 1);
  EXPECT_EQ(Eval("-7 % 3"), -1);  // C semantics
  EXPECT_EQ(Eval("2 + 7 % 4 * 2"), 8);  // % binds like *
  EXPECT_EQ(Eval("cdiv(1000, 256)"), 4);
  EXPECT_EQ(Eval("cdiv(1024, 256)"), 4);
  EXPECT_EQ(Eval("cdiv(1, 256)"), 1);
  EXPECT_EQ(Eval("min(3, 9)"), 3);
  EXPECT_EQ(Eval("max(3, 9)"), 9);
  EXPECT_EQ(Eval("floor(2.7)"), 2);
  EXPECT_EQ(Eval("ceil(2.1)"), 3);
  EXPECT_EQ(Eval("log2(4096)"), 12);
  EXPECT_EQ(Eval("abs(-5)"), 5);
  EXPECT_EQ(Eval("1 < 2 && 3 >= 3"), 1);
  EXPECT_EQ(Eval("1 > 2 || 0"), 0);
  EXPECT_EQ(Eval("!0"), 1);
  EXPECT_EQ(Eval("!(2 == 2)"), 0);
  EXPECT_EQ(Eval("3 != 4"), 1);
  EXPECT_EQ(Eval("1 ? 10 : 20"), 10);
  EXPECT_EQ(Eval("0 ? 10 : 20"), 20);
}

TEST(Expr, VariablesBindByAddress) {
  ExprScope scope;
  scope.Set("BM", 128);
  scope.Set("N", 1000);
  auto e = Expr::Compile("cdiv(N, BM)", &scope, "test");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->Eval(), 8);
  scope.Set("BM", 64);
  EXPECT_EQ(e->Eval(), 16);
  *scope.Slot("N") = 64;
  EXPECT_EQ(e->Eval(), 1);
  EXPECT_EQ(e->text(), "cdiv(N, BM)");
  // Moving the expression keeps the binding.
  Expr moved = std::move(e).value();
  scope.Set("N", 6400);
  EXPECT_EQ(moved.Eval(), 100);
}

TEST(Expr, ScopeBasics) {
  ExprScope scope;
  EXPECT_FALSE(scope.Has("x"));
  EXPECT_EQ(scope.Slot("x"), nullptr);
  scope.SetAll({{"x", 3}, {"y", 4}});
  ASSERT_NE(scope.Slot("x"), nullptr);
  double* before = scope.Slot("x");
  scope.Set("z", 1);  // declaring more names keeps old addresses valid
  EXPECT_EQ(scope.Slot("x"), before);
  EXPECT_EQ(*scope.Slot("y"), 4);
  EXPECT_EQ(scope.Names(), (std::vector<std::string>{"x", "y", "z"}));
}

TEST(Expr, DeviceLimits) {
  DeviceInfo d;
  d.smem_per_block_optin = 232448;
  d.max_threads_per_block = 1024;
  d.num_sms = 132;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.l2_bytes = 50331648;
  ExprScope scope;
  scope.SetDevice(d);
  EXPECT_EQ(Eval("smem_optin", &scope), 232448);
  EXPECT_EQ(Eval("max_threads", &scope), 1024);
  EXPECT_EQ(Eval("num_sms", &scope), 132);
  EXPECT_EQ(Eval("sm", &scope), 90);
  EXPECT_EQ(Eval("l2_bytes", &scope), 50331648);
  d.cc_minor = 9;
  d.cc_major = 8;
  scope.SetDevice(d);
  EXPECT_EQ(Eval("sm", &scope), 89);
}

TEST(Expr, UnknownVariableIsNamed) {
  ExprScope scope;
  scope.Set("BM", 1);
  auto e = Expr::Compile("BM * BQ * 2", &scope, "ops/gemm/op.toml: [launch] smem");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "ops/gemm/op.toml: [launch] smem: unknown variable 'BQ' in 'BM * BQ * 2'");
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ExprIdentifiers("BM * BQ * 2 + cdiv(N, 1e3)"), (std::set<std::string>{"BM", "BQ", "N", "cdiv"}));
}

TEST(Expr, UnknownFunctionAndSyntaxErrors) {
  ExprScope scope;
  scope.Set("x", 1);
  auto f = Expr::Compile("flor(x)", &scope, "where");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("unknown function 'flor'"), std::string::npos) << f.status().message();
  for (const char* bad : {"x +", "(x", "x x", "1,2", "", "   "}) {
    auto e = Expr::Compile(bad, &scope, "where");
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << bad;
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().message().rfind("where: ", 0), 0u) << e.status().message();
    EXPECT_EQ(e.status().message().find('\n'), std::string::npos);
  }
}

TEST(Expr, StringParamsCompareWithTheirValuesOnly) {
  const StringAxes axes = {{"SCHEDULE", {"persistent", "stream_k"}}};
  ExprScope scope;
  scope.Set("SCHEDULE", 0);
  scope.Set("TMA", 0);
  scope.Set("BM", 64);
  auto lowered = LowerCategorical("SCHEDULE == \"stream_k\" && (\"persistent\" != SCHEDULE || TMA == true)", axes, "w");
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(lowered->find('"'), std::string::npos) << *lowered;
  auto e = Expr::Compile(*lowered, &scope, "w");
  ASSERT_TRUE(e.ok()) << e.status().message();
  *scope.Slot("SCHEDULE") = static_cast<double>(CategoricalCode("stream_k"));
  EXPECT_EQ(e->EvalInt(), 1);
  *scope.Slot("SCHEDULE") = static_cast<double>(CategoricalCode("persistent"));
  EXPECT_EQ(e->EvalInt(), 0);
  // In a ?: the comparison picks the branch.
  auto grid = LowerCategorical("SCHEDULE == \"persistent\" ? 132 : cdiv(BM, 2)", axes, "w");
  ASSERT_TRUE(grid.ok()) << grid.status().message();
  auto g = Expr::Compile(*grid, &scope, "w");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->EvalInt(), 132);
  // Text without strings passes through untouched.
  EXPECT_EQ(*LowerCategorical("BM * 2 + cdiv(BM, 3)", axes, "w"), "BM * 2 + cdiv(BM, 3)");

  // Each misuse is one line naming the field.
  const std::pair<const char*, const char*> bad[] = {
      {"SCHEDULE == \"split_k\"", "\"split_k\" is not one of the values of SCHEDULE (persistent, stream_k)"},
      {"SCHEDULE == 1", "SCHEDULE is a string param"},
      {"SCHEDULE + 1 > 0", "SCHEDULE is a string param"},
      {"SCHEDULE == BM", "SCHEDULE is a string param"},
      {"BM == \"stream_k\"", "BM is compared with the string \"stream_k\", but it is not a string param"},
      {"\"stream_k\" > 1", "is not compared with a string param"},
      {"SCHEDULE == \"stream_k\" + 1", "takes part in arithmetic"},
      {"BM < SCHEDULE == \"stream_k\"", "or another comparison"},
      {"SCHEDULE == \"stream_k", "a string without its closing"},
  };
  for (const auto& [text, want] : bad) {
    auto r = LowerCategorical(text, axes, "ops/g/op.toml: [launch] grid[0]");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message().rfind("ops/g/op.toml: [launch] grid[0]: ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

TEST(Expr, ArithmeticFailuresGiveNaNNotExceptions) {
  ExprScope scope;
  scope.Set("b", 0);
  auto e = Expr::Compile("cdiv(10, b)", &scope, "t");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(std::isnan(e->Eval()));
  EXPECT_EQ(e->EvalInt(), 0);
  auto m = Expr::Compile("10 % b", &scope, "t");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(std::isnan(m->Eval()));
}

TEST(Expr, EvalIntRoundsTowardZero) {
  ExprScope scope;
  auto a = Expr::Compile("2.9", &scope, "t");
  auto b = Expr::Compile("-2.9", &scope, "t");
  auto c = Expr::Compile("2^70", &scope, "t");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->EvalInt(), 2);
  EXPECT_EQ(b->EvalInt(), -2);
  EXPECT_EQ(c->EvalInt(), INT64_MAX);
}

}  // namespace
}  // namespace tune
