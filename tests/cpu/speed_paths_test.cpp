// The cpu emitter's speed paths (issue 19), each against the interpreter: exact casts that
// alias their operand, narrow casts rounded once by the store, dots accumulated in place into
// the carried array, small grids run without OpenMP, and a warm cache hit that runs no
// process.
#include <sys/stat.h>
#include <sys/time.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "CpuTestUtil.h"
#include "cpu/CpuInternal.h"
#include "kernels/Library.h"

namespace tessera::cputest {
namespace {

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

// %c is an exact cast of the carried %a (the same array): it is read after %n is computed, so
// %n must not be written into the carried array.
const char* kAliasOfCarried = R"(kernel @aliascarried(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>, %s: view<f32, [M, 32]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %nn = dim %x {axis = 1} : i32
  %cb = const {value = 32} : i32
  %tiles = cdiv %nn, %cb : i32
  %z = const {value = 0.0} : f32
  %acc0 = splat %z : tile<f32, [1, 32]>
  %acc = for %c0, %tiles, %c1, %acc0 : tile<f32, [1, 32]> {
    ^(%j: i32, %a: tile<f32, [1, 32]>):
    %t = load_tile %x, %pid, %j : tile<f32, [1, 32]>
    %c = cast %a : tile<f32, [1, 32]>
    %n = add %a, %t : tile<f32, [1, 32]>
    %d = mul %c, %c : tile<f32, [1, 32]>
    %e = add %d, %c : tile<f32, [1, 32]>
    store_tile %y, %e, %pid, %j
    yield %n
  }
  store_tile %s, %acc, %pid, %c0
}
)";

TEST(CpuSpeedPaths, ExactCastAliasesItsOperandAndKeepsTheCarriedValue) {
  auto k = bound(kAliasOfCarried);
  std::string src = emit_cpp(*k);
  EXPECT_NE(src.find("the same array as its operand"), std::string::npos) << src;
  EXPECT_EQ(src.find("written into the carried"), std::string::npos) << src;
  expect_same_as_interp(*k, {{"M", 3}, {"N", 100}}, 41);
}

// bf16 row kernels: the row is read in place (tsr::bf16_row: a pointer into the view, or to a
// bf16 copy padded with -inf when the row is shorter than the tile) and the bf16 -> f32 cast is
// that row itself (ragged rows and whole ones).
TEST(CpuSpeedPaths, Bf16SoftmaxRaggedRows) {
  auto m = parse_module(R"(kernel @rows(%x: view<bf16, [M, N]>, %y: view<bf16, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %pid, %c0 {pad = -inf} : tile<bf16, [1, 128]>
  %f = cast %t : tile<f32, [1, 128]>
  %mx = reduce %f {axis = 1, kind = "max"} : tile<f32, [1]>
  %e1 = expand_dims %mx {axis = 0} : tile<f32, [1, 1]>
  %b = broadcast %e1 : tile<f32, [1, 128]>
  %d = sub %f, %b : tile<f32, [1, 128]>
  %h = cast %d : tile<bf16, [1, 128]>
  store_tile %y, %h, %pid, %c0
}
)", "t.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  std::string src = emit_cpp(*k);
  EXPECT_NE(src.find("the same array as its operand"), std::string::npos) << src;
  EXPECT_NE(src.find("tsr::bf16_row v"), std::string::npos) << src;
  EXPECT_EQ(src.find("tsr::bf2f(A.p0["), std::string::npos) << "no float copy of the row:\n" << src;
  for (int64_t n : {100, 128, 300}) expect_same_as_interp(*k, {{"M", 5}, {"N", n}}, 42 + n);
  expect_same_as_interp(*k, {{"M", 2}, {"N", 128}}, 43);
}

// A bf16 row read in place and renamed by shape ops before a ragged store: the store reads it
// as a tsr::bf16_row (element by element), not through tsr::store_row's pointer, which did not
// compile (the reshape's name lost the row's form).
TEST(CpuSpeedPaths, Bf16RowReshapedBeforeARaggedStore) {
  auto m = parse_module(R"(kernel @rr(%x: view<bf16, [M, N]>, %y: view<bf16, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %pid, %c0 {pad = 0.0} : tile<bf16, [1, 128]>
  %e = expand_dims %t {axis = 0} : tile<bf16, [1, 1, 128]>
  %r = reshape %e : tile<bf16, [1, 128]>
  store_tile %y, %r, %pid, %c0
}
)", "t.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  EXPECT_NE(emit_cpp(*k).find("tsr::bf16_row v"), std::string::npos);
  for (int64_t n : {100, 128}) expect_same_as_interp(*k, {{"M", 3}, {"N", n}}, 47 + n);
}

// f32 values stored as a narrow float through a cast that only the store reads: one rounding
// (the store's), bit for bit the interpreter's on ties to even, just beside ties, NaN, inf,
// overflow, -0 and subnormals.
std::string narrow_store_kernel(const char* dt) {
  return std::string(R"(kernel @narrow(%x: view<f32, [N]>, %y: view<)") + dt + R"(, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %c = const {value = 64} : i32
    %g = cdiv %n, %c : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %t = load_tile %x, %pid : tile<f32, [64]>
  %h = cast %t : tile<)" + dt + R"(, [64]>
  store_tile %y, %h, %pid
}
)";
}

TEST(CpuSpeedPaths, NarrowCastRoundedOnceByTheStoreOnTies) {
  const std::vector<uint32_t> bits = {
      0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0xbf808000u, 0xbf818000u,  // ties, beside
      0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u,              // max, inf
      0x7fc00001u, 0xffc12345u, 0x7f800001u, 0x80000000u, 0x00000000u,              // NaN, -0, 0
      0x00008000u, 0x00018000u, 0x80008000u, 0x00000001u, 0x007fffffu, 0x00800000u,  // subnormals
      0x3a001000u, 0x38800000u, 0x33800000u, 0x477fe000u, 0x477ff000u, 0x43f00000u,  // f16/f8 ties
  };
  for (const char* dt : {"bf16", "f16", "f8e4m3"}) {
    auto k = bound(narrow_store_kernel(dt));
    std::string src = emit_cpp(*k);
    EXPECT_EQ(src.find("tsr::rbf16"), std::string::npos) << dt << ": rounded twice\n" << src;
    EXPECT_EQ(src.find("tsr::rf16"), std::string::npos) << dt;
    const int64_t n = 100;  // a second, partial tile
    std::vector<Tensor> want = make_random_tensors(*k, {{"N", n}}, 44);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t b = bits[static_cast<size_t>(i) % bits.size()] ^ (i >= static_cast<int64_t>(bits.size()) ? 0x10000u * (i % 3) : 0);
      std::memcpy(want[0].data.data() + 4 * i, &b, 4);
    }
    std::vector<Tensor> got = want;
    auto wa = args_for(*k, want), ga = args_for(*k, got);
    run_interp(*k, wa);
    compile_cpu(*k, test_options())->run(ga);
    ASSERT_EQ(want[1].data.size(), got[1].data.size());
    for (size_t i = 0; i < got[1].data.size(); ++i)
      EXPECT_EQ(int(want[1].data[i]), int(got[1].data[i])) << dt << " byte " << i;
  }
}

