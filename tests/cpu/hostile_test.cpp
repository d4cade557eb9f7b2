// The cpu backend under hostile kernels (issue 19): no crash, no silently wrong program count,
// no hang; the run-time rules of docs/semantics.md give the interpreter's located errors.
#include <regex>

#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

// Two programs of 4 MiB tiles (a loaded tile, a product, a sum): 12 MiB of tiles per program,
// more than a thread's stack. The second program is partly outside the view (masked path).
const char* kBigTiles = R"(kernel @big(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %n = dim %x {axis = 1} : i32
    %b = const {value = 1024} : i32
    %b1 = const {value = 1023} : i32
    %t = add %n, %b1 : i32
    %g = div %t, %b : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %a = load_tile %x, %c0, %pid : tile<f32, [1024, 1024]>
  %p = mul %a, %a : tile<f32, [1024, 1024]>
  %s = add %p, %a : tile<f32, [1024, 1024]>
  %r = reduce %s {axis = 1, kind = "sum"} : tile<f32, [1024]>
  %e = expand_dims %r {axis = 1} : tile<f32, [1024, 1]>
  %b = broadcast %e : tile<f32, [1024, 1024]>
  %o = sub %s, %b : tile<f32, [1024, 1024]>
  store_tile %y, %o, %c0, %pid
}
)";

TEST(CpuHostile, TilesPastTheStackBudgetLiveOnTheHeap) {
  auto k = bound(kBigTiles);
  std::string src = emit_cpp(*k);
  EXPECT_NE(src.find("tsr::HeapTile<float, 1048576>"), std::string::npos) << src;
  EXPECT_GT(expect_same_as_interp(*k, {{"M", 1024}, {"N", 1500}}, 19), 2 * 1024 * 1500 - 1);
  // A small tile stays on the stack.
  std::string small = std::regex_replace(std::regex_replace(kBigTiles, std::regex("1024"), "16"), std::regex("1023"), "15");
  EXPECT_EQ(emit_cpp(*bound(small)).find("HeapTile"), std::string::npos);
}


// A value read twice and computed inside its user is repeated in the C++ at each read: a chain
// of `a = a * a - h` doubles its text at every step (20 steps took over 60 s and megabytes to
// emit), and a long chain of adds grew quadratically. Past a cap the value gets its own array:
// the source stays small and the results those of the interpreter.
TEST(CpuHostile, ChainsOfElementwiseOpsEmitInLinearSize) {
  auto chain = [](int steps, bool square) {
    std::string t = R"(kernel @chain(%x: view<f32, [N]>, %y: view<f32, [N]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %a0 = load_tile %x, %c0 : tile<f32, [64]>
  %h0 = const {value = 0.5} : f32
  %h = splat %h0 : tile<f32, [64]>
)";
    for (int i = 0; i < steps; ++i) {
      const std::string a = "%a" + std::to_string(i), s = "%s" + std::to_string(i), b = "%a" + std::to_string(i + 1);
      t += square ? "  " + s + " = mul " + a + ", " + a + " : tile<f32, [64]>\n  " + b + " = sub " + s + ", %h : tile<f32, [64]>\n"
                  : "  " + b + " = add " + a + ", %a0 : tile<f32, [64]>\n";
    }
    return t + "  store_tile %y, %a" + std::to_string(steps) + ", %c0\n}\n";
  };
  auto squares = bound(chain(24, true));
  EXPECT_LT(emit_cpp(*squares).size(), 200000u);
  EXPECT_GT(expect_same_as_interp(*squares, {{"N", 50}}, 3), 49);
  EXPECT_LT(emit_cpp(*bound(chain(3000, false))).size(), 3000u * 400);
  // The same through reshapes, which a value computed inside its user passes (up to 8 between
  // it and its user: the cap counts the value's expression as far; a review found 9 renames a
  // link took 18 links to 5.5 MB of C++ and 28 s). 16 links, each a square read after 8 or 9
  // [64] <-> [1, 64] reshapes.
  for (int renames : {8, 9}) {
    std::string t = chain(0, true);
    t = t.substr(0, t.rfind("  store_tile"));
    std::string cur = "%a0", shape = "[64]";
    for (int i = 0; i < 16; ++i) {
      const std::string q = "%q" + std::to_string(i);
      t += "  " + q + " = mul " + cur + ", " + cur + " : tile<f32, " + shape + ">\n";
      cur = q;
      for (int r = 0; r < renames; ++r) {
        shape = shape == "[64]" ? "[1, 64]" : "[64]";
        const std::string n = "%r" + std::to_string(i) + "_" + std::to_string(r);
        t += "  " + n + " = reshape " + cur + " : tile<f32, " + shape + ">\n";
        cur = n;
      }
    }
    if (shape != "[64]") t += "  %fin = reshape " + cur + " : tile<f32, [64]>\n", cur = "%fin";
    auto renamed = bound(t + "  store_tile %y, " + cur + ", %c0\n}\n");
    EXPECT_LT(emit_cpp(*renamed).size(), 200000u) << renames << " renames a link";
    EXPECT_GT(expect_same_as_interp(*renamed, {{"N", 50}}, 3), 49);
  }
}

