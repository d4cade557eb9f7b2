// Memory ops with masks and bounds, shape ops, reductions/scans, control flow, and the exact
// error messages of the interpreter and of argument binding.
#include <cmath>
#include <fstream>
#include <sstream>

#include "Helpers.h"

using namespace tessera;
using namespace tessera::test;

namespace {

std::string data_file(const std::string& name) {
  std::ifstream f(std::string(TESSERA_SOURCE_DIR) + "/tests/text/data/" + name);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const char* kScatter = R"(
kernel @sc(%x: view<f32, [R, C]>, %y: view<f32, [R, C]>, %old: view<f32, [R, C]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %cols0 = arange : tile<i32, [8]>
  %sh = const {value = SHIFT} : i32
  %shs = splat %sh : tile<i32, [8]>
  %cols = add %cols0, %shs : tile<i32, [8]>
  %r = const {value = ROW} : i32
  %rows = splat %r : tile<i32, [8]>
  %lim = const {value = 6} : i32
  %lims = splat %lim : tile<i32, [8]>
  %mask = cmp %cols0, %lims {pred = "lt"} : tile<i1, [8]>
  %v = gather %x, %rows, %cols, %mask {pad = -1.5} : tile<f32, [8]>
  scatter %y, %v, %rows, %cols, %mask
  %o = atomic %y, %v, %rows, %cols, %mask {kind = "add"} : tile<f32, [8]>
  %o2 = expand_dims %o {axis = 0} : tile<f32, [1, 8]>
  store_tile %old, %o2, %c0, %c0
}
)";

std::string subst(std::string s, const std::string& key, const std::string& v) {
  for (size_t p; (p = s.find(key)) != std::string::npos;) s.replace(p, key.size(), v);
  return s;
}

}  // namespace

TEST(Memory, GatherScatterAtomicWithMask) {
  auto p = parse(subst(subst(kScatter, "SHIFT", "2"), "ROW", "1"));
  Tensor x = random_tensor(ScalarKind::F32, {4, 9}, 30), y = random_tensor(ScalarKind::F32, {4, 9}, 31);
  Tensor old(ScalarKind::F32, {4, 9});
  Tensor y0 = y;
  auto a = args_of({&x, &y, &old});
  run_interp(p.k(), a);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 9; ++c) {
      bool hit = r == 1 && c >= 2 && c < 8;  // columns 2..7 masked on
      double want = hit ? static_cast<float>(x.get(r * 9 + c) + x.get(r * 9 + c)) : y0.get(r * 9 + c);
      EXPECT_EQ(y.get(r * 9 + c), want) << r << "," << c;
    }
  for (int j = 0; j < 8; ++j)  // atomic returns the old values (the scattered ones), 0 when off
    EXPECT_EQ(old.get(j), j < 6 ? x.get(9 + 2 + j) : 0.0) << j;
}

TEST(Memory, MaskedOffOutOfBoundsIsFineMaskedOnIsAnError) {
  // Shift 4: columns 4..9 masked on, and column 9 is out of bounds for C = 9.
  auto p = parse(subst(subst(kScatter, "SHIFT", "4"), "ROW", "3"));
  Tensor x = random_tensor(ScalarKind::F32, {4, 9}, 32), y(ScalarKind::F32, {4, 9}), o(ScalarKind::F32, {4, 9});
  EXPECT_EQ(run_error(p.k(), args_of({&x, &y, &o})),
            "scatter index (3, 9) is out of bounds for view 'y' of shape [4, 9]");
  // Shift 3: columns 3..8 on, 9 and 10 masked off: in bounds, no error.
  auto q = parse(subst(subst(kScatter, "SHIFT", "3"), "ROW", "3"));
  EXPECT_EQ(run_error(q.k(), args_of({&x, &y, &o})), "<no error>");
  // Row 4 is out of bounds: gather pads, scatter fails.
  auto r = parse(subst(subst(kScatter, "SHIFT", "0"), "ROW", "4"));
  EXPECT_EQ(run_error(r.k(), args_of({&x, &y, &o})),
            "scatter index (4, 0) is out of bounds for view 'y' of shape [4, 9]");
}