// acc = dot(a, b, acc) over a K loop: into the carried array in place; with the carried value
// as an operand of the dot itself, a copy (reading and writing one array would be wrong).
std::string dot_loop(bool acc_is_operand) {
  return std::string(R"(kernel @dotloop(%a: view<f32, [M, K]>, %b: view<f32, [K, N]>, %c: view<f32, [M, N]>) {
  grid {
    %m = dim %a {axis = 0} : i32
    %c16 = const {value = 16} : i32
    %g = cdiv %m, %c16 : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %kk = dim %a {axis = 1} : i32
  %c16 = const {value = 16} : i32
  %tiles = cdiv %kk, %c16 : i32
  %z = const {value = 0.0} : f32
  %acc0 = splat %z : tile<f32, [16, 16]>
  %acc = for %c0, %tiles, %c1, %acc0 : tile<f32, [16, 16]> {
    ^(%j: i32, %r: tile<f32, [16, 16]>):
    %at = load_tile %a, %pid, %j : tile<f32, [16, 16]>
    %bt = load_tile %b, %j, %c0 : tile<f32, [16, 16]>
    %n = dot )") + (acc_is_operand ? "%r" : "%at") + R"(, %bt, %r : tile<f32, [16, 16]>
    yield %n
  }
  store_tile %c, %acc, %pid, %c0
}
)";
}

TEST(CpuSpeedPaths, DotAccumulatesIntoTheCarriedArray) {
  auto k = bound(dot_loop(false));
  EXPECT_NE(emit_cpp(*k).find("accumulated in place into the carried"), std::string::npos);
  expect_same_as_interp(*k, {{"M", 37}, {"K", 45}, {"N", 16}}, 45);
  auto k2 = bound(dot_loop(true));
  EXPECT_EQ(emit_cpp(*k2).find("accumulated in place"), std::string::npos);
  expect_same_as_interp(*k2, {{"M", 37}, {"K", 16}, {"N", 16}}, 46);  // K = 16: the dot of %r runs once
}

// A raw op reports how many threads run the program: 1 for a grid of little work (no OpenMP
// team is woken), the requested 2 for a grid of many programs.
TEST(CpuSpeedPaths, SmallGridsRunOnTheCallingThread) {
  auto k = bound(R"(kernel @threads(%y: view<i32, [N]>) {
  grid {
    %n = dim %y {axis = 0} : i32
    yield %n
  }
  %pid = program_id {axis = 0} : i32
  %z = const {value = 0} : i32
  %r = raw %z {name = "threads", cpp = "out0 = omp_get_num_threads();"} : i32
  %t = splat %r : tile<i32, [1]>
  store_tile %y, %t, %pid
}
)");
  CpuOptions o = test_options();
  o.num_threads = 2;
  auto ck = compile_cpu(*k, o);
  for (int64_t n : {int64_t{3}, int64_t{1} << 20}) {
    std::vector<Tensor> ts = make_random_tensors(*k, {{"N", n}}, 47);
    auto args = args_for(*k, ts);
    ck->run(args);
    int64_t most = 0;
    for (int64_t i = 0; i < n; ++i) most = std::max<int64_t>(most, static_cast<int64_t>(ts[0].get(i)));
    EXPECT_EQ(most, n == 3 ? 1 : 2) << "N = " << n;
  }
}

// A compiler wrapper that logs its arguments: a warm hit runs it not at all; a compiler whose
// binary changed (its mtime) misses the cache.
TEST(CpuSpeedPaths, WarmHitRunsNoProcessAndACompilerChangeMisses) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(test_cache_dir()) / "cxx-wrapper";
  fs::create_directories(dir);
  fs::path log = dir / "calls.log", cxx = dir / "cxx";
  fs::remove(log);
  {
    std::ofstream w(cxx);
    w << "#!/bin/sh\necho \"$1\" >> '" << log.string() << "'\nexec c++ \"$@\"\n";
  }
  fs::permissions(cxx, fs::perms::owner_all);
  auto calls = [&] {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  auto k = bound(kAliasOfCarried);
  CpuOptions o = test_options();
  o.cache_dir = (dir / "cache").string();
  o.compiler = cxx.string();
  clear_cpu_memory_cache();
  auto first = compile_cpu(*k, o);
  EXPECT_FALSE(first->from_disk_cache);
  std::string after_build = calls();
  EXPECT_NE(after_build.find("--version"), std::string::npos) << after_build;
  clear_cpu_memory_cache();
  EXPECT_TRUE(compile_cpu(*k, o)->from_disk_cache);
  EXPECT_EQ(calls(), after_build) << "a warm hit ran the compiler";
  struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};  // another mtime: another compiler
  ASSERT_EQ(::utimes(cxx.c_str(), tv), 0);
  clear_cpu_memory_cache();
  auto again = compile_cpu(*k, o);
  EXPECT_FALSE(again->from_disk_cache);
  expect_same_as_interp(*k, {{"M", 2}, {"N", 40}}, 48, again);
  clear_cpu_memory_cache();
}

// Softmax of every other row (row = 2 * pid, computed in an `if`): the load's and the store's
// indices are pure functions of the program id, so the next program's rows are prefetched (y's
// for writing), in the exp loop (the costliest loop after x's first read, the max). M = 7 leaves the last program without a
// next one; N = 500 puts every tile partly outside the view (padded, nothing prefetched); N =
// 700 puts it inside.
const char* kPrefetchRows = R"(kernel @pfrows(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    %c2 = const {value = 2} : i32
    %g = cdiv %m, %c2 : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %nn = dim %x {axis = 1} : i32
  %c0 = const {value = 0} : i32
  %some = cmp %nn, %c0 {pred = "gt"} : i1
  if %some {
    %two = const {value = 2} : i32
    %row = mul %pid, %two : i32
    %t = load_tile %x, %row, %c0 {pad = -inf} : tile<f32, [1, 512]>
    %mx = reduce %t {axis = 1, kind = "max"} : tile<f32, [1]>
    %me = expand_dims %mx {axis = 0} : tile<f32, [1, 1]>
    %mb = broadcast %me : tile<f32, [1, 512]>
    %d = sub %t, %mb : tile<f32, [1, 512]>
    %e = exp %d : tile<f32, [1, 512]>
    %s = reduce %e {axis = 1, kind = "sum"} : tile<f32, [1]>
    %se = expand_dims %s {axis = 0} : tile<f32, [1, 1]>
    %sb = broadcast %se : tile<f32, [1, 512]>
    %o = div %e, %sb : tile<f32, [1, 512]>
    store_tile %y, %o, %row, %c0
    yield
  } else {
    yield
  }
}
)";

TEST(CpuSpeedPaths, NextProgramsRowIsPrefetchedInTheExpLoop) {
  auto k = bound(kPrefetchRows);
  std::string src = emit_cpp(*k);
  ASSERT_NE(src.find("const int32_t pn0_ = pid0 + 1;"), std::string::npos) << src;
  size_t call = src.find("tsr::prefetch_part(pf0_, pfl0_, ");  // x's row
  ASSERT_NE(call, std::string::npos) << src;
  size_t write = src.find("tsr::prefetch_part_w(pf1_, pfl1_, ", call);  // y's row, for writing
  ASSERT_NE(write, std::string::npos) << src;
  EXPECT_EQ(src.find("tsr::prefetch_part", write + 1), std::string::npos) << "one loop prefetches";
  size_t exp = src.find("tsr::exp_sum_inplace(", call);  // the exp, summed as it goes
  EXPECT_NE(exp, std::string::npos);
  EXPECT_LT(write, exp);
  EXPECT_LT(exp, src.find('}', call)) << "the prefetches are in the exp loop:\n" << src;
  for (int64_t m : {1, 7, 8})
    for (int64_t n : {500, 512, 700}) expect_same_as_interp(*k, {{"M", m}, {"N", n}}, 50 + m + n);
}

// The start of a kernel with one program per row of %x: %pid and %c0.
const char* kRowHead = R"(  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
)";