// The located error of running `text` on the interpreter and on the cpu backend (each must
// throw; "FILE:LINE:COL: error: message").
// `pipeline`: after the pass pipeline, as `tessera run` compiles it (dce must not take away an
// op that may fail: docs/semantics.md's errors are the program's, whatever the passes do).
std::pair<std::string, std::string> errors_of(const std::string& text, const Sizes& sizes, bool pipeline = false) {
  auto k = bound(text);
  if (pipeline) k = run_pipeline(*k, {});
  std::string e[2];
  for (int b = 0; b < 2; ++b) {
    std::vector<Tensor> ts = make_random_tensors(*k, sizes, 5);
    auto args = args_for(*k, ts);
    try {
      if (b == 0) run_interp(*k, args);
      else compile_cpu(*k, test_options())->run(args);
      e[b] = "(no error)";
    } catch (const TesseraError& err) {
      e[b] = err.what();
    }
  }
  return {e[0], e[1]};
}

// A grid of G0 x G1 x G2 programs; the program at (X, Y, 0) stores 7 into y[0].
std::string grid_kernel(const std::string& g0, const std::string& g1, const std::string& g2,
                        const std::string& x, const std::string& y) {
  return R"(kernel @g(%y: view<i32, [N]>) {
  grid {
    %a = const {value = )" + g0 + R"(} : i32
    %b = const {value = )" + g1 + R"(} : i32
    %c = const {value = )" + g2 + R"(} : i32
    yield %a, %b, %c
  }
  %p0 = program_id {axis = 0} : i32
  %p1 = program_id {axis = 1} : i32
  %x = const {value = )" + x + R"(} : i32
  %yy = const {value = )" + y + R"(} : i32
  %e0 = cmp %p0, %x {pred = "eq"} : i1
  %e1 = cmp %p1, %yy {pred = "eq"} : i1
  %e = and %e0, %e1 : i1
  %r = if %e : i32 {
    %s = const {value = 7} : i32
    %t = splat %s : tile<i32, [1]>
    %c0 = const {value = 0} : i32
    store_tile %y, %t, %c0
    yield %s
  } else {
    yield %x
  }
}
)";
}

TEST(CpuHostile, GridCountsInSixtyFourBits) {
  // 65536 x 65536 programs wrapped to none in a 32-bit count (running 2^32 programs takes
  // seconds, so the count is checked in the code): the collapsed loops count in 64 bits.
  auto k = bound(grid_kernel("65536", "65536", "1", "65535", "65535"));
  std::string src = emit_cpp(*k);
  for (const char* v : {"z = 0; z < g2", "y = 0; y < g1", "x = 0; x < g0"})
    EXPECT_NE(src.find(std::string("for (int64_t ") + v), std::string::npos) << v << "\n" << src;
  EXPECT_NE(src.find("const int64_t g0 = g[0], g1 = g[1], g2 = g[2];"), std::string::npos);
  // The program ids still reach the last program of a large grid.
  std::vector<Tensor> ts = make_random_tensors(*k, {{"N", 1}}, 3);
  ts[0].set_int(0, 123);
  k = bound(grid_kernel("3", "1000003", "1", "2", "1000002"));
  auto args = args_for(*k, ts);
  compile_cpu(*k, test_options())->run(args);
  EXPECT_EQ(ts[0].get_int(0), 7);
  // More than 2^63 - 1 programs: a located error on both backends, before any program runs.
  auto [interp, cpu] = errors_of(grid_kernel("2147483647", "2147483647", "2147483647", "0", "0"), {{"N", 1}});
  EXPECT_EQ(interp, "t.tile:6:5: error: the grid of kernel 'g' has more than 2^63 - 1 programs");
  EXPECT_EQ(cpu, interp);
}

