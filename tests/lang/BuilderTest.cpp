// The builder produces the expected IR: printed text for whole kernels, and op kinds and types
// for broadcasting, literal promotion, Vars in loops and branches, and locations.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "interp/Interpreter.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"
#include "lang/Lang.h"
#include "text/Text.h"

namespace tessera {
namespace {

using namespace lang;

std::vector<OpKind> body_kinds(const Kernel& k) {
  std::vector<OpKind> out;
  for (const auto& op : k.body->ops) out.push_back(op->kind);
  return out;
}

int count(Kernel& k, OpKind kind) {
  int n = 0;
  walk(k, [&](Op& op) { n += op.kind == kind; });
  return n;
}

TEST(Builder, VectorAddPrintsExpectedIR) {
  KernelBuilder k("add");
  auto x = k.view("x", f32, {"N"}), y = k.view("y", f32, {"N"});
  auto B = k.constexpr_("BLOCK", {128, 256});
  k.grid({cdiv(x.dim(0), B)});
  auto pid = program_id(0).named("pid");
  auto t = x.tile({B}).load({pid});
  y.tile({B}).store({pid}, t * 2.0 + 1);
  auto kernel = k.finish();
  EXPECT_EQ(print_kernel(*kernel), R"(kernel @add(%x: view<f32, [N]>, %y: view<f32, [N]>) {
  constexpr BLOCK = 128 in [128, 256]
  grid {
    %0 = dim %x {axis = 0} : i32
    %1 = param {name = "BLOCK"} : i32
    %2 = add %0, %1 : i32
    %3 = const {value = 1} : i32
    %4 = sub %2, %3 : i32
    %5 = div %4, %1 : i32
    yield %5
  }
  %pid = program_id {axis = 0} : i32
  %6 = load_tile %x, %pid : tile<f32, [BLOCK]>
  %7 = const {value = 2.0} : f32
  %8 = splat %7 : tile<f32, [BLOCK]>
  %9 = mul %6, %8 : tile<f32, [BLOCK]>
  %10 = const {value = 1.0} : f32
  %11 = splat %10 : tile<f32, [BLOCK]>
  %12 = add %9, %11 : tile<f32, [BLOCK]>
  store_tile %y, %12, %pid
}
)");
}

// The radix-select key of a float (docs/semantics.md): its bits as u32, negatives flipped whole,
// the rest by the sign bit, so that the keys order as the floats do. Printed as text, and run.
// A Var made from an Operand holds it (the constructor once went through Var again and
// recursed without end).
TEST(Builder, VarFromAnOperandHoldsIt) {
  KernelBuilder k("v");
  auto y = k.view("y", f32, {"N"});
  k.grid({1});
  const Operand o = 3.5f;
  Var v(o);
  y.tile({1}).store({0}, splat(v, {1}));
  auto kernel = k.finish();
  EXPECT_NE(print_kernel(*kernel).find("const {value = 3.5} : f32"), std::string::npos) << print_kernel(*kernel);
}

TEST(Builder, BitcastMakesOrderedKeys) {
  KernelBuilder k("keys");
  auto x = k.view("x", f32, {"N"}), y = k.view("y", u32, {"N"});
  k.grid({1});
  auto b = bitcast(x.tile({8}).load({0}), u32);
  auto neg = bitcast(b, i32) < 0;
  y.tile({8}).store({0}, where(neg, b ^ 0xFFFFFFFFu, b ^ 0x80000000u));
  auto kernel = k.finish();
  const std::string text = print_kernel(*kernel);
  EXPECT_NE(text.find(" = bitcast %"), std::string::npos) << text;
  EXPECT_EQ(print_kernel(*parse_module(text, "k.tile")->kernels.at(0)), text);
  Tensor xs(ScalarKind::F32, {8}), ys(ScalarKind::U32, {8});
  const double v[8] = {-2.5, -0.0, 0.0, 1e-45, 3.0, -1e30, 1.0, -1e-45};
  for (int i = 0; i < 8; ++i) xs.set(i, v[i]);
  std::vector<KernelArg> args{{&xs}, {&ys}};
  run_interp(*kernel, args);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      if (v[i] < v[j] || (v[i] == v[j] && std::signbit(v[i]) && !std::signbit(v[j])))
        EXPECT_LT(ys.get_int(i), ys.get_int(j)) << v[i] << " " << v[j];
    }
}