// Random inputs with plant(inputs) applied, run on the interpreter and on cpu and compared;
// returns cpu's tensors (and the interpreter's in *interp when given).
std::vector<Tensor> run_both(const Kernel& k, const Sizes& sizes, uint64_t seed,
                             const std::function<void(std::vector<Tensor>&)>& plant,
                             std::vector<Tensor>* interp = nullptr) {
  std::vector<Tensor> want = make_random_tensors(k, sizes, seed);
  plant(want);
  std::vector<Tensor> got = want;
  auto wa = args_for(k, want), ga = args_for(k, got);
  run_interp(k, wa);
  compile_cpu(k, test_options())->run(ga);
  testutil::expect_tensors_match(want, got, k.name, "cpu", {}, tile_error_bounds(k, sizes, want));
  if (interp) *interp = std::move(want);
  return got;
}

// An exp of a float tile of 16 elements or more is the runtime's vector exp over the array its
// loop wrote the argument into (tsr::exp_inplace: vscalefps on AVX-512). Against the
// interpreter over the whole range: arguments of +-150 overflow to inf and underflow to 0 and to
// subnormals, NaN and infinities come through, a 100-wide tile has a 4-element tail (the
// scalar fast_expf, which computes the same bits), and bf16 rounds after the exp.
TEST(CpuSpeedPaths, ExpOfAWideTileIsTheVectorExp) {
  for (const std::string dt : {"f32", "bf16"}) {
    const std::string tile = "tile<" + dt + ", [1, 100]>";
    std::string text = "kernel @expwide(%x: view<" + dt + ", [M, N]>, %y: view<" + dt + R"(, [M, N]>) {
)" + kRowHead + R"(  %t = load_tile %x, %pid, %c0 : )" + tile + R"(
  %k = const {value = 150.0} : )" + dt + R"(
  %kb = splat %k : )" + tile + R"(
  %a = mul %t, %kb : )" + tile + R"(
  %e = exp %a : )" + tile + R"(
  store_tile %y, %e, %pid, %c0
}
)";
    auto k = bound(text);
    std::string src = emit_cpp(*k);
    EXPECT_NE(src.find("tsr::exp_inplace("), std::string::npos) << src;
    EXPECT_EQ(src.find("fast_expf"), std::string::npos) << src;
    std::vector<Tensor> got = run_both(*k, {{"M", 9}, {"N", 93}}, 77, [](std::vector<Tensor>& in) {
      const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 88.7 / 150, 89.5 / 150, -87.5 / 150,
                                -100.0 / 150, -103.9 / 150, -104.5 / 150, 1e-30};
      for (size_t i = 0; i < std::size(special); ++i) in[0].set(static_cast<int64_t>(3 + 7 * i), special[i]);
    });
    int inf = 0, zero = 0, nan = 0;
    for (int64_t i = 0; i < got[1].numel(); ++i) {
      double v = got[1].get(i);
      inf += std::isinf(v), zero += v == 0, nan += std::isnan(v);
    }
    EXPECT_GT(inf, 5) << dt;  // the test reaches the ends of the range
    EXPECT_GT(zero, 5) << dt;
    EXPECT_EQ(nan, 1) << dt;
  }
}

// The kernel of `text`, its constexprs bound, and its generated C++.
std::pair<std::unique_ptr<Kernel>, std::string> bound_and_emitted(const std::string& text) {
  auto k = bound(text);
  std::string src = emit_cpp(*k);
  return {std::move(k), std::move(src)};
}

// sum(exp(.)) along a one-row f32 tile is summed by the exp's own loop (tsr::exp_sum_inplace),
// not by a pass of its own: softmax's denominator. Against the interpreter at ragged widths
// (the 32- and 16-lane steps and the scalar tail; -inf padding gives exp 0), in pieces of 256
// (the prefetch site, 1024 wide) and whole; a NaN reaches the sum. A two-row tile and a sum
// in another block keep their own reductions.
TEST(CpuSpeedPaths, SumOfAnExpRowIsSummedByTheExpLoop) {
  for (int64_t w : {40, 600, 1024}) {
    const std::string row = "tile<f32, [1, " + std::to_string(w) + "]>", one = "tile<f32, [1, 1]>";
    std::string text = std::string(R"(kernel @expsum(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>, %s: view<f32, [M, 1]>) {
)") + kRowHead + R"(  %t = load_tile %x, %pid, %c0 {pad = -inf} : )" + row + R"(
  %m = reduce %t {axis = 1, kind = "max"} : tile<f32, [1]>
  %me = expand_dims %m {axis = 0} : )" + one + R"(
  %mb = broadcast %me : )" + row + R"(
  %d = sub %t, %mb : )" + row + R"(
  %e = exp %d : )" + row + R"(
  %z = reduce %e {axis = 1, kind = "sum"} : tile<f32, [1]>
  %ze = expand_dims %z {axis = 0} : )" + one + R"(
  %zb = broadcast %ze : )" + row + R"(
  %p = div %e, %zb : )" + row + R"(
  store_tile %y, %p, %pid, %c0
  store_tile %s, %ze, %pid, %c0
}
)";
    auto [k, src] = bound_and_emitted(text);
    EXPECT_NE(src.find("tsr::exp_sum_inplace("), std::string::npos) << src;
    EXPECT_NE(src.find("(summed by the exp's loop)"), std::string::npos) << src;
    for (int64_t n : {w, w - 1, w - 17, w / 2 + 3}) {
      SCOPED_TRACE(std::to_string(w) + " " + std::to_string(n));
      std::vector<Tensor> got = run_both(*k, {{"M", 5}, {"N", n}}, 300 + w + n, [n](std::vector<Tensor>& in) {
        in[0].set(2 * n + n / 2, NAN);  // row 2
      });
      EXPECT_TRUE(std::isnan(got[2].get(2)));
      EXPECT_FALSE(std::isnan(got[2].get(1)));
    }
  }
  // Two rows in one tile: each row has its own sum, so the reduce stays a pass of its own.
  const std::string two = "tile<f32, [2, 64]>";
  std::string text = std::string(R"(kernel @expsum2(%x: view<f32, [M, 64]>, %s: view<f32, [M, 1]>) {
)") + kRowHead + R"(  %t = load_tile %x, %pid, %c0 : )" + two + R"(
  %e = exp %t : )" + two + R"(
  %z = reduce %e {axis = 1, kind = "sum"} : tile<f32, [2]>
  %ze = expand_dims %z {axis = 1} : tile<f32, [2, 1]>
  store_tile %s, %ze, %pid, %c0
}
)";
  auto [k, src] = bound_and_emitted(text);
  EXPECT_NE(src.find("tsr::exp_inplace("), std::string::npos) << src;
  EXPECT_EQ(src.find("exp_sum_inplace"), std::string::npos) << src;
  expect_same_as_interp(*k, {{"M", 7}}, 12);
}

