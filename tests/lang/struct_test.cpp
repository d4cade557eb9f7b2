// The Struct layer in the C++ language: shared buffers, async copies, pipes and warp roles build
// the IR the text format describes, compute what the equivalent Lite kernel computes, and
// ill-typed or misplaced calls fail at the user's line.
#include <gtest/gtest.h>

#include <regex>

#include "ExpectError.h"
#include "interp/Interpreter.h"
#include "lang/Lang.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using namespace lang;

void expect_error(int line, const std::string& msg, const std::function<void()>& body) {
  langtest::expect_error_at(__FILE__, line, msg, body);
}

// y = exp(x) row by row, BLOCK columns at a time, through a double-buffered shared buffer
// (Struct) or plain loads (Lite).
std::unique_ptr<Kernel> rows_exp(bool structured) {
  KernelBuilder k(structured ? "rows_exp_struct" : "rows_exp");
  auto x = k.view("x", f32, {"M", "N"}), y = k.view("y", f32, {"M", "N"});
  auto B = k.constexpr_("BLOCK", {16, 32}, 16);
  k.grid({x.dim(0)});
  auto row = program_id(0);
  auto tiles = cdiv(x.dim(1), B);
  if (!structured) {
    for_range(0, tiles, 1, [&](Val j) { y.tile({1, B}).store({row, j}, exp(x.tile({1, B}).load({row, j}))); });
    return k.finish();
  }
  Buffer buf = alloc_shared(f32, {2, 1, B}, Layout::shared(0, 4)).named("buf");
  buf.copy({0}, x.tile({1, B}), {row, 0});
  for_range(0, tiles, 1, [&](Val j) {
    async_wait();
    Val t = buf.read({j % 2});
    if_(j + 1 < tiles, [&] { buf.copy({(j + 1) % 2}, x.tile({1, B}), {row, j + 1}); });
    buf.write({j % 2}, exp(t));
    y.tile({1, B}).store({row, j}, buf.read({j % 2}));
  });
  return k.finish();
}

// y[i] = sum of the tiles of x up to i, with a producer pushing tiles and a consumer adding.
std::unique_ptr<Kernel> prefix_tiles(int stages) {
  KernelBuilder k("prefix_tiles");
  auto x = k.view("x", f32, {"N"}), y = k.view("y", f32, {"N"});
  k.grid({1});
  Pipe p = pipe(f32, {8}, stages);
  Var acc = zeros({8}, f32);
  for_range(0, cdiv(x.dim(0), 8), 1, [&](Val i) {
    warp_role(producer, [&] { p.push(x.tile({8}), {i}); });
    warp_role("consumer", [&] {
      acc = acc + p.pop();
      y.tile({8}).store({i}, acc);
    });
  });
  return k.finish();
}

std::vector<Tensor> run(const Kernel& k, const Sizes& s, uint64_t seed) {
  auto b = bind_constexprs(k, {});
  std::vector<Tensor> ts = make_random_tensors(*b, s, seed);
  std::vector<KernelArg> a = make_args(*b, ts, s);
  run_interp(*b, a);
  return ts;
}