TEST(Memory, EmbeddingBagFromTextFile) {
  auto p = parse(data_file("gather_scatter.tile"), {{"BLOCK_B", 32}});
  const int64_t V = 5, D = 256, B = 20;
  Tensor table = random_tensor(ScalarKind::BF16, {V, D}, 40);
  Tensor ids = random_tensor(ScalarKind::I32, {B}, 41, 0, 7);  // ids 5, 6 are out of vocab
  Tensor out(ScalarKind::F32, {V, D}), hits(ScalarKind::I32, {V}), lock(ScalarKind::I32, {1});
  auto a = args_of({&table, &ids, &out, &hits, &lock});
  run_interp(p.k(), a);
  Tensor want(ScalarKind::F32, {V, D});
  std::vector<int> hit(V, 0);
  for (int64_t b = 0; b < B; ++b) {
    int64_t id = ids.get_int(b);
    if (id >= V) continue;
    hit[id] = 1;
    for (int64_t d = 0; d < D; ++d)
      want.set(id * D + d, static_cast<float>(want.get(id * D + d) + table.get(id * D + d)));
  }
  EXPECT_EQ(out.data, want.data);
  // hits: scatter of 1 per present id, then atomic max with num_programs (2) at index 0.
  for (int64_t v = 1; v < V; ++v) EXPECT_EQ(hits.get_int(v), hit[v]) << v;
  EXPECT_EQ(hits.get_int(0), 2);
  EXPECT_EQ(lock.get_int(0), 1);  // the first program's CAS 0 -> 1 succeeds
}

TEST(Memory, AtomicOutOfBoundsIsAnError) {
  const char* text = R"(
kernel @at(%y: view<i32, [N]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %i = const {value = 7} : i32
  %v = const {value = 1} : i32
  %o = atomic %y, %v, %i {kind = "add"} : i32
}
)";
  auto p = parse(text);
  Tensor y(ScalarKind::I32, {7});
  EXPECT_EQ(run_error(p.k(), args_of({&y})), "atomic index (7) is out of bounds for view 'y' of shape [7]");
}

TEST(Shape, PermuteBroadcastExtract) {
  const char* text = R"(
kernel @sh(%x: view<i32, [A, B]>, %y: view<i32, [B, A]>, %z: view<i32, [2, 3]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %pid = program_id {axis = 0} : i32
  %ci = const {value = IDX} : i32
  %c1 = add %pid, %ci : i32
  %t = load_tile %x, %c0, %c0 : tile<i32, [4, 6]>
  %p = permute %t {dims = [1, 0]} : tile<i32, [6, 4]>
  store_tile %y, %p, %c0, %c0
  %e = extract_tile %t, %c1, %c1 : tile<i32, [2, 3]>
  store_tile %z, %e, %c0, %c0
}
)";
  auto p = parse(subst(text, "IDX", "1"));
  Tensor x = random_tensor(ScalarKind::I32, {3, 5}, 50), y(ScalarKind::I32, {5, 3}), z(ScalarKind::I32, {2, 3});
  auto a = args_of({&x, &y, &z});
  run_interp(p.k(), a);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(y.get_int(j * 3 + i), x.get_int(i * 5 + j));
  // Sub-tile (1, 1) of the padded [4, 6] tile: rows 2..3, cols 3..5 (row 3, col 5 are padding).
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      int r = 2 + i, c = 3 + j;
      EXPECT_EQ(z.get_int(i * 3 + j), r < 3 && c < 5 ? x.get_int(r * 5 + c) : 0) << i << j;
    }
  auto q = parse(subst(text, "IDX", "2"));
  EXPECT_EQ(run_error(q.k(), args_of({&x, &y, &z})),
            "extract_tile index (2, 2) is out of range: tile<i32, [4, 6]> holds [2, 2] sub-tiles of [2, 3]");
}

TEST(Reduce, RowStatsFromTextFile) {
  auto p = parse(data_file("combiners.tile"), {{"BLOCK_N", 128}});
  const int64_t M = 3, N = 100;
  Tensor x = random_tensor(ScalarKind::F32, {M, N}, 60);
  x.set(1 * N + 17, NAN);  // NaN counts as the largest for argmax
  x.set(2 * N + 5, 1.0);   // ties: the first index wins
  x.set(2 * N + 50, 1.0);
  Tensor best(ScalarKind::I32, {M}), csum(ScalarKind::F32, {M, N}), lse(ScalarKind::F32, {M});
  auto a = args_of({&x, &best, &csum, &lse});
  run_interp(p.k(), a);
  EXPECT_EQ(best.get_int(1), 17);
  EXPECT_EQ(best.get_int(2), 5);
  for (int64_t r = 0; r < M; ++r) {
    // reduce_with: logaddexp combiner, left to right from the first element, in f32.
    float acc = static_cast<float>(x.get(r * N));
    float cs = acc, cm = acc;
    EXPECT_EQ(csum.get(r * N), cm);
    for (int64_t c = 1; c < 128; ++c) {
      float v = c < N ? static_cast<float>(x.get(r * N + c)) : -INFINITY;
      float hi = std::isnan(acc) || std::isnan(v) ? NAN : std::max(acc, v);
      float lo = std::isnan(acc) || std::isnan(v) ? NAN : std::min(acc, v);
      float d = lo - hi;
      float e = static_cast<float>(std::exp(static_cast<double>(d)));
      float s = 1.0f + e;
      float l = static_cast<float>(std::log(static_cast<double>(s)));
      acc = hi + l;
      // scan sum over the zero-padded tile, then scan_with p*0.5 + q (fused).
      float z = c < N ? static_cast<float>(x.get(r * N + c)) : 0.0f;
      cs = cs + z;
      cm = std::fmaf(cm, 0.5f, cs);
      if (c >= N) continue;
      if (std::isnan(cm)) {
        ASSERT_TRUE(std::isnan(csum.get(r * N + c)));
      } else {
        ASSERT_EQ(csum.get(r * N + c), cm) << r << "," << c;
      }
    }
    if (r != 1) EXPECT_EQ(lse.get(r), acc) << r;
    else EXPECT_TRUE(std::isnan(lse.get(r)));
  }
}