// A float row reduction of 256 or more elements (a multiple of 64) runs four accumulators over
// the row's quarters, the runtime's tsr::row_sum4 / row_max4 / row_min4 (out of line, for
// compile time); one whose operand is an inlined expression (t * t) runs two halves inline
// (the expression written twice, not four times). Against the
// interpreter: sum, max and min of 512-wide rows (f32, and bf16 read in place), with a NaN
// planted in a different quarter of each of four rows (max and min must say NaN whichever
// accumulator saw it) and infinities in others.
TEST(CpuSpeedPaths, LongRowReductionsRunFourAccumulators) {
  for (const std::string dt : {"f32", "bf16"}) {
    SCOPED_TRACE(dt);
    const std::string row = "tile<" + dt + ", [1, 512]>", one = "tile<" + dt + ", [1, 1]>", v = "view<" + dt + ", [M, 1]>";
    std::string text = "kernel @rowred(%x: view<" + dt + ", [M, 512]>, %s: " + v + ", %mx: " + v + ", %mn: " + v + ", %sq: " + v + R"() {
)" + kRowHead + R"(  %t = load_tile %x, %pid, %c0 : )" + row + R"(
  %a = reduce %t {axis = 1, kind = "sum"} : tile<)" + dt + R"(, [1]>
  %b = reduce %t {axis = 1, kind = "max"} : tile<)" + dt + R"(, [1]>
  %c = reduce %t {axis = 1, kind = "min"} : tile<)" + dt + R"(, [1]>
  %tt = mul %t, %t : )" + row + R"(
  %d = reduce %tt {axis = 1, kind = "sum"} : tile<)" + dt + R"(, [1]>
  %ae = expand_dims %a {axis = 0} : )" + one + R"(
  %be = expand_dims %b {axis = 0} : )" + one + R"(
  %ce = expand_dims %c {axis = 0} : )" + one + R"(
  %de = expand_dims %d {axis = 0} : )" + one + R"(
  store_tile %s, %ae, %pid, %c0
  store_tile %mx, %be, %pid, %c0
  store_tile %mn, %ce, %pid, %c0
  store_tile %sq, %de, %pid, %c0
}
)";
    auto k = bound(text);
    std::string src = emit_cpp(*k);
    EXPECT_NE(src.find("reduction(+:a0_,a1_)"), std::string::npos) << src;  // t * t: inline, two halves
    EXPECT_NE(src.find("tsr::row_sum4<128>("), std::string::npos) << src;
    EXPECT_NE(src.find("tsr::row_max4<128>("), std::string::npos) << src;
    EXPECT_NE(src.find("tsr::row_min4<128>("), std::string::npos) << src;
    std::vector<Tensor> got = run_both(*k, {{"M", 11}}, 91, [](std::vector<Tensor>& in) {
      for (int64_t q = 0; q < 4; ++q) in[0].set(q * 512 + q * 128 + 17, NAN);  // row q: quarter q
      in[0].set(4 * 512 + 300, INFINITY);
      in[0].set(5 * 512 + 5, -INFINITY);
      in[0].set(6 * 512 + 511, 1e30);
    });
    for (int64_t q = 0; q < 4; ++q) EXPECT_TRUE(std::isnan(got[2].get(q)) && std::isnan(got[3].get(q))) << "row " << q;
    EXPECT_EQ(got[2].get(4), INFINITY);
    EXPECT_EQ(got[3].get(5), -INFINITY);
    EXPECT_FALSE(std::isnan(got[2].get(7)));
  }
}

// A sum scan of 32-bit integers along the row is the runtime's vector scan (16 lanes, a running
// total): wrapping sums past 2^31 and a row of 1000 (62 vectors and a tail of 8), i32 and u32.
TEST(CpuSpeedPaths, IntegerSumScanIsTheVectorScan) {
  for (const std::string dt : {"i32", "u32"}) {
    SCOPED_TRACE(dt);
    const std::string row = "tile<" + dt + ", [1, 1000]>";
    auto k = bound("kernel @scan(%x: view<" + dt + ", [M, N]>, %y: view<" + dt + ", [M, N]>) {\n" + kRowHead +
                   "  %t = load_tile %x, %pid, %c0 : " + row + "\n  %s = scan %t {axis = 1, kind = \"sum\"} : " + row +
                   "\n  store_tile %y, %s, %pid, %c0\n}\n");
    EXPECT_NE(emit_cpp(*k).find("tsr::scan_add32("), std::string::npos);
    for (int64_t n : {1000, 37}) {
      std::vector<Tensor> got = run_both(*k, {{"M", 3}, {"N", n}}, 17, [&](std::vector<Tensor>& in) {
        for (int64_t i = 0; i < 3 * n; i += 7) in[0].set_int(i, 2147483000 - i);  // sums wrap
      });
      EXPECT_NE(got[1].get_int(n - 1), 0);
    }
  }
  // Several rows of one tile (outer > 1), each scanned on its own.
  const std::string t = "tile<i32, [4, 48]>";
  auto k = bound("kernel @scan4(%x: view<i32, [M, 48]>, %y: view<i32, [M, 48]>) {\n" + std::string(kRowHead) +
                 "  %t = load_tile %x, %pid, %c0 : " + t + "\n  %s = scan %t {axis = 1, kind = \"sum\"} : " + t +
                 "\n  store_tile %y, %s, %pid, %c0\n}\n");
  EXPECT_NE(emit_cpp(*k).find("tsr::scan_add32("), std::string::npos);
  run_both(*k, {{"M", 9}}, 19, [](std::vector<Tensor>&) {});
}

// A scatter whose mask is mostly clear skips its clear 64-element chunks: set bits at both ends
// of chunks and in the last, none in others, against the interpreter (the other columns keep
// the output's own values).
TEST(CpuSpeedPaths, SparseMaskedScatterSkipsClearChunks) {
  auto k = bound(R"(kernel @sparse(%x: view<f32, [M, 256]>, %y: view<f32, [M, 256]>) {
)" + std::string(kRowHead) + R"(  %t = load_tile %x, %pid, %c0 : tile<f32, [1, 256]>
  %h = const {value = 1.5} : f32
  %hb = splat %h : tile<f32, [1, 256]>
  %m = cmp %t, %hb {pred = "gt"} : tile<i1, [1, 256]>
  %r = splat %pid : tile<i32, [1, 256]>
  %col = arange : tile<i32, [256]>
  %cols = reshape %col : tile<i32, [1, 256]>
  scatter %y, %t, %r, %cols, %m
}
)");
  EXPECT_NE(emit_cpp(*k).find("tsr::any64("), std::string::npos);
  std::vector<Tensor> got = run_both(*k, {{"M", 4}}, 23, [](std::vector<Tensor>& in) {
    for (int64_t c : {0, 63, 64, 191, 255}) in[0].set(256 + c, 2.0 + double(c));  // row 1
    in[0].set(3 * 256 + 130, 7.0);                                               // row 3
  });
  EXPECT_EQ(got[1].get(256 + 63), 65.0);
  EXPECT_EQ(got[1].get(3 * 256 + 130), 7.0);
}