TEST(Builder, OpsRecordTheUsersCallSite) {
  KernelBuilder k("loc");
  auto x = k.view("x", f32, {"N"});
  k.grid({1});
  int line = __LINE__ + 1;
  auto t = x.tile({16}).load({0}) + 1.0;
  x.tile({16}).store({0}, t);
  auto kernel = k.finish();
  for (const auto& op : kernel->body->ops) {
    ASSERT_TRUE(op->loc.known()) << op->name();
    EXPECT_EQ(*op->loc.file, __FILE__);
    EXPECT_TRUE(op->loc.line == line || op->loc.line == line + 1) << op->name() << " " << op->loc.str();
  }
}

TEST(Builder, BroadcastsNumpyStyle) {
  KernelBuilder k("bc");
  auto x = k.view("x", f32, {"M", "N"});
  k.grid({1});
  auto col = zeros({16, 1}, f32);
  auto row = zeros({32}, f32);
  auto s = col + row;
  EXPECT_EQ(s.type(), Type::tile(ScalarKind::F32, {16, 32}));
  // [16, 1] -> broadcast; [32] -> expand_dims then broadcast.
  auto kinds = body_kinds(k.kernel());
  std::vector<OpKind> tail(kinds.end() - 4, kinds.end());
  EXPECT_EQ(tail, (std::vector<OpKind>{OpKind::Broadcast, OpKind::ExpandDims, OpKind::Broadcast,
                                       OpKind::Add}));
  x.tile({16, 32}).store({0, 0}, s);
  k.finish();
}

TEST(Builder, LiteralsTakeTheOtherOperandsType) {
  KernelBuilder k("lit");
  auto x = k.view("x", bf16, {"N"});
  k.grid({1});
  auto i = program_id(0) * 3;  // an i32 const
  EXPECT_EQ(i.type(), Type::scalar(ScalarKind::I32));
  auto t = x.tile({8}).load({i}) * 0.5;  // a bf16 const, splat
  EXPECT_EQ(t.type(), Type::tile(ScalarKind::BF16, {8}));
  const Op* mul = t.ir()->def;
  const Op* splat = mul->operands[1]->def;
  ASSERT_EQ(splat->kind, OpKind::Splat);
  EXPECT_EQ(splat->operands[0]->type, Type::scalar(ScalarKind::BF16));
  EXPECT_EQ(splat->operands[0]->def->attr_number("value"), 0.5);
  auto c = 1 - t;  // literal on the left
  EXPECT_EQ(c.ir()->def->kind, OpKind::Sub);
  x.tile({8}).store({i}, c);
  k.finish();
}

TEST(Builder, ConstexprIsASymbolicDimAndAParam) {
  KernelBuilder k("cx");
  auto x = k.view("x", f32, {"N"});
  auto B = k.constexpr_("B", {64, 128}, 128);
  EXPECT_EQ(k.kernel().find_constexpr("B")->value, 128);
  k.grid({1});
  auto t = zeros({B}, f32);
  EXPECT_EQ(t.shape(), (Shape{Dim("B")}));
  auto v = program_id(0) * B;
  EXPECT_EQ(v.ir()->def->operands[1]->def->kind, OpKind::Param);
  x.tile({B}).store({v}, t);
  EXPECT_TRUE(verify(*k.finish()).empty());
}

TEST(Builder, VarsBecomeLoopCarriedOnlyWhenAssigned) {
  KernelBuilder k("loop");
  auto x = k.view("x", f32, {"M", "N"});
  k.grid({x.dim(0)});
  Var acc = zeros({1, 16}, f32);
  Var untouched = zeros({1, 16}, f32);
  for_range(0, cdiv(x.dim(1), 16), 1, [&](Val j) {
    acc = acc + x.tile({1, 16}).load({program_id(0), j}) + untouched;
  }, pipeline(2));
  x.tile({1, 16}).store({program_id(0), 0}, acc);
  auto kernel = k.finish();
  const Op* loop = nullptr;
  for (const auto& op : kernel->body->ops)
    if (op->kind == OpKind::For) loop = op.get();
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->operands.size(), 4u);  // lb, ub, step, acc
  EXPECT_EQ(loop->results.size(), 1u);
  EXPECT_EQ(loop->region(0).args.size(), 2u);  // iv, acc
  EXPECT_EQ(loop->attr_int("pipeline"), 2);
  EXPECT_TRUE(verify(*kernel).empty());
}