TEST(LangStruct, DoubleBufferedKernelBuildsTheStructOps) {
  auto k = rows_exp(true);
  std::string text = print_kernel(*k);
  for (const char* want : {"%buf = alloc : buffer<f32, [2, 1, BLOCK], layout = shared<swizzle = 0, pad = 4>, space = \"shared\">",
                           "async_copy %", "async_wait", "buffer_read %", "buffer_write %"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  auto again = parse_module(text, "k.tile");
  EXPECT_EQ(print_kernel(*again->kernels.at(0)), text);
}

TEST(LangStruct, DoubleBufferedIsTheLiteKernel) {
  auto s = rows_exp(true), l = rows_exp(false);
  for (const Sizes& sz : {Sizes{{"M", 3}, {"N", 50}}, Sizes{{"M", 1}, {"N", 1}}, Sizes{{"M", 2}, {"N", 32}}}) {
    auto a = run(*s, sz, 4), b = run(*l, sz, 4);
    EXPECT_EQ(a[1].data, b[1].data) << "N=" << sz.at("N");
  }
}

TEST(LangStruct, RolesAndPipesBuildAndRun) {
  auto k = prefix_tiles(2);
  std::string text = print_kernel(*k);
  for (const char* want : {"pipe : pipe<f32, [2, 8]>", "warp_role {role = \"producer\"} {",
                           "= warp_role {role = \"consumer\"} : tile<f32, [8]> {", "pipe_push %", "pipe_pop %"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  auto ts = run(*k, {{"N", 21}}, 2);
  double acc[8] = {};
  for (int64_t i = 0; i < 21; ++i) {
    acc[i % 8] += ts[0].get(i);
    EXPECT_NEAR(ts[1].get(i), acc[i % 8], 1e-6) << i;
  }
}

TEST(LangStruct, StagesMayBeAConstexpr) {
  KernelBuilder k("c");
  auto x = k.view("x", f32, {"N"});
  auto S = k.constexpr_("STAGES", {2, 3}, 3);
  k.grid({1});
  Pipe p = pipe(f32, {4, 4}, S);
  EXPECT_EQ(p.ir()->type.str(), "pipe<f32, [STAGES, 4, 4]>");
  EXPECT_EQ(shape_str(p.slot_shape()), "[4, 4]");
  p.push(x.tile({4}).load({0}));  // a row, broadcast to the slot shape
  p.pop();
  EXPECT_NO_THROW(k.finish());
}

TEST(LangStructErrors, StorageOnlyAtTheTopLevel) {
  KernelBuilder k("e");
  k.grid({1});
  for_range(0, 2, 1, [&](Val) {
    expect_error(__LINE__ + 2, "alloc_shared must be called at the top level of the kernel body (not inside for_range, if_, "
                           "while_ or warp_role): its storage lives for the whole program",
                 [&] { alloc_shared(f32, {4}); });
    expect_error(__LINE__ + 2, "pipe must be called at the top level of the kernel body (not inside for_range, if_, "
                           "while_ or warp_role): its storage lives for the whole program",
                 [&] { pipe(f32, {4}, 2); });
  });
}

TEST(LangStructErrors, RolesPushAndPopOnTheirSide) {
  KernelBuilder k("e");
  auto x = k.view("x", f32, {"N"});
  k.grid({1});
  Pipe p = pipe(f32, {4}, 2);
  warp_role(producer, [&] {
    expect_error(__LINE__, "pop inside warp_role(producer): only consumers pop pipes", [&] { p.pop(); });
  });
  warp_role(consumer, [&] {
    expect_error(__LINE__ + 1, "push inside warp_role(consumer): only producers push pipes",
                 [&] { p.push(x.tile({4}), {0}); });
    expect_error(__LINE__ + 1, "warp_role(producer) inside warp_role(consumer): roles do not nest",
                 [&] { warp_role(producer, [] {}); });
  });
  expect_error(__LINE__ + 1, "warp_role takes \"producer\" or \"consumer\", got \"worker\"",
               [&] { warp_role("worker", [] {}); });
  Var v = zeros({4}, f32);
  expect_error(__LINE__ + 2, "warp_role(producer) assigns a Var declared outside it: a producer hands data on only "
                         "through pipes (declare the Var inside the region if it is local)",
               [&] { warp_role(producer, [&] { v = v + 1.0f; }); });
}

TEST(LangStructErrors, ShapesOfCopiesPushesAndSlots) {
  KernelBuilder k("e");
  auto x = k.view("x", f32, {"M", "N"});
  auto n = k.view("n", i32, {"N"});
  k.grid({1});
  Buffer buf = alloc_shared(f32, {2, 4, 8});
  Pipe p = pipe(f32, {4, 8}, 2);
  expect_error(__LINE__ + 2, "copy of tiles of shape [8, 4] into buffer<f32, [2, 4, 8], space = \"shared\">: a slot "
                         "holds the buffer's trailing dims [4, 8]",
               [&] { buf.copy({0}, x.tile({8, 4}), {0, 0}); });
  expect_error(__LINE__ + 2, "copy of view 'n' of i32 into buffer<f32, [2, 4, 8], space = \"shared\"> (the element types "
                         "must match)",
               [&] { buf.copy({0}, n.tile({8}), {0}); });
  expect_error(__LINE__ + 2, "copy of buffer<f32, [2, 4, 8], space = \"shared\"> with a rank-2 tile needs 1 slot index, got "
                         "2",
               [&] { buf.copy({0, 1}, x.tile({4, 8}), {0, 0}); });
  expect_error(__LINE__ + 2, "read of buffer<f32, [2, 4, 8], space = \"shared\"> with 3 slot indices leaves no tile (give "
                         "fewer indices than the buffer's rank)",
               [&] { buf.read({0, 0, 0}); });
  expect_error(__LINE__ + 2, "push of tiles tile<f32, [8, 8]> of view 'x' into pipe<f32, [2, 4, 8]> (a slot holds "
                         "tile<f32, [4, 8]>)",
               [&] { p.push(x.tile({8, 8}), {0, 0}); });
  expect_error(__LINE__ + 1, "push of a tile<i32, [4, 8]> into pipe<f32, [2, 4, 8]> (convert with .to())",
               [&] { p.push(zeros({4, 8}, i32)); });
  expect_error(__LINE__, "pipe needs at least one stage, got 0", [&] { pipe(f32, {4}, 0); });
  expect_error(__LINE__, "alloc_shared dims must be positive, got [4, 0]", [&] { alloc_shared(f32, {4, 0}); });
}

// The kernel-wide rules are the verifier's: finish() reports them at the user's call.
TEST(LangStructErrors, UnbalancedPipeIsReportedAtFinish) {
  KernelBuilder k("e");
  auto x = k.view("x", f32, {"N"});
  k.grid({1});
  int line = __LINE__ + 1;
  Pipe p = pipe(f32, {4}, 2).named("p");
  for_range(0, cdiv(x.dim(0), 4), 1, [&](Val i) {
    p.push(x.tile({4}), {i});
    p.push(x.tile({4}), {i});
    p.pop();
  });
  try {
    k.finish();
    ADD_FAILURE() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_EQ(e.loc().line, line);
    // The loop's column is where the compiler puts for_range's call site.
    EXPECT_TRUE(std::regex_match(e.message(), std::regex("'pipe' %p is pushed 2 times and popped 1 time per iteration "
                                                         "of the loop at " + std::to_string(line + 1) +
                                                         ":[0-9]+: every pushed tile must be popped")))
        << e.message();
  }
}

}  // namespace
}  // namespace tessera