// A cheap elementwise result read twice by one op (d * d) is recomputed inside it, not written
// to an array (layernorm's centered row, masked past the row's end); an expensive one (a log)
// is computed once into its array.
TEST(CpuSpeedPaths, CheapResultReadTwiceByOneOpIsInlined) {
  const std::string row = "tile<f32, [1, 300]>";
  std::string text = std::string(R"(kernel @twice(%x: view<f32, [M, 300]>, %y: view<f32, [M, 300]>, %s: view<f32, [M, 1]>) {
)") + kRowHead + R"(  %t = load_tile %x, %pid, %c0 : )" + row + R"(
  %h = const {value = 0.25} : f32
  %hb = splat %h : )" + row + R"(
  %ar = arange : tile<i32, [300]>
  %nv = const {value = 250} : i32
  %nb = splat %nv : tile<i32, [300]>
  %in = cmp %ar, %nb {pred = "lt"} : tile<i1, [300]>
  %in2 = expand_dims %in {axis = 0} : tile<i1, [1, 300]>
  %w = where %in2, %t, %hb : )" + row + R"(
  %d = sub %w, %hb : )" + row + R"(
  %q = mul %d, %d : )" + row + R"(
  %a = reduce %q {axis = 1, kind = "sum"} : tile<f32, [1]>
  %ae = expand_dims %a {axis = 0} : tile<f32, [1, 1]>
  store_tile %s, %ae, %pid, %c0
  %l = log %t : )" + row + R"(
  %ll = mul %l, %l : )" + row + R"(
  store_tile %y, %ll, %pid, %c0
}
)";
  auto k = bound(text);
  std::string src = emit_cpp(*k);
  auto line_after = [&](const std::string& op) {  // the generated line after op's comment
    size_t at = src.find(op);
    if (at == std::string::npos) return std::string("(no " + op + ")");
    size_t b = src.find('\n', at) + 1;
    std::string l = src.substr(b, src.find('\n', b) - b);
    return l.substr(l.find_first_not_of(' '));
  };
  EXPECT_EQ(line_after("%d = sub"), "// (computed inside its user)") << src;
  // The mask passes through its expand_dims: a compare in the masked loop, not a byte array.
  EXPECT_EQ(line_after("%in = cmp"), "// (computed inside its user)") << src;
  EXPECT_EQ(src.find("uint8_t v"), std::string::npos) << src;
  EXPECT_NE(line_after("%l = log"), "// (computed inside its user)") << src;
  size_t calls = 0;
  for (size_t p = src.find("tsr::log("); p != std::string::npos; p = src.find("tsr::log(", p + 1)) ++calls;
  EXPECT_EQ(calls, 1u) << src;
  run_both(*k, {{"M", 13}}, 93, [](std::vector<Tensor>& in) { in[0].set(5, -1.0); });  // a NaN log
}

// A value computed inside its user passes through expand_dims and reshape (the same elements
// in the same flat order): a compare read over [64] as [8, 8] by a where, that where through a
// reshape into its store, an f32 row through two renames into a reduce, and a compare whose
// rename is read twice is an array of its own (a rename read by two ops is not deferred).
TEST(CpuSpeedPaths, DeferredValuesPassThroughFlatRenames) {
  std::string text = std::string(R"(kernel @renames(%x: view<f32, [M, 64]>, %y: view<f32, [M, 64]>, %s: view<f32, [M, 1]>, %u: view<f32, [M, 64]>) {
)") + kRowHead + R"(  %t = load_tile %x, %pid, %c0 : tile<f32, [1, 64]>
  %t2 = reshape %t : tile<f32, [8, 8]>
  %ar = arange : tile<i32, [64]>
  %nv = const {value = 37} : i32
  %nb = splat %nv : tile<i32, [64]>
  %in = cmp %ar, %nb {pred = "lt"} : tile<i1, [64]>
  %in1 = expand_dims %in {axis = 0} : tile<i1, [1, 64]>
  %in2 = reshape %in1 : tile<i1, [8, 8]>
  %h = const {value = -2.5} : f32
  %hb = splat %h : tile<f32, [8, 8]>
  %w = where %in2, %t2, %hb : tile<f32, [8, 8]>
  %w1 = reshape %w : tile<f32, [1, 64]>
  store_tile %y, %w1, %pid, %c0
  %e = mul %t, %t : tile<f32, [1, 64]>
  %e1 = reshape %e : tile<f32, [64]>
  %e2 = expand_dims %e1 {axis = 0} : tile<f32, [1, 64]>
  %a = reduce %e2 {axis = 1, kind = "sum"} : tile<f32, [1]>
  %ae = expand_dims %a {axis = 0} : tile<f32, [1, 1]>
  store_tile %s, %ae, %pid, %c0
  %gt = cmp %ar, %nb {pred = "gt"} : tile<i1, [64]>
  %gt1 = expand_dims %gt {axis = 0} : tile<i1, [1, 64]>
  %hr = splat %h : tile<f32, [1, 64]>
  %p = where %gt1, %t, %hr : tile<f32, [1, 64]>
  %q = where %gt1, %hr, %t : tile<f32, [1, 64]>
  %pq = sub %p, %q : tile<f32, [1, 64]>
  store_tile %u, %pq, %pid, %c0
}
)";
  auto k = bound(text);
  std::string src = emit_cpp(*k);
  auto line_after = [&](const std::string& op) {
    size_t at = src.find(op);
    if (at == std::string::npos) return std::string("(no " + op + ")");
    size_t b = src.find('\n', at) + 1;
    std::string l = src.substr(b, src.find('\n', b) - b);
    return l.substr(l.find_first_not_of(' '));
  };
  EXPECT_EQ(line_after("%in = cmp"), "// (computed inside its user)") << src;
  EXPECT_EQ(line_after("%w = where"), "// (computed inside its user)") << src;  // by the store, past a reshape
  EXPECT_EQ(line_after("%e = mul"), "// (computed inside its user)") << src;
  EXPECT_NE(line_after("%gt = cmp"), "// (computed inside its user)") << src;
  run_both(*k, {{"M", 7}}, 58, [](std::vector<Tensor>&) {});
}

// A bf16 row store converts through tsr::store_bf16 (vcvtne2ps2bf16 32 values at a time, then
// vcvtneps2bf16 for 16, where the CPU has them: they flush subnormals and keep NaN payloads;
// such vectors take f2bf): every stored value equals the interpreter's exactly, its zero's sign
// too, subnormal results, NaN, infinities and ties included, in a row cut in pieces (512), a
// row with a tail of 4 (100) and one with a 16-wide step and a tail of 8 (120).
TEST(CpuSpeedPaths, Bf16RowStoreMatchesTheInterpreterBitForBit) {
  for (int64_t w : {512, 100, 120}) {
    const std::string in = "tile<f32, [1, " + std::to_string(w) + "]>", out = "tile<bf16, [1, " + std::to_string(w) + "]>";
    std::string text = std::string(R"(kernel @bfstore(%x: view<f32, [M, N]>, %y: view<bf16, [M, N]>) {
)") + kRowHead + R"(  %t = load_tile %x, %pid, %c0 : )" + in + R"(
  %h = cast %t : )" + out + R"(
  store_tile %y, %h, %pid, %c0
}
)";
    auto k = bound(text);
    std::string src = emit_cpp(*k);
    EXPECT_NE(src.find("tsr::store_bf16("), std::string::npos) << src;
    auto plant = [&](std::vector<Tensor>& x) {
      const double special[] = {1e-39, -1e-39, 1.1754942e-38, 1e-45, NAN, INFINITY, -INFINITY, 3.4e38, 1.00390625, 1.01171875, -0.0};
      for (size_t i = 0; i < std::size(special); ++i) x[0].set(static_cast<int64_t>(1 + 37 * i), special[i]);
      for (int64_t i = 2 * w; i < 3 * w; ++i) x[0].set(i, std::ldexp(x[0].get(i), -128));  // a row of subnormals
    };
    const Sizes sizes{{"M", 6}, {"N", w}};
    std::vector<Tensor> got = run_both(*k, sizes, 95 + w, plant);
    std::vector<Tensor> want = make_random_tensors(*k, sizes, 95 + w);
    plant(want);
    auto wa = args_for(*k, want);
    run_interp(*k, wa);
    int nonzero_subnormal = 0;
    for (int64_t i = 0; i < got[1].numel(); ++i) {
      double g = got[1].get(i), e = want[1].get(i);
      EXPECT_TRUE((g == e && std::signbit(g) == std::signbit(e)) || (std::isnan(g) && std::isnan(e)))
          << "w " << w << " element " << i << ": cpu " << g << " interp " << e;
      nonzero_subnormal += e != 0 && std::fabs(e) < 1.1754943508222875e-38;
    }
    EXPECT_GT(nonzero_subnormal, w / 2) << "the test stores subnormal bf16 values";
  }
}

