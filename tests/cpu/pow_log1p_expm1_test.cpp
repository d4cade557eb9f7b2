// pow, log1p and expm1 on the cpu backend against the interpreter, for every float width the
// backend computes in float (f32, bf16, f16) or double (f64), at a ragged size (the last tile is
// partly out of bounds).
#include <regex>

#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

// x and y are random in [-1, 1): pow gets positive bases with real exponents and bases of both
// signs with integer exponents (so not every result is NaN); expm1 gets (-4, 4). o5 and o6 are
// log1p and expm1 of x * SMALL scaled back by LARGE = 1 / SMALL (1e-6; 1e-4 for f16, whose max
// is 65504): log(1 + x) or exp(x) - 1 would be off there by far more than the tolerance.
const char* kMath = R"(kernel @powlog(%x: view<T, [N]>, %y: view<T, [N]>, %o1: view<T, [N]>, %o2: view<T, [N]>, %o3: view<T, [N]>, %o4: view<T, [N]>, %o5: view<T, [N]>, %o6: view<T, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 32} : i32
    %b1 = const {value = 31} : i32
    %t = add %n, %b1 : i32
    %g = div %t, %b : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %a = load_tile %x, %pid {pad = 0.5} : tile<T, [32]>
  %b = load_tile %y, %pid {pad = 0.25} : tile<T, [32]>
  %four = const {value = 4.0} : T
  %fours = splat %four : tile<T, [32]>
  %tiny = const {value = 0.01} : T
  %tinys = splat %tiny : tile<T, [32]>
  %ab = abs %a : tile<T, [32]>
  %ab4 = mul %ab, %fours : tile<T, [32]>
  %base = add %ab4, %tinys : tile<T, [32]>
  %ex = mul %b, %fours : tile<T, [32]>
  %p1 = pow %base, %ex : tile<T, [32]>
  store_tile %o1, %p1, %pid
  %sb = mul %a, %fours : tile<T, [32]>
  %ie = floor %ex : tile<T, [32]>
  %p2 = pow %sb, %ie : tile<T, [32]>
  store_tile %o2, %p2, %pid
  %l = log1p %a : tile<T, [32]>
  store_tile %o3, %l, %pid
  %e = expm1 %ex : tile<T, [32]>
  store_tile %o4, %e, %pid
  %micro = const {value = SMALL} : T
  %micros = splat %micro : tile<T, [32]>
  %mega = const {value = LARGE} : T
  %megas = splat %mega : tile<T, [32]>
  %sm = mul %a, %micros : tile<T, [32]>
  %ls = log1p %sm : tile<T, [32]>
  %lsm = mul %ls, %megas : tile<T, [32]>
  store_tile %o5, %lsm, %pid
  %es = expm1 %sm : tile<T, [32]>
  %esm = mul %es, %megas : tile<T, [32]>
  store_tile %o6, %esm, %pid
}
)";

std::unique_ptr<Kernel> kernel_for(const char* dt) {
  bool f16 = std::string(dt) == "f16";
  std::string text = std::regex_replace(kMath, std::regex(R"(\bT\b)"), dt);
  text = std::regex_replace(text, std::regex("SMALL"), f16 ? "0.0001" : "1e-06");
  text = std::regex_replace(text, std::regex("LARGE"), f16 ? "10000.0" : "1000000.0");
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

TEST(CpuPowLog1pExpm1, MatchTheInterpreter) {
  uint64_t seed = 70;
  for (const char* dt : {"f32", "bf16", "f16", "f64"}) {
    SCOPED_TRACE(dt);
    auto k = kernel_for(dt);
    for (int64_t n : {1, 45, 161}) EXPECT_EQ(expect_same_as_interp(*k, {{"N", n}}, seed++), 8 * n);
  }
}

}  // namespace
}  // namespace tessera::cputest