// A kernel over %y with the scalar %n (3 in args_for): GRID are the grid block's ops ending in
// `yield`, BODY the body's.
std::string rule_kernel(const std::string& grid, const std::string& body) {
  return "kernel @r(%y: view<i32, [N]>, %n: i32) {\n  grid {\n" + grid + "  }\n" +
         "  %c0 = const {value = 0} : i32\n  %c7 = const {value = 7} : i32\n" + body +
         "  %t = splat %c7 : tile<i32, [1]>\n  store_tile %y, %t, %c0\n}\n";
}

// docs/semantics.md, "Grid" and "Control flow": each rule gives the same located error on the
// interpreter and the cpu backend; a grid of 0 programs runs nothing and is not an error.
TEST(CpuHostile, RunTimeRulesAreTheInterpretersOnCpu) {
  const std::string zero = "    %z = sub %n, %n : i32\n";
  struct Case {
    std::string text, error;
  } cases[] = {
      {rule_kernel("    %k0 = const {value = 0} : i32\n    %g = sub %k0, %n : i32\n    yield %n, %g\n", ""),
       "t.tile:5:5: error: grid size on axis 1 of kernel 'r' is negative (a size of 0 runs no programs; a negative "
       "size is an error)"},
      {rule_kernel(zero + "    %g = div %n, %z : i32\n    yield %g\n", ""), "t.tile:4:5: error: div by zero"},
      {rule_kernel(zero + "    %g = rem %n, %z : i32\n    yield %g\n", ""), "t.tile:4:5: error: rem by zero"},
      {rule_kernel("    yield %n\n", "  %z = sub %n, %n : i32\n  for %c0, %c7, %z {\n  ^(%i: i32):\n    yield\n  }\n"),
       "t.tile:8:3: error: 'for' step is not positive: a step of 0 or below is an error"},
      {rule_kernel("    yield %n\n", "  %z = sub %c0, %n : i32\n  for %c0, %c7, %z {\n  ^(%i: i32):\n    yield\n  }\n"),
       "t.tile:8:3: error: 'for' step is not positive: a step of 0 or below is an error"},
  };
  for (const Case& c : cases)
    for (bool pipeline : {false, true}) {
      SCOPED_TRACE(c.text + (pipeline ? " (after the pipeline)" : ""));
      auto [interp, cpu] = errors_of(c.text, {{"N", 1}}, pipeline);
      EXPECT_EQ(interp, c.error);
      EXPECT_EQ(cpu, interp);
    }
  // No programs: nothing runs, nothing fails, on either backend.
  auto k = bound(rule_kernel(zero + "    yield %n, %z\n", ""));
  for (int b = 0; b < 2; ++b) {
    std::vector<Tensor> ts = make_random_tensors(*k, {{"N", 1}}, 3);
    ts[0].set_int(0, 123);
    auto args = args_for(*k, ts);
    if (b == 0) run_interp(*k, args);
    else compile_cpu(*k, test_options())->run(args);
    EXPECT_EQ(ts[0].get_int(0), 123) << (b ? "cpu" : "interp");
  }
}

// An endless `while` ends in the interpreter's located error after kMaxWhileIterations
// iterations (2^26: about a tenth of a second here), instead of hanging.
TEST(CpuHostile, EndlessWhileStopsAtTheLimit) {
  std::string text = rule_kernel("    yield %n\n",
                                 "  %c1 = const {value = 1} : i32\n"
                                 "  %r = while %c0 : i32 {\n  ^(%a: i32):\n    %t = cmp %n, %c0 {pred = \"gt\"} : i1\n"
                                 "    yield %t\n  } do {\n  ^(%b: i32):\n    %s = add %b, %c1 : i32\n    yield %s\n  }\n");
  auto k = bound(text);
  std::vector<Tensor> ts = make_random_tensors(*k, {{"N", 1}}, 3);
  auto args = args_for(*k, ts);
  try {
    compile_cpu(*k, test_options())->run(args);
    FAIL() << "an endless while loop ran to completion";
  } catch (const TesseraError& e) {
    EXPECT_EQ(std::string(e.what()), "t.tile:8:3: error: while loop did not end after 67108864 iterations (the limit on every backend)");
  }
  // The same loop with an end runs to it.
  text = std::regex_replace(text, std::regex("cmp %n, %c0"), "cmp %a, %c7");
  text = std::regex_replace(text, std::regex("pred = \"gt\""), "pred = \"lt\"");
  EXPECT_GT(expect_same_as_interp(*bound(text), {{"N", 1}}, 4), 0);
}

}  // namespace
}  // namespace tessera::cputest