TEST(Builder, ExplicitCarriedValues) {
  KernelBuilder k("carry");
  auto x = k.view("x", i32, {"N"});
  k.grid({1});
  auto r = for_range(0, 10, 1, {zeros({}, i32)}, [&](Val i, std::vector<Val> c) {
    return std::vector<Val>{c[0] + i};
  });
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].type(), Type::scalar(ScalarKind::I32));
  x.tile({1}).store({0}, splat(r[0], {1}));
  EXPECT_TRUE(verify(*k.finish()).empty());
}

TEST(Builder, IfAssignsVarsAndReturnsValues) {
  KernelBuilder k("branch");
  auto x = k.view("x", f32, {"N"});
  k.grid({2});
  auto pid = program_id(0);
  Var v = zeros({4}, f32);
  if_(eq(pid, 0), [&] { v = v + 1.0; });
  auto w = if_(pid > 0, [&] { return v * 2.0; }, [&] { return v; });
  x.tile({4}).store({pid}, w);
  auto kernel = k.finish();
  EXPECT_EQ(count(*kernel, OpKind::If), 2);
  for (const auto& op : kernel->body->ops) {
    if (op->kind == OpKind::If) {
      EXPECT_EQ(op->results.size(), 1u);
    }
  }
  EXPECT_TRUE(verify(*kernel).empty());
}

TEST(Builder, WhileCarriesAssignedVars) {
  KernelBuilder k("wh");
  auto x = k.view("x", i32, {"N"});
  k.grid({1});
  Var i = 0;
  Var total = 0;
  Var fixed = 5;
  while_([&] { return i < 10; }, [&] {
    total = total + i * fixed;
    i = i + 1;
  });
  x.tile({1}).store({0}, splat(total, {1}));
  auto kernel = k.finish();
  const Op* w = nullptr;
  for (const auto& op : kernel->body->ops)
    if (op->kind == OpKind::While) w = op.get();
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->operands.size(), 2u);  // i and total; fixed is not carried
  EXPECT_EQ(w->region(0).args.size(), 2u);
  EXPECT_EQ(w->region(1).args.size(), 2u);
  EXPECT_TRUE(verify(*kernel).empty());
}

TEST(Builder, ReductionsScansAndCombiners) {
  KernelBuilder k("red");
  auto x = k.view("x", f32, {"M", "N"});
  auto y = k.view("y", i32, {"M"});
  k.grid({1});
  auto t = x.tile({4, 8}).load({0, 0});
  EXPECT_EQ(sum(t, 1).type(), Type::tile(ScalarKind::F32, {4}));
  EXPECT_EQ(max(t, -1).type(), Type::tile(ScalarKind::F32, {4}));
  EXPECT_EQ(argmax(t, 0).type(), Type::tile(ScalarKind::I32, {8}));
  EXPECT_EQ(sum(sum(t, 0), 0).type(), Type::scalar(ScalarKind::F32));
  auto r = reduce(t, 1, [](Val a, Val b) { return maximum(a, b); });
  EXPECT_EQ(r.ir()->def->kind, OpKind::ReduceWith);
  auto s = scan(t, 1, [](Val a, Val b) { return a + b; });
  EXPECT_EQ(s.type(), t.type());
  EXPECT_EQ(cumsum(t, 1).ir()->def->attr_string("kind"), "sum");
  y.tile({4}).store({0}, argmin(t + s + expand_dims(r, 1), 1));
  EXPECT_TRUE(verify(*k.finish()).empty());
}