TEST(Reduce, BuiltinKindsOnIntsAndBF16) {
  const char* text = R"(
kernel @rd(%x: view<DT, [R, C]>, %y: view<RT, [C]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %c0, %c0 : tile<DT, [4, 8]>
  %s = reduce %t {axis = 0, kind = "KIND"} : tile<RT, [8]>
  store_tile %y, %s, %c0
}
)";
  for (const char* kind : {"sum", "prod", "max", "min", "argmin"}) {
    bool arg = std::string(kind) == "argmin";
    std::string t = subst(subst(subst(text, "DT", "i8"), "RT", arg ? "i32" : "i8"), "KIND", kind);
    auto p = parse(t);
    Tensor x = random_tensor(ScalarKind::I8, {4, 8}, 70), y(arg ? ScalarKind::I32 : ScalarKind::I8, {8});
    auto a = args_of({&x, &y});
    run_interp(p.k(), a);
    for (int c = 0; c < 8; ++c) {
      int64_t acc = x.get_int(c), bi = 0;
      for (int r = 1; r < 4; ++r) {
        int64_t v = x.get_int(r * 8 + c);
        std::string k = kind;
        if (k == "sum") acc = wrap_int(ScalarKind::I8, acc + v);
        else if (k == "prod") acc = wrap_int(ScalarKind::I8, acc * v);
        else if (k == "max") acc = std::max(acc, v);
        else if (k == "min") acc = std::min(acc, v);
        else if (v < x.get_int(bi * 8 + c)) bi = r;
      }
      EXPECT_EQ(y.get_int(c), arg ? bi : acc) << kind << " col " << c;
    }
  }
  // bf16 sums accumulate in f32 and round once at the end.
  auto p = parse(subst(subst(subst(text, "DT", "bf16"), "RT", "bf16"), "KIND", "sum"));
  Tensor x = random_tensor(ScalarKind::BF16, {4, 8}, 71), y(ScalarKind::BF16, {8});
  auto a = args_of({&x, &y});
  run_interp(p.k(), a);
  for (int c = 0; c < 8; ++c) {
    float acc = static_cast<float>(x.get(c));
    for (int r = 1; r < 4; ++r) acc += static_cast<float>(x.get(r * 8 + c));
    EXPECT_EQ(y.get(c), round_to_float(ScalarKind::BF16, acc));
  }
}

TEST(Control, WhileIfFromTextFile) {
  auto p = parse(data_file("control.tile"));
  Tensor x(ScalarKind::I32, {6}), steps(ScalarKind::I32, {6}), flags(ScalarKind::I1, {6});
  int64_t xs[6] = {1, 2, 3, 6, 7, 27}, want[6] = {0, 1, 7, 8, 16, 111};
  for (int i = 0; i < 6; ++i) x.set_int(i, xs[i]);
  auto a = args_of({&x, &steps, &flags});
  run_interp(p.k(), a);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(steps.get_int(i), want[i]) << xs[i];
    EXPECT_EQ(flags.get_int(i), want[i] != 0) << xs[i];
  }
}