// The same row read inside a loop over column tiles: the index depends on the loop, so nothing
// is prefetched (and the generated code has no prologue).
TEST(CpuSpeedPaths, TilesLoadedInLoopsAreNotPrefetched) {
  std::string text = kAliasOfCarried;
  auto k = bound(text);
  std::string src = emit_cpp(*k);
  EXPECT_EQ(src.find("prefetch"), std::string::npos) << src;
}

// The bf16 row kernels' runtime paths (session 19), against the interpreter bit for bit where
// its result is exact: the max / min of a bf16 row read in place (16-bit keys, from a 64-byte
// boundary), a stored bf16 row `a * u` multiplied by tsr::store_bf16_mul, and the vector exp
// against the scalar fast_expf over a dense sweep.
// Same bits, or both NaN; a zero's sign counts.
bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// Runs k on the interpreter and on cpu from the same inputs (plant applied) and expects every
// element of the tensors `outs` to be the same value; returns cpu's tensors.
std::vector<Tensor> run_exact(const Kernel& k, const Sizes& sizes, uint64_t seed, std::vector<size_t> outs,
                              const std::function<void(std::vector<Tensor>&)>& plant) {
  std::vector<Tensor> want;
  std::vector<Tensor> got = run_both(k, sizes, seed, plant, &want);
  for (size_t out : outs) {
    int bad = 0;
    for (int64_t i = 0; i < got[out].numel() && bad < 5; ++i)
      if (!same_value(got[out].get(i), want[out].get(i))) {
        ++bad;
        ADD_FAILURE() << k.name << " output " << out << " element " << i << ": cpu " << got[out].get(i) << " interp "
                      << want[out].get(i);
      }
  }
  return got;
}

// max and min of 512-wide bf16 rows read in place from a view 520 wide, so that the rows start
// at every 16-byte offset from a 64-byte boundary (the head before the boundary, the vector
// body and the tail all see data). Planted: rows of zeros whose every lane meets -0 first
// (max must be +0, as on the interpreter; the float loop kept -0) and +0 first (min must be
// -0), NaN (either sign) in the head, the body and the last element, infinities, and a row of
// -inf only (max -inf) and +inf only.
TEST(CpuSpeedPaths, Bf16RowMaxMinByKeysMatchTheInterpreter) {
  const std::string row = "tile<bf16, [1, 512]>", one = "tile<bf16, [1, 1]>", v = "view<bf16, [M, 1]>";
  std::string text = "kernel @bfmaxmin(%x: view<bf16, [M, 520]>, %mx: " + v + ", %mn: " + v + ") {\n" + kRowHead + "  %t = load_tile %x, %pid, %c0 : " +
                     row + R"(
  %b = reduce %t {axis = 1, kind = "max"} : tile<bf16, [1]>
  %c = reduce %t {axis = 1, kind = "min"} : tile<bf16, [1]>
  %be = expand_dims %b {axis = 0} : )" + one + R"(
  %ce = expand_dims %c {axis = 0} : )" + one + R"(
  store_tile %mx, %be, %pid, %c0
  store_tile %mn, %ce, %pid, %c0
}
)";
  auto [k, src] = bound_and_emitted(text);
  ASSERT_NE(src.find("tsr::bf16_row v"), std::string::npos) << src;  // read in place
  ASSERT_NE(src.find("tsr::row_max4<128>("), std::string::npos) << src;
  ASSERT_NE(src.find("tsr::row_min4<128>("), std::string::npos) << src;
  const int64_t W = 520, M = 24;
  std::vector<Tensor> got = run_exact(*k, {{"M", M}}, 131, {1, 2}, [&](std::vector<Tensor>& in) {
    Tensor& x = in[0];
    for (int64_t j = 0; j < 512; ++j) {
      x.set(0 * W + j, j % 128 < 64 ? -0.0 : 0.0);  // each quarter's first 64: -0, then +0
      x.set(1 * W + j, j % 128 < 64 ? 0.0 : -0.0);
      x.set(2 * W + j, -INFINITY);
      x.set(3 * W + j, INFINITY);
    }
    x.set(4 * W + 3, NAN);     // the head (the row starts 16 * 4 bytes past a boundary at most)
    x.set(5 * W + 300, -NAN);  // the body
    x.set(6 * W + 511, NAN);   // the last element
    x.set(7 * W + 511, INFINITY);
    x.set(8 * W + 0, -INFINITY);
    x.set(9 * W + 2, 1e30);
    x.set(10 * W + 510, -1e30);
  });
  EXPECT_TRUE(got[1].get(0) == 0 && !std::signbit(got[1].get(0)));  // max of {-0, +0}
  EXPECT_TRUE(got[2].get(1) == 0 && std::signbit(got[2].get(1)));   // min of {+0, -0}
  EXPECT_EQ(got[1].get(2), -INFINITY);
  EXPECT_EQ(got[2].get(3), INFINITY);
  for (int64_t r : {4, 5, 6}) EXPECT_TRUE(std::isnan(got[1].get(r)) && std::isnan(got[2].get(r))) << "row " << r;
  EXPECT_EQ(got[1].get(7), INFINITY);
  EXPECT_EQ(got[2].get(8), -INFINITY);
}

// y = bf16(a * u) with a an f32 array of the row (it has a second user, so it is materialized)
// and u one value per row (a [1, 1] tile broadcast): tsr::store_bf16_mul multiplies while it
// converts. The interpreter's result is exact here (one f32 multiply, one rounding to bf16),
// so every stored value must be its value: ragged widths (a tail after the 16-wide steps) and
// 1024 (cut in prefetch pieces), products that are subnormal, NaN, infinite and ties.
TEST(CpuSpeedPaths, Bf16StoreOfAScaledRowMultipliesInTheStore) {
  for (int64_t w : {600, 1024, 37}) {
    SCOPED_TRACE(w);
    const std::string row = "tile<f32, [1, " + std::to_string(w) + "]>", brow = "tile<bf16, [1, " + std::to_string(w) + "]>";
    std::string text = "kernel @bfscale(%x: view<f32, [M, " + std::to_string(w) + "]>, %s: view<f32, [M, 1]>, %y: view<bf16, [M, " +
                       std::to_string(w) + "]>, %z: view<f32, [M, 1]>) {\n" + kRowHead + "  %t = load_tile %x, %pid, %c0 : " + row + R"(
  %a = add %t, %t : )" + row + R"(
  %q = reduce %a {axis = 1, kind = "max"} : tile<f32, [1]>
  %qe = expand_dims %q {axis = 0} : tile<f32, [1, 1]>
  store_tile %z, %qe, %pid, %c0
  %u = load_tile %s, %pid, %c0 : tile<f32, [1, 1]>
  %ub = broadcast %u : )" + row + R"(
  %p = mul %a, %ub : )" + row + R"(
  %h = cast %p : )" + brow + R"(
  store_tile %y, %h, %pid, %c0
}
)";
    auto [k, src] = bound_and_emitted(text);
    if (w >= 16) {
      EXPECT_NE(src.find("tsr::store_bf16_mul("), std::string::npos) << src;
    }
    const int64_t M = 12;
    std::vector<Tensor> got = run_exact(*k, {{"M", M}}, 200 + w, {2, 3}, [&](std::vector<Tensor>& in) {
      Tensor &x = in[0], &s = in[1];
      s.set(0, 1e-38);     // row 0: subnormal products
      s.set(1, NAN);       // row 1: all NaN
      s.set(2, 3e38);      // row 2: infinities
      s.set(3, -0.0);      // row 3: zeros of both signs (a -0 scale must stay -0 in every lane)
      s.set(4, 0.5);       // row 4: ties of bf16 rounding below
      for (int64_t j = 0; j < w; ++j) x.set(4 * w + j, (1.0 + (2 * j % 256 + 1) / 256.0) * (j % 2 ? 1 : -1));
      x.set(5 * w + w - 1, NAN);
      x.set(6 * w + 0, INFINITY);
      x.set(7 * w + 5 % w, 1e-40);  // a subnormal input
    });
    int subnormal = 0, nan = 0, inf = 0;
    for (int64_t j = 0; j < w; ++j) {
      subnormal += got[2].get(j) != 0 && std::fabs(got[2].get(j)) < 1.1754943508222875e-38;
      nan += std::isnan(got[2].get(w + j));
      inf += std::isinf(got[2].get(2 * w + j));
    }
    EXPECT_GT(subnormal, w / 2) << "the test stores subnormal bf16 values";
    EXPECT_EQ(nan, w);
    EXPECT_GT(inf, 0);
  }
}

