// Ill-typed builder programs fail at once with a TesseraError located at the user's line.
#include <gtest/gtest.h>


#include "ExpectError.h"
#include "lang/Lang.h"

namespace tessera {
namespace {

using namespace lang;

// Runs `body`, which must throw a TesseraError `THIS_FILE:line:COL: error: msg` (any column).
void expect_error(int line, const std::string& msg, const std::function<void()>& body) {
  langtest::expect_error_at(__FILE__, line, msg, body);
}

// A builder with a 2-D f32 view x [M, N], a 1-D i32 view n [N] and a grid, ready for ops.
struct Env {
  KernelBuilder k{"err"};
  View x = k.view("x", f32, {"M", "N"});
  View n = k.view("n", i32, {"N"});
  Env() { k.grid({1}); }
};

TEST(BuilderErrors, ShapesThatCannotBroadcast) {
  Env e;
  auto a = zeros({4, 8}, f32), b = zeros({3, 8}, f32);
  expect_error(__LINE__ + 1, "operands of add cannot be broadcast together: tile<f32, [4, 8]> and tile<f32, [3, 8]>",
               [&] { a + b; });
}

TEST(BuilderErrors, MixedElementTypes) {
  Env e;
  auto a = zeros({4}, f32), b = zeros({4}, i32);
  expect_error(__LINE__ + 1, "operands of mul have different element types f32 and i32 (convert one with .to())",
               [&] { a * b; });
}

TEST(BuilderErrors, FloatMathOnIntegers) {
  Env e;
  auto t = e.n.tile({16}).load({0});
  expect_error(__LINE__, "exp needs float operands, got tile<i32, [16]>", [&] { exp(t); });
}

TEST(BuilderErrors, BitwiseOnFloats) {
  Env e;
  auto t = zeros({4}, f32);
  expect_error(__LINE__, "and needs integer or i1 operands, got tile<f32, [4]>", [&] { t & t; });
}

TEST(BuilderErrors, BitcastBetweenWidths) {
  Env e;
  auto t = zeros({4}, f32);
  const char* widths = "bitcast needs element types of the same width, got f32 (32 bits) to i16 (16 bits)";
  expect_error(__LINE__, widths, [&] { bitcast(t, i16); });
  auto b = zeros({4}, i1);
  expect_error(__LINE__, "bitcast has no i1 form (use cast), got i1 to u8", [&] { bitcast(b, u8); });
}

TEST(BuilderErrors, TopkAndSortOperands) {
  Env e;
  auto t = zeros({4, 16}, f32);
  expect_error(__LINE__, "topk k = 32 must be in [1, 16], the size of axis 1 of tile<f32, [4, 16]>", [&] { topk(t, 32, 1); });
  auto f = zeros({4, 16}, f32);
  const char* idx = "sort_pairs needs an i32 index tile of the keys' shape [4, 16], got tile<f32, [4, 16]>";
  expect_error(__LINE__, idx, [&] { sort_pairs(t, f, 1); });
  auto b = zeros({4}, i1);
  expect_error(__LINE__, "sort needs numeric keys, got tile<i1, [4]> (cast to i8 first)", [&] { sort(b, 0); });
}

TEST(BuilderErrors, FloatLiteralWithIntegerOperand) {
  Env e;
  auto pid = program_id(0);
  expect_error(__LINE__ + 1, "float literal 0.5 used with an integer operand of type i32",
               [&] { pid * 0.5; });
  expect_error(__LINE__ + 1, "loop upper bound must be an i32 scalar, got the float literal 2.5",
               [&] { for_range(0, 2.5, 1, [](Val) {}); });
}

TEST(BuilderErrors, DotInnerDimsDiffer) {
  Env e;
  auto a = zeros({16, 32}, bf16), b = zeros({16, 8}, bf16);
  expect_error(__LINE__, "dot: inner dims differ: a is [16, 32], b is [16, 8]", [&] { dot(a, b); });
}

TEST(BuilderErrors, DotNeedsMatrices) {
  Env e;
  auto a = zeros({16}, f32);
  expect_error(__LINE__ + 1, "dot needs 2-D tiles, got tile<f32, [16]> and tile<f32, [16]>",
               [&] { dot(a, a); });
}

TEST(BuilderErrors, DotAccumulatorType) {
  Env e;
  auto a = zeros({16, 16}, bf16);
  auto acc = zeros({16, 16}, bf16);
  expect_error(__LINE__, "dot of bf16 inputs cannot accumulate in bf16", [&] { dot(a, a, acc); });
}

TEST(BuilderErrors, LoadWithWrongNumberOfIndices) {
  Env e;
  expect_error(__LINE__ + 1, "load of view 'x' (rank 2) needs 2 tile indices, got 1",
               [&] { e.x.tile({1, 16}).load({0}); });
}

TEST(BuilderErrors, TileRankDiffersFromView) {
  Env e;
  expect_error(__LINE__ + 1, "view 'x' has rank 2 but the tile shape [16] has rank 1",
               [&] { e.x.tile({16}); });
}

TEST(BuilderErrors, StoreOfAnotherElementType) {
  Env e;
  auto t = zeros({1, 16}, bf16);
  expect_error(__LINE__ + 1, "store of a tile<bf16, [1, 16]> into view 'x' of f32 (convert with .to())",
               [&] { e.x.tile({1, 16}).store({0, 0}, t); });
}

TEST(BuilderErrors, StoreOfAnotherShape) {
  Env e;
  auto t = zeros({2, 16}, f32);
  expect_error(__LINE__ + 1, "store of a tile<f32, [2, 16]> into tiles of shape [1, 16]",
               [&] { e.x.tile({1, 16}).store({0, 0}, t); });
}

TEST(BuilderErrors, TileIndexMustBeI32) {
  Env e;
  auto f = zeros({}, f32);
  expect_error(__LINE__ + 1, "load index must be an i32 scalar, got f32",
               [&] { e.x.tile({1, 16}).load({0, f}); });
}

TEST(BuilderErrors, ReduceAxisOutOfRange) {
  Env e;
  auto t = zeros({4, 8}, f32);
  expect_error(__LINE__, "sum: axis 2 is out of range for rank 2", [&] { sum(t, 2); });
}

TEST(BuilderErrors, WhereNeedsBoolCondition) {
  Env e;
  auto t = zeros({4}, f32);
  expect_error(__LINE__, "where needs an i1 condition, got tile<f32, [4]>", [&] { where(t, t, t); });
}

TEST(BuilderErrors, ReshapeChangesElementCount) {
  Env e;
  auto t = zeros({4, 8}, f32);
  expect_error(__LINE__ + 1, "reshape of tile<f32, [4, 8]> to [30] changes the number of elements",
               [&] { reshape(t, {30}); });
}

TEST(BuilderErrors, PermuteNeedsAPermutation) {
  Env e;
  auto t = zeros({4, 8}, f32);
  expect_error(__LINE__, "permute dims [0, 0] are not a permutation of 0..1", [&] { permute(t, {0, 0}); });
}

TEST(BuilderErrors, ProgramIdAxis) {
  Env e;
  expect_error(__LINE__, "program_id axis must be 0, 1 or 2, got 3", [&] { program_id(3); });
}

TEST(BuilderErrors, ConstexprDefaultNotACandidate) {
  KernelBuilder k("cx");
  expect_error(__LINE__ + 1, "constexpr 'B' default 3 is not one of its candidates",
               [&] { k.constexpr_("B", {1, 2}, 3); });
}

TEST(BuilderErrors, DuplicateParameter) {
  KernelBuilder k("dup");
  k.view("x", f32, {"N"});
  expect_error(__LINE__, "parameter 'x' is declared twice", [&] { k.scalar("x", f32); });
}

TEST(BuilderErrors, GridCannotUseProgramId) {
  KernelBuilder k("grid");
  auto pid = program_id(0);
  expect_error(__LINE__ + 3,
               "grid sizes can only use dims, constexprs, scalar parameters, constants and scalar "
               "arithmetic, not 'program_id'",
               [&] { k.grid({pid + 1}); });
}

TEST(BuilderErrors, FinishWithoutGrid) {
  KernelBuilder k("nogrid");
  expect_error(__LINE__, "kernel 'nogrid' has no grid (call grid({...}))", [&] { k.finish(); });
}

TEST(BuilderErrors, VarChangesTypeInLoop) {
  Env e;
  Var acc = zeros({4}, f32);
  expect_error(__LINE__ + 1, "a Var changes type in the loop body from tile<f32, [4]> to tile<bf16, [4]> (carried values keep their type; convert with .to())",
               [&] { for_range(0, 4, 1, [&](Val) { acc = acc.to(bf16); }); });
}

TEST(BuilderErrors, LoopValueUsedAfterTheLoop) {
  Env e;
  Val inside;
  for_range(0, 4, 1, [&](Val i) { inside = i * 2; });
  expect_error(__LINE__ + 3,
               "value used outside the loop or branch that defines it (assign it to a Var declared "
               "before the loop or branch to carry it out)",
               [&] { inside + 1; });
}

TEST(BuilderErrors, ErrorInsideALoopBodyPointsAtTheBodyLine) {
  Env e;
  expect_error(__LINE__ + 2, "log needs float operands, got i32", [&] {
    for_range(0, 4, 1, [&](Val i) {
      log(i);
    });
  });
}

TEST(BuilderErrors, IfConditionMustBeBool) {
  Env e;
  expect_error(__LINE__, "if_ needs an i1 scalar condition, got i32", [&] { if_(program_id(0), [] {}); });
}

TEST(BuilderErrors, CombinerMustReturnAScalar) {
  Env e;
  auto t = zeros({4, 4}, f32);
  expect_error(__LINE__ + 1, "the combiner must return a f32 scalar, got tile<f32, [4, 4]>",
               [&] { reduce(t, 0, [&](Val, Val) { return t; }); });
}

TEST(BuilderErrors, NoActiveBuilder) {
  expect_error(__LINE__ + 1, "no KernelBuilder is active on this thread (create one first)",
               [&] { program_id(0); });
}

TEST(BuilderErrors, RawWithUnknownBackend) {
  Env e;
  expect_error(__LINE__ + 1, "raw op 'f': unknown backend 'ptx' (use cpp or cuda)",
               [&] { raw("f", {}, {}, {{"ptx", "nop"}}); });
}

TEST(BuilderErrors, OneElementTileWhereAScalarIsNeeded) {
  Env e;
  auto stat = max(e.x.tile({1, 16}).load({0, 0}), 1);  // tile<f32, [1]>
  const std::string hint = " (item(x) makes a scalar of a one-element tile)";
  expect_error(__LINE__ + 1, "if_ needs an i1 scalar condition, got tile<i1, [1]>" + hint,
               [&] { if_(stat > 0.0, [] {}); });
  auto n = e.n.tile({1}).load({0});
  expect_error(__LINE__ + 1, "loop upper bound must be an i32 scalar, got tile<i32, [1]>" + hint,
               [&] { for_range(0, n, 1, [](Val) {}); });
  expect_error(__LINE__, "reshape needs a non-empty shape" + hint, [&] { reshape(n, {}); });
  expect_error(__LINE__ + 1, "item needs a tile of one element (every dim a static 1), got tile<f32, [1, 16]>",
               [&] { item(e.x.tile({1, 16}).load({0, 0})); });
}

TEST(BuilderErrors, FillValuesOfIntegerTypesAreIntegers) {
  Env e;
  expect_error(__LINE__, "full: -inf is not a value of integer type i32", [&] { full({4}, -inf, i32); });
  expect_error(__LINE__, "full: 1e+30 is not a value of integer type i32", [&] { full({4}, 1e30, i32); });
  expect_error(__LINE__ + 1, "pad 1e+30 is not a value of integer type i32",
               [&] { e.n.tile({4}).load({0}, 1e30); });
}

TEST(BuilderErrors, ReductionsOfFlagsSayHowToCount) {
  Env e;
  auto flags = e.x.tile({1, 16}).load({0, 0}) > 0.0;
  expect_error(__LINE__ + 2,
               "sum needs numeric operands, got tile<i1, [1, 16]> (cast to i32 first with .to(i32); an i1 sum would wrap modulo 2)",
               [&] { sum(flags, 1); });
}

}  // namespace
}  // namespace tessera
