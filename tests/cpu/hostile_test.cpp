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

}  // namespace
}  // namespace tessera::cputest