// The exp tests' arguments: n values spread densely over [-110, 110], with the ends of the
// range (overflow near 88.72, subnormal results below -87.3, zero below -103.97), +-inf, NaN
// and +-0 planted among them.
void fill_exp_sweep(Tensor& x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x.set(i, -110.0 + 220.0 * static_cast<double>(i) / static_cast<double>(n));
  const double special[] = {INFINITY, -INFINITY, NAN, 0.0, -0.0, 88.72283, 88.72284, -87.33654, -103.97208, -103.9721, 104.0, -104.0, 1e30, -1e30};
  for (size_t i = 0; i < std::size(special); ++i) x.set(static_cast<int64_t>(5 + 1031 * i), special[i]);
}
// A raw op computing the scalar fast_expf of its operand (the exact exp's reference), up to its
// result type.
constexpr const char* kScalarExpRaw =
    R"(raw %t {name = "scalar_exp", cpp = "for (int64_t i = 0; i < in0_numel; ++i) out0[i] = tsr::fast_expf(in0[i]);"} : )";

// The vector exp (exp16: the max / min clamp, vscalefps) gives fast_expf's bits for
// every input: a 1024-wide f32 row (vector path) against a raw op calling tsr::fast_expf on
// the same row, over 2^20 arguments spread densely over [-110, 110] with the ends of the range
// (overflow near 88.72, subnormal results below -87.3, zero below -103.97), +-inf, NaN, +-0.
TEST(CpuSpeedPaths, Bf16VectorExpGivesTheScalarExpsBits) {
  const std::string row = "tile<f32, [1, 1024]>";
  std::string text = "kernel @expbits(%x: view<f32, [M, 1024]>, %y: view<f32, [M, 1024]>, %z: view<f32, [M, 1024]>) {\n" + std::string(kRowHead) +
                     "  %t = load_tile %x, %pid, %c0 : " + row + R"(
  %e = exp %t : )" + row + R"(
  store_tile %y, %e, %pid, %c0
  %r = )" + std::string(kScalarExpRaw) + row + R"(
  store_tile %z, %r, %pid, %c0
}
)";
  auto [k, src] = bound_and_emitted(text);
  ASSERT_NE(src.find("tsr::exp_inplace("), std::string::npos) << src;
  const int64_t M = 1024, n = M * 1024;
  const Sizes sizes{{"M", M}};
  std::vector<Tensor> ts = make_random_tensors(*k, sizes, 7);
  fill_exp_sweep(ts[0], n);
  auto args = args_for(*k, ts);
  compile_cpu(*k, test_options())->run(args);
  int64_t bad = 0, inf = 0, sub = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = static_cast<float>(ts[1].get(i)), b = static_cast<float>(ts[2].get(i));
    uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    if (ua != ub && !(std::isnan(a) && std::isnan(b)) && bad++ < 5)
      ADD_FAILURE() << "exp(" << ts[0].get(i) << "): vector " << a << " scalar " << b;
    inf += std::isinf(a);
    sub += a != 0 && std::fabs(a) < 1.1754943508222875e-38;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(inf, 1000);  // the sweep reaches overflow and subnormal results
  EXPECT_GT(sub, 1000);
}

// An exp marked max_rel_error = 2^-16 (relax-exp-precision's kRelaxedExpError) runs the
// runtime's relaxed vector exp (exp16_relaxed: vreduceps, a degree-4 polynomial, vscalefps), in
// both of the emitter's forms (exp_sum_inplace<1> with the row's sum, exp_inplace<1> alone),
// and stays within 2^-16 of the exact exp (the scalar fast_expf, 1 ulp) over 2^20 arguments
// in [-110, 110] and the special values: subnormal results within 2^-142, +-inf and NaN
// alike, the ends of the range (overflow near 88.72) to inf or the largest floats. The sums
// within 2^-16 plus the f32 sum's own rounding. It must differ from the exact exp somewhere (else
// the relaxed form did not run).
TEST(CpuSpeedPaths, RelaxedVectorExpIsWithinItsBound) {
  if (!__builtin_cpu_supports("avx512dq")) GTEST_SKIP() << "no AVX512DQ here: the relaxed exp is the exact one";
  const std::string row = "tile<f32, [1, 1024]>";
  std::string text = "kernel @relaxed(%x: view<f32, [M, 1024]>, %y: view<f32, [M, 1024]>, %s: view<f32, [M, 1]>, %n: view<f32, [M, 1024]>, %z: view<f32, [M, 1024]>) {\n" +
                     std::string(kRowHead) + "  %t = load_tile %x, %pid, %c0 : " + row + R"(
  %e = exp %t {max_rel_error = 1.52587890625e-05} : )" + row + R"(
  store_tile %y, %e, %pid, %c0
  %sum = reduce %e {axis = 1, kind = "sum"} : tile<f32, [1]>
  %sum1 = expand_dims %sum {axis = 1} : tile<f32, [1, 1]>
  store_tile %s, %sum1, %pid, %c0
  %u = neg %t : )" + row + R"(
  %f = exp %u {max_rel_error = 1.52587890625e-05} : )" + row + R"(
  store_tile %n, %f, %pid, %c0
  %r = )" + std::string(kScalarExpRaw) + row + R"(
  store_tile %z, %r, %pid, %c0
}
)";
  auto [k, src] = bound_and_emitted(text);
  ASSERT_NE(src.find("tsr::exp_sum_inplace<1>("), std::string::npos) << src;
  ASSERT_NE(src.find("tsr::exp_inplace<1>("), std::string::npos) << src;
  const int64_t M = 1024, W = 1024, n = M * W;
  std::vector<Tensor> ts = make_random_tensors(*k, Sizes{{"M", M}}, 7);
  fill_exp_sweep(ts[0], n);
  auto args = args_for(*k, ts);
  compile_cpu(*k, test_options())->run(args);
  const double bound = std::ldexp(1.0, -16), top = 3.4028234663852886e38 * (1 - std::ldexp(1.0, -15));
  // got against e^x (ref: fast_expf of x, or 1 / it for e^-x: the reciprocal's rounding is
  // within the slack of 2^-23 added to the bound).
  auto within = [&](double got, double ref) {
    if (std::isnan(ref)) return std::isnan(got);
    if (std::isinf(ref) || std::isinf(got)) return (std::isinf(ref) || ref >= top) && (std::isinf(got) || got >= top);
    if (ref < std::ldexp(1.0, -126)) return std::fabs(got - ref) <= std::ldexp(1.0, -142);
    return std::fabs(got - ref) <= (bound + std::ldexp(1.0, -23)) * ref;
  };
  int64_t bad = 0, differs = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = ts[0].get(i), ref = ts[4].get(i), got = ts[1].get(i), neg = ts[3].get(i);
    const double ref_neg = std::isnan(x) ? NAN : static_cast<double>(static_cast<float>(std::exp(-x)));
    differs += got != ref && !(std::isnan(got) && std::isnan(ref));
    if (!within(got, ref) && bad++ < 5) ADD_FAILURE() << "exp(" << x << "): relaxed " << got << " exact " << ref;
    if (!within(neg, ref_neg) && bad++ < 5) ADD_FAILURE() << "exp(-" << x << "): relaxed " << neg << " exact " << ref_neg;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(differs, 1000) << "the relaxed exp gave the exact exp's bits: did it run?";
  for (int64_t r = 0; r < M; ++r) {
    double exact = 0;
    for (int64_t j = 0; j < W; ++j) exact += ts[4].get(r * W + j);
    if (!(exact < 1e38)) continue;  // (an f32 sum overflows there)
    EXPECT_LE(std::fabs(ts[2].get(r) - exact), (bound + 1100 * std::ldexp(1.0, -24)) * exact + 1e-38) << "row " << r;
  }
}