TEST(Builder, ShapesDotAndMemoryOps) {
  KernelBuilder k("misc");
  auto a = k.view("a", bf16, {"M", "K"}), b = k.view("b", bf16, {"K", "N"});
  auto c = k.view("c", f32, {"M", "N"});
  auto idx = k.view("idx", i32, {"M"});
  k.grid({1});
  auto at = a.tile({16, 32}).load({0, 0});
  auto bt = b.tile({32, 16}).load({0, 0});
  auto d = dot(at, bt);
  EXPECT_EQ(d.type(), Type::tile(ScalarKind::F32, {16, 16}));
  EXPECT_EQ(at.T().type(), Type::tile(ScalarKind::BF16, {32, 16}));
  EXPECT_EQ(reshape(at, {512}).type(), Type::tile(ScalarKind::BF16, {512}));
  auto sub = extract_tile(d, {8, 16}, {1, 0});
  d = insert_tile(d, sub * 2.0, {0, 0});
  auto rows = arange(16);
  auto g = gather(c, {expand_dims(rows, 1), expand_dims(arange(16), 0)}, rows < 10, 0.0);
  EXPECT_EQ(g.type(), Type::tile(ScalarKind::F32, {16, 16}));
  scatter(c, d + g, {expand_dims(rows, 1), expand_dims(arange(16), 0)});
  auto old = atomic_add(idx, 1, {rows}, rows < 5);
  EXPECT_EQ(old.type(), Type::tile(ScalarKind::I32, {16}));
  atomic_cas(idx, old, old + 1, {rows});
  auto e = where(rows < 3, exp(sin(d)), fma(d, d, 1.0));
  c.tile({16, 16}).store({0, 0}, e.to(f32));
  auto r = raw("twice", {rows}, {rows.type()}, {{"cpp", "out0 = in0 * 2;"}});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].ir()->def->attr_string("cpp"), "out0 = in0 * 2;");
  EXPECT_TRUE(verify(*k.finish()).empty());
}

TEST(Builder, BuiltKernelRoundTripsThroughText) {
  KernelBuilder k("rt");
  auto x = k.view("x", f32, {"M", "N"});
  auto BN = k.constexpr_("BLOCK_N", {32, 64});
  k.grid({x.dim(0)});
  Var acc = zeros({1, BN}, f32);
  for_range(0, cdiv(x.dim(1), BN), 1, [&](Val j) {
    acc = acc + exp(x.tile({1, BN}).load({program_id(0), j}, -inf));
  });
  x.tile({1, BN}).store({program_id(0), 0}, acc / sum(acc, 1));
  auto kernel = k.finish();
  std::string text = print_kernel(*kernel);
  auto m = parse_module(text, "rt.tile");
  EXPECT_EQ(print_kernel(*m->kernels.at(0)), text);
}

// Control flow built from Vars means what the C++ reads as: run it on the interpreter.
TEST(Builder, VarsInNestedLoopsAndBranchesRunAsWritten) {
  KernelBuilder k("flow");
  auto out = k.view("out", i32, {4});
  k.grid({1});
  Var a = 1, b = 2, total = 0, steps = 0;
  for_range(0, 3, 1, [&](Val i) {
    for_range(0, 4, 1, [&](Val j) { total = total + i * j; });  // sum i*j = 3 * 6 = 18
    Var t = a;  // swap a and b each iteration: a carried value yields another's argument
    a = b;
    b = t;
    if_(eq(i, 1), [&] { total = total + 100; });
  });
  while_([&] { return steps < 7; }, [&] { steps = steps + 1; });
  out.tile({4}).store({0}, where(arange(4) < 1, total, where(arange(4) < 2, a,
                                                             where(arange(4) < 3, b, steps))));
  auto kernel = bind_constexprs(*k.finish(), {});
  Tensor t(ScalarKind::I32, {4});
  std::vector<KernelArg> args(1);
  args[0].tensor = &t;
  run_interp(*kernel, args);
  EXPECT_EQ(t.get_int(0), 118);
  EXPECT_EQ(t.get_int(1), 2);  // three swaps
  EXPECT_EQ(t.get_int(2), 1);
  EXPECT_EQ(t.get_int(3), 7);
}

