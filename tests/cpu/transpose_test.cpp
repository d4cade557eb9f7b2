// 2-D permutes (transposes) on the cpu backend. The emitter prints them as tsr::transpose,
// which moves 4-byte elements in 16 x 16 blocks of vector shuffles when both sides are
// multiples of 16 and in 8 x 8 scalar blocks otherwise (partial blocks at the edges): every
// path against the interpreter, with ragged views so that tiles are also partly out of bounds.
#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

std::string transpose_kernel(const std::string& dtype, int64_t br, int64_t bc) {
  const std::string t = "tile<" + dtype + ", [";
  return "kernel @tr(%x: view<" + dtype + ", [N, M]>, %y: view<" + dtype + ", [M, N]>) {\n"
         "  grid {\n"
         "    %n = dim %x {axis = 0} : i32\n"
         "    %m = dim %x {axis = 1} : i32\n"
         "    %br = const {value = " + std::to_string(br) + "} : i32\n"
         "    %bc = const {value = " + std::to_string(bc) + "} : i32\n"
         "    %gr = cdiv %n, %br : i32\n"
         "    %gc = cdiv %m, %bc : i32\n"
         "    yield %gr, %gc\n"
         "  }\n"
         "  %i = program_id {axis = 0} : i32\n"
         "  %j = program_id {axis = 1} : i32\n"
         "  %t = load_tile %x, %i, %j : " + t + std::to_string(br) + ", " + std::to_string(bc) + "]>\n"
         "  %tt = permute %t {dims = [1, 0]} : " + t + std::to_string(bc) + ", " + std::to_string(br) + "]>\n"
         "  store_tile %y, %tt, %j, %i\n"
         "}\n";
}

struct Case {
  const char* dtype;
  int64_t br, bc;
};

TEST(CpuTranspose, MatchesInterpreterOnEveryPath) {
  const Case cases[] = {{"f32", 16, 16}, {"f32", 64, 128}, {"f32", 32, 48}, {"f32", 3, 5},
                        {"i32", 48, 16}, {"bf16", 64, 32}, {"i8", 32, 32}, {"f64", 16, 24}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.dtype) + " [" + std::to_string(c.br) + ", " + std::to_string(c.bc) + "]");
    auto m = parse_module(transpose_kernel(c.dtype, c.br, c.bc), "t.tile");
    auto k = bind_constexprs(*m->kernels.at(0), {});
    auto compiled = compile_cpu(*k, test_options());
    EXPECT_NE(emit_cpp(*k).find("tsr::transpose<"), std::string::npos);
    for (uint64_t seed : {1, 2})
      EXPECT_GT(expect_same_as_interp(*k, {{"N", 3 * c.br + 1}, {"M", 2 * c.bc + 3}}, seed, compiled), 0);
  }
}

}  // namespace
}  // namespace tessera::cputest