// Streamed row stores (tsr::stream_f32 / stream_bf16: non-temporal, into views of at least
// tsr::kStreamBytes, in kernels that move more bytes than they compute) give the plain stores'
// bits: 96 programs (enough for the OpenMP launcher, whose threads fence their own stores) of
// a kernel whose views are 16.8 MB (4096 rows; the rows past the grid keep their inputs'
// values), rows 1028 and 2056 wide so that rows start off a 64-byte line (the head stored
// plainly), scaled f32 rows (stream_f32_mul, and stream_f32 of a materialized product), their
// bf16 rounding (stream_bf16_mul, or a piece and stream_bf16: subnormal, NaN and infinite
// products take f2bf) and an expression through a piece. Against the interpreter, and byte for
// byte against the same kernel emitted with TESSERA_CPU_STREAM_STORES=0 (every output, NaN
// bits included). At 64 rows the views are under the size and the plain stores run.
TEST(CpuSpeedPaths, StreamedRowStoresGiveThePlainStoresBits) {
  // The views below must reach the runtime's threshold for the streamed branch to run.
  const std::string header = cpu::kRuntimeHeader;
  ASSERT_NE(header.find("constexpr int64_t kStreamBytes = int64_t(16) << 20;"), std::string::npos);
  ASSERT_GE(int64_t{4096} * 1028 * 4, int64_t{16} << 20);
  const std::string row = "tile<f32, [1, 1024]>";
  // both: y = a * u is also rounded to bf16 (a materialized product: stream_f32, and the bf16
  // store through a piece); else y = a * 2u and only the bf16 rounding of a * u is stored
  // (stream_f32_mul, stream_bf16_mul).
  for (bool both : {true, false}) {
    SCOPED_TRACE(both);
    std::string text = R"(kernel @bigrows(%x: view<f32, [M, 1028]>, %s: view<f32, [M, 1]>, %y: view<f32, [M, 1028]>, %b: view<bf16, [M, 2056]>, %z: view<f32, [M, 1028]>) {
  grid {
    %g = const {value = 96} : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %pid, %c0 : )" + row + R"(
  %a = add %t, %t : )" + row + R"(
  %m = reduce %a {axis = 1, kind = "max"} : tile<f32, [1]>
  %me = expand_dims %m {axis = 0} : tile<f32, [1, 1]>
  store_tile %s, %me, %pid, %c0
  %u = load_tile %s, %pid, %c0 : tile<f32, [1, 1]>
  %ub = broadcast %u : )" + row + R"(
  %p = mul %a, %ub : )" + row + R"(
)" + (both ? "  store_tile %y, %p, %pid, %c0\n"
           : "  %u2 = add %u, %u : tile<f32, [1, 1]>\n  %ub2 = broadcast %u2 : " + row + "\n  %p2 = mul %a, %ub2 : " + row +
                 "\n  store_tile %y, %p2, %pid, %c0\n") +
                       R"(  %h = cast %p : tile<bf16, [1, 1024]>
  store_tile %b, %h, %pid, %c0
  %q = sub %t, %ub : )" + row + R"(
  store_tile %z, %q, %pid, %c0
}
)";
    auto [k, src] = bound_and_emitted(text);
    std::vector<const char*> calls = {"tsr::stream_f32(", "tsr::stream_fence();", "tsr::stream_view(A.d2_0 * A.s2_0, 4)",
                                      "tsr::stream_view(A.d3_0 * A.s3_0, 2)"};
    calls.push_back(both ? "tsr::stream_bf16(" : "tsr::stream_bf16_mul(");
    if (!both) calls.push_back("tsr::stream_f32_mul(");
    for (const char* call : calls) EXPECT_NE(src.find(call), std::string::npos) << call << "\n" << src;
    setenv("TESSERA_CPU_STREAM_STORES", "0", 1);
    std::string off = emit_cpp(*k);
    auto plain = compile_cpu(*k, test_options());
    unsetenv("TESSERA_CPU_STREAM_STORES");
    EXPECT_EQ(off.find("stream"), std::string::npos) << off;
    auto plant = [](std::vector<Tensor>& in) {
      Tensor& x = in[0];
      for (int64_t j = 0; j < 1024; ++j) {
        x.set(j, std::ldexp(x.get(j), -64));  // row 0: a * max(a) subnormal
        x.set(2 * 1028 + j, 1e38);           // row 2: infinities
      }
      x.set(1 * 1028 + 5, NAN);  // row 1: all NaN (the max is NaN)
      const uint32_t payload_nan = 0x7fa12345u;  // a signaling NaN with payload bits (vcvtne2ps2bf16 keeps some)
      std::memcpy(x.data.data() + 4 * (4 * 1028 + 1023), &payload_nan, 4);
      x.set(5 * 1028 + 7, 1e-40);
    };
    for (int64_t M : {4096, 64}) {
      SCOPED_TRACE(M);
      std::vector<Tensor> got = run_exact(*k, {{"M", M}}, 301, {1, 2, 3, 4}, plant);
      std::vector<Tensor> base = make_random_tensors(*k, {{"M", M}}, 301);
      plant(base);
      auto ba = args_for(*k, base);
      plain->run(ba);
      for (size_t o : {1, 2, 3, 4}) EXPECT_TRUE(got[o].data == base[o].data) << "output " << o << " differs from the plain stores' bytes";
      int subnormal = 0, nan = 0, inf = 0;
      for (int64_t j = 0; j < 1024; ++j) {
        subnormal += got[3].get(j) != 0 && std::fabs(got[3].get(j)) < 1.1754943508222875e-38;
        nan += std::isnan(got[3].get(2056 + j));
        inf += std::isinf(got[3].get(2 * 2056 + j));
      }
      EXPECT_GT(subnormal, 256) << "the test stores subnormal bf16 values";
      EXPECT_EQ(nan, 1024);
      EXPECT_GT(inf, 256);
    }
  }
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F32}) {
    auto sm = bind_constexprs(*find_library_kernel("softmax")->build(dt), {{"BLOCK_N", 4096}});
    EXPECT_EQ(emit_cpp(*sm).find("tsr::stream_") != std::string::npos, dt == ScalarKind::F32) << scalar_name(dt);
  }
}

}  // namespace
}  // namespace tessera::cputest