// item() gives the scalar of one-element tiles of any rank, flags included.
TEST(Builder, ItemMakesScalarsOfOneElementTiles) {
  KernelBuilder k("item");
  auto x = k.view("x", f32, {4}), out = k.view("out", f32, {4});
  k.grid({1});
  auto pid = program_id(0);
  EXPECT_EQ(item(pid).ir(), pid.ir());
  Val a = item(x.tile({1}).load({0}));
  Val b = item(reshape(x.tile({1}).load({1}), {1, 1}));
  Val flag = item(x.tile({1}).load({2}) > 0.0);
  EXPECT_TRUE(a.type().is_scalar() && b.type().is_scalar());
  EXPECT_EQ(flag.type(), Type::scalar(ScalarKind::I1));
  Var c = 0.0;
  if_(flag, [&] { c = 10.0; }, [&] { c = -10.0; });
  out.tile({4}).store({0}, where(arange(4) < 1, a, where(arange(4) < 2, b, c)));
  auto kernel = bind_constexprs(*k.finish(), {});
  Tensor tx(ScalarKind::F32, {4}), to(ScalarKind::F32, {4});
  for (double sign : {1.0, -1.0}) {
    for (int i = 0; i < 4; ++i) tx.set(i, sign * (0.25 + i));
    std::vector<KernelArg> args(2);
    args[0].tensor = &tx;
    args[1].tensor = &to;
    run_interp(*kernel, args);
    EXPECT_EQ(to.get(0), sign * 0.25);
    EXPECT_EQ(to.get(1), sign * 1.25);
    EXPECT_EQ(to.get(2), sign * 10.0);
    EXPECT_EQ(to.get(3), sign * 10.0);
  }
}

// A shape expression (BN / 2) built in C++ prints as the text format writes it, reads back,
// folds when BN binds, and computes the right thing on ragged sizes: y[i, j] = x[i, 2j] +
// x[i, 2j + 1] with N = 75 odd (the last pair reads the pad 0).
TEST(Builder, ShapeExpressionsPrintBindAndRun) {
  KernelBuilder k("pair_sum");
  auto x = k.view("x", f32, {"M", "N"}), y = k.view("y", f32, {"M", "NH"});
  auto BM = k.constexpr_("BM", {4, 8});
  auto BN = k.constexpr_("BN", {16, 32, 33}, 32);
  k.grid({cdiv(x.dim(0), BM), cdiv(x.dim(1), BN)});
  auto i = program_id(0), j = program_id(1);
  Val pairs = reshape(x.tile({BM, BN}).load({i, j}), {BM, Dim(BN) / 2, 2});
  y.tile({BM, Dim(BN) / 2}).store({i, j}, sum(pairs, 2));
  auto kernel = k.finish();
  std::string text = print_kernel(*kernel);
  EXPECT_NE(text.find("tile<f32, [BM, BN / 2, 2]>"), std::string::npos) << text;
  auto m = parse_module(text, "pair_sum.tile");
  EXPECT_EQ(print_kernel(*m->kernels.at(0)), text);

  const int64_t M = 5, N = 75, NH = 38;
  Tensor tx(ScalarKind::F32, {M, N}), ty(ScalarKind::F32, {M, NH});
  std::mt19937 rng(7);
  for (int64_t e = 0; e < tx.numel(); ++e) tx.set(e, std::uniform_real_distribution<double>(-1, 1)(rng));
  for (int64_t bn : {16, 32}) {
    auto bound = bind_constexprs(*kernel, {{"BN", bn}});
    std::vector<KernelArg> args(2);
    args[0].tensor = &tx;
    args[1].tensor = &ty;
    run_interp(*bound, args);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < NH; ++c) {
        double want = tx.get(r * N + 2 * c) + (2 * c + 1 < N ? tx.get(r * N + 2 * c + 1) : 0.0);
        ASSERT_FLOAT_EQ(ty.get(r * NH + c), want) << "BN = " << bn << " at " << r << ", " << c;
      }
  }
  // BN = 33 is a candidate, but 33 / 2 leaves a remainder: binding says so at the tile's op.
  try {
    bind_constexprs(*kernel, {{"BN", 33}});
    FAIL() << "BN = 33 bound";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("BuilderTest.cpp:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tile dim BN / 2 with BN = 33: BN / 2 is 33 / 2: '/' in a shape must divide evenly"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera
