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


// The located error of running `text` on the interpreter and on the cpu backend (each must
// throw; "FILE:LINE:COL: error: message").
std::pair<std::string, std::string> errors_of(const std::string& text, const Sizes& sizes) {
  auto k = bound(text);
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

}  // namespace
}  // namespace tessera::cputest