TEST(Errors, ForStepGridRawAndUnbound) {
  const char* loop = R"(
kernel @lp(%y: view<i32, [N]>) {
  grid {
    %g = const {value = GRID} : i32
    yield %g
  }
  %c0 = const {value = 0} : i32
  %c9 = const {value = 9} : i32
  %st = const {value = STEP} : i32
  %r = for %c0, %c9, %st, %c0 : i32 {
    ^(%i: i32, %acc: i32):
    %n = add %acc, %i : i32
    yield %n
  }
  %t = splat %r : tile<i32, [1]>
  store_tile %y, %t, %c0
}
)";
  Tensor y(ScalarKind::I32, {1});
  auto ok = parse(subst(subst(loop, "GRID", "1"), "STEP", "2"));
  auto a = args_of({&y});
  run_interp(ok.k(), a);
  EXPECT_EQ(y.get_int(0), 0 + 2 + 4 + 6 + 8);
  EXPECT_EQ(run_error(parse(subst(subst(loop, "GRID", "1"), "STEP", "0")).k(), args_of({&y})),
            "'for' step is not positive: a step of 0 or below is an error");
  // A grid of 0 programs runs nothing and is not an error (a negative one: tests/cpu
  // CpuHostile.RunTimeRulesAreTheInterpretersOnCpu, tests/errors/verify_grid_negative.tile).
  y.set_int(0, 123);
  EXPECT_EQ(run_error(parse(subst(subst(loop, "GRID", "0"), "STEP", "1")).k(), args_of({&y})), "<no error>");
  EXPECT_EQ(y.get_int(0), 123);

  auto raw = parse(data_file("raw.tile"));
  Tensor u = random_tensor(ScalarKind::U32, {256}, 80, 0, 100), o(ScalarKind::I32, {256});
  EXPECT_EQ(run_error(raw.k(), args_of({&u, &o})), "raw op 'popcount' cannot run on the interpreter");

  auto unbound = parse_module(data_file("raw.tile"), "raw.tile");
  EXPECT_EQ(run_error(*unbound->kernels[0], args_of({&u, &o})),
            "kernel 'raw_popcount' is not bound: constexpr 'BLOCK' is still a param op; bind its "
            "constexprs before running it");
}

TEST(Errors, ArgumentBinding) {
  auto p = parse(data_file("matmul.tile"));
  Tensor a = random_tensor(ScalarKind::F16, {4, 8}, 1), b = random_tensor(ScalarKind::F16, {8, 5}, 2);
  Tensor c(ScalarKind::F16, {4, 5}), bad_rank(ScalarKind::F16, {8}), bad_k = random_tensor(ScalarKind::F16, {9, 5}, 3);
  Tensor bad_dt(ScalarKind::F32, {4, 8});
  EXPECT_EQ(run_error(p.k(), args_of({&a, &bad_rank, &c})),
            "argument 'b' of kernel 'matmul' has rank 1, expected 2 (view<f16, [K, N]>)");
  EXPECT_EQ(run_error(p.k(), args_of({&a, &bad_k, &c})), "dim 'K' is 9 in 'b' but 8 in 'a'");
  EXPECT_EQ(run_error(p.k(), args_of({&bad_dt, &b, &c})),
            "argument 'a' of kernel 'matmul' has dtype f32, expected f16 (view<f16, [M, K]>)");
  EXPECT_EQ(run_error(p.k(), args_of({&a, nullptr, &c})),
            "argument 'b' of kernel 'matmul' needs a tensor (view<f16, [K, N]>)");
  EXPECT_EQ(run_error(p.k(), args_of({&a, &b})), "kernel 'matmul' takes 3 arguments, got 2");
  Sizes s = bind_dims(p.k(), args_of({&a, &b, &c}));
  EXPECT_EQ(s, (Sizes{{"K", 8}, {"M", 4}, {"N", 5}}));
}

TEST(Errors, EndlessWhileIsReportedNotHung) {
  auto p = parse(R"(
kernel @spin(%y: view<i32, [N]>) {
  grid {
    %g = const {value = 1} : i32
    yield %g
  }
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %r = while %c0 : i32 {
    ^(%a: i32):
    %t = cmp %c1, %c0 {pred = "gt"} : i1
    yield %t
  } do {
    ^(%b: i32):
    %n = add %b, %c1 : i32
    yield %n
  }
  %t = splat %r : tile<i32, [1]>
  store_tile %y, %t, %c0
}
)");
  Tensor y(ScalarKind::I32, {1});
  auto a = args_of({&y});
  InterpOptions opts;
  opts.max_while_iterations = 1000;
  try {
    run_interp(p.k(), a, opts);
    FAIL() << "an endless while loop ran to completion";
  } catch (const TesseraError& e) {
    EXPECT_EQ(e.message(), "while loop did not end after 1000 iterations (the limit on every backend)");
    EXPECT_EQ(e.loc().line, 9);
  }
}
