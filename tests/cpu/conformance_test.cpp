// Conformance of the cpu backend with the interpreter on the edge cases of docs/semantics.md:
// NaN / inf / -0.0 through min, max, cmp and arg-reductions, shifts by >= the width and by
// negative amounts, wrap-around, INT_MIN / -1, casts at and beyond every integer range, narrow
// float rounding, gather/scatter masks and duplicates, atomics, reductions and scans along every
// axis of 3-D tiles, sub-tiles, permutes, dots, nested control flow.
//
// Inputs are random values mixed with the edge values of each type. Exact ops are compared bit
// for bit (a zero's sign included); the rest with tolerance_for().
#include <cstring>
#include <random>
#include <tuple>

#include "CpuTestUtil.h"
#include "support/Float.h"

namespace tessera::cputest {
namespace {

constexpr int kN = 64;  // every view is [64] or [4, 4, 4]: one tile, nothing padded

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "conf.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

const std::string kGrid1 = "  grid {\n    %one = const {value = 1} : i32\n    yield %one\n  }\n  %c0 = const {value = 0} : i32\n";

// Edge values that every float test mixes in (rounded to the element type when stored).
const double kFloatEdges[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5,
                              1.5, -2.5, 127.5, -128.5, 128.0, -129.0, 255.5, 256.0, 32767.5,
                              -32768.9, 65504.0, 65519.0, 65520.0, 448.0, 464.0, 57344.0, 61440.0,
                              2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0,
                              4294967040.0, 4294967296.0, 9.2233720368547758e18, -9.2233720368547758e18,
                              1.8446744073709552e19, 1e30, -1e30, 1e-40, -1e-45, 6e-8, 1e300};

// Fill a tensor: first the edge values (floats) or edge integers, then random values.
void fill(Tensor& t, uint64_t seed, int64_t lo = -100, int64_t hi = 100) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-3.0, 3.0);
  ScalarKind k = t.dtype;
  int64_t n = t.numel();
  std::vector<int64_t> int_edges;
  if (!is_float(k)) {
    int bits = scalar_bits(k);
    if (is_signed_int(k)) {
      int64_t mx = bits == 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1;
      int_edges = {-mx - 1, -mx, -1, 0, 1, mx, mx - 1, -2};
    } else if (k != ScalarKind::I1) {
      int_edges = {0, 1, -1, -2, int64_t{1} << (bits - 1), (int64_t{1} << (bits - 1)) - 1};
    }
  }
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int64_t j = 0; j < n; ++j) {
    int64_t i = perm[j];
    if (is_float(k)) {
      if (j < static_cast<int64_t>(std::size(kFloatEdges))) t.set(i, kFloatEdges[j] * ((j % 3 == 2) ? -1 : 1));
      else t.set(i, uni(rng) * std::ldexp(1.0, static_cast<int>(rng() % 40) - 20));
    } else if (j < static_cast<int64_t>(int_edges.size())) {
      t.set_int(i, int_edges[j]);
    } else {
      t.set_int(i, lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo)));
    }
  }
}

bool same_bits(const Tensor& a, const Tensor& b, int64_t i) {
  if (is_float(a.dtype)) {
    double x = a.get(i), y = b.get(i);
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
    return x == y && std::signbit(x) == std::signbit(y);
  }
  return a.get_int(i) == b.get_int(i);
}

// Runs `k` on the interpreter and the cpu backend from the same inputs (`ins` fills every view
// tensor; outputs are pre-filled too so that untouched elements must agree as well) and
// compares every tensor: bit-exact when `exact`, else within tolerance_for().
void check(const Kernel& k, std::vector<Tensor> want, bool exact, const std::string& what) {
  std::vector<Tensor> got = want;
  auto wa = args_for(k, want), ga = args_for(k, got);
  run_interp(k, wa);
  compile_cpu(k, test_options())->run(ga);
  for (size_t t = 0; t < want.size(); ++t) {
    int bad = 0;
    Tolerance tol = tolerance_for(want[t].dtype);
    for (int64_t i = 0; i < want[t].numel() && bad < 5; ++i) {
      bool ok = same_bits(want[t], got[t], i);
      if (!ok && !exact && is_float(want[t].dtype)) {
        double w = want[t].get(i), g = got[t].get(i);
        ok = std::fabs(w - g) <= tol.atol + tol.rtol * std::fabs(w);
      }
      if (!ok) {
        ++bad;
        ADD_FAILURE() << what << ": tensor " << t << " element " << i << ": cpu " << got[t].get(i) << " ("
                      << got[t].get_int(i) << ") interp " << want[t].get(i) << " (" << want[t].get_int(i) << ")";
      }
    }
  }
}

std::vector<Tensor> tensors_for(const Kernel& k, uint64_t seed, int64_t lo = -100, int64_t hi = 100) {
  std::vector<Tensor> ts;
  for (const Value* p : k.params) {
    if (!p->type.is_view()) continue;
    std::vector<int64_t> shape;
    for (const Dim& d : p->type.shape) shape.push_back(d.value);
    ts.emplace_back(p->type.elem, shape);
    fill(ts.back(), seed++, lo, hi);
  }
  return ts;
}

std::string view(const std::string& t) { return "view<" + t + ", [64]>"; }
std::string tile(const std::string& t) { return "tile<" + t + ", [64]>"; }

// z = OP(x, y) on [64] tiles of type T (result type R).
std::string binary(const std::string& op, const std::string& T, const std::string& R, const std::string& attrs = "") {
  return "kernel @b(%x: " + view(T) + ", %y: " + view(T) + ", %z: " + view(R) + ") {\n" + kGrid1 +
         "  %a = load_tile %x, %c0 : " + tile(T) + "\n  %b = load_tile %y, %c0 : " + tile(T) + "\n" +
         "  %r = " + op + " %a, %b" + attrs + " : " + tile(R) + "\n  store_tile %z, %r, %c0\n}\n";
}

std::string unary(const std::string& op, const std::string& T, const std::string& R) {
  return "kernel @u(%x: " + view(T) + ", %z: " + view(R) + ") {\n" + kGrid1 + "  %a = load_tile %x, %c0 : " +
         tile(T) + "\n  %r = " + op + " %a : " + tile(R) + "\n  store_tile %z, %r, %c0\n}\n";
}

const char* kFloats[] = {"f32", "f64", "bf16", "f16", "f8e4m3", "f8e5m2"};
const char* kInts[] = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"};

TEST(CpuConformance, FloatMinMaxCmpWithNanInfAndSignedZeros) {
  uint64_t seed = 100;
  for (const char* T : kFloats) {
    for (const char* op : {"min", "max"}) {
      auto k = bound(binary(op, T, T));
      check(*k, tensors_for(*k, seed++), true, std::string(op) + " " + T);
    }
    for (const char* p : {"eq", "ne", "lt", "le", "gt", "ge"}) {
      auto k = bound(binary("cmp", T, "i1", std::string(" {pred = \"") + p + "\"}"));
      check(*k, tensors_for(*k, seed++), true, std::string("cmp ") + p + " " + T);
    }
  }
}

// z = cast(x) for x [N] of type F, z of type T, in tiles of 1024.
std::string cast_rows(const std::string& F, const std::string& T) {
  return "kernel @h(%x: view<" + F + ", [N]>, %z: view<" + T + ", [N]>) {\n  grid {\n" +
         "    %n = dim %x {axis = 0} : i32\n    %b = const {value = 1024} : i32\n    %g = cdiv %n, %b : i32\n" +
         "    yield %g\n  }\n  %p = program_id {axis = 0} : i32\n  %a = load_tile %x, %p : tile<" + F +
         ", [1024]>\n  %r = cast %a : tile<" + T + ", [1024]>\n  store_tile %z, %r, %p\n}\n";
}

// Every f16, f8e4m3 and f8e5m2 bit pattern loaded (tsr::h2f, e4m32f, e5m22f: branch-free, so
// that narrow tile loads vectorize) and cast to f32: subnormals, infinities of both signs, NaNs,
// the same values as the interpreter.
TEST(CpuConformance, EveryNarrowFloatBitPatternLoads) {
  for (auto [t, kind, bytes] : {std::tuple{"f16", ScalarKind::F16, 2}, {"f8e4m3", ScalarKind::F8E4M3, 1},
                                {"f8e5m2", ScalarKind::F8E5M2, 1}}) {
    auto k = bound(cast_rows(t, "f32"));
    const int64_t n = int64_t{1} << (8 * bytes);
    std::vector<Tensor> ts;
    ts.emplace_back(kind, std::vector<int64_t>{n});
    ts.emplace_back(ScalarKind::F32, std::vector<int64_t>{n});
    for (int64_t b = 0; b < n; ++b) {
      const uint16_t h = static_cast<uint16_t>(b);
      std::memcpy(ts[0].data.data() + bytes * b, &h, static_cast<size_t>(bytes));  // little-endian
    }
    check(*k, ts, true, std::string(t) + " bits");
  }
}

// f32 -> f16 at every rounding boundary (tsr::f2h's branch-free float form): each f16 value,
// the midpoint to the next (a tie: to even) and the floats either side of it, both signs, up
// to and beyond the largest finite, subnormals, NaN; the same bits as the interpreter.
TEST(CpuConformance, F32ToF16AtEveryRoundingBoundary) {
  auto k = bound(cast_rows("f32", "f16"));
  auto f16_value = [](uint32_t b) {  // b < 0x7c00: a finite positive f16
    const uint32_t e = b >> 10, m = b & 0x3ffu;
    return e ? std::ldexp(1.0 + m / 1024.0, static_cast<int>(e) - 15) : std::ldexp(static_cast<double>(m), -24);
  };
  std::vector<float> xs = {NAN, -NAN, INFINITY, -INFINITY, 1e-45f, -1e-45f, 1e-30f, 65536.0f, 1e30f};
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    const double lo = f16_value(b), hi = b + 1 < 0x7c00 ? f16_value(b + 1) : 65536.0;
    const float mid = static_cast<float>((lo + hi) / 2);
    for (float x : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  std::vector<Tensor> ts;
  ts.emplace_back(ScalarKind::F32, std::vector<int64_t>{static_cast<int64_t>(xs.size())});
  ts.emplace_back(ScalarKind::F16, std::vector<int64_t>{static_cast<int64_t>(xs.size())});
  std::memcpy(ts[0].data.data(), xs.data(), 4 * xs.size());
  check(*k, ts, true, "f32 -> f16");
}

TEST(CpuConformance, SignedZerosThroughMinMax) {
  // min(-0, +0) is -0 and max(-0, +0) is +0 in either operand order.
  for (const char* T : {"f32", "f64", "bf16", "f16"}) {
    for (const char* op : {"min", "max"}) {
      auto k = bound(binary(op, T, T));
      auto ts = tensors_for(*k, 7);
      for (int i = 0; i < kN; ++i) {
        ts[0].set(i, (i % 2) ? -0.0 : 0.0);
        ts[1].set(i, (i % 2) ? 0.0 : -0.0);
      }
      check(*k, ts, true, std::string(op) + " of zeros " + T);
    }
  }
}

TEST(CpuConformance, IntegerArithmeticWrapsAndDivRemOfMin) {
  uint64_t seed = 200;
  for (const char* T : kInts) {
    for (const char* op : {"add", "sub", "mul", "min", "max", "and", "or", "xor"}) {
      auto k = bound(binary(op, T, T));
      check(*k, tensors_for(*k, seed++), true, std::string(op) + " " + T);
    }
    for (const char* op : {"div", "rem", "cdiv"}) {
      auto k = bound(binary(op, T, T));
      auto ts = tensors_for(*k, seed++);
      for (int i = 0; i < kN; ++i) {
        if (ts[1].get_int(i) == 0) ts[1].set_int(i, 3);
        if (i < 8) ts[1].set_int(i, -1);  // the edges (MIN, MAX, ...) of x divided by -1
      }
      check(*k, ts, true, std::string(op) + " " + T);
    }
    for (const char* op : {"neg", "abs", "not"}) {
      if (std::string(op) != "not" && T[0] == 'u') continue;
      auto k = bound(unary(op, T, T));
      check(*k, tensors_for(*k, seed++), true, std::string(op) + " " + T);
    }
  }
}

TEST(CpuConformance, ShiftsByWidthAndNegativeAmounts) {
  uint64_t seed = 300;
  for (const char* T : kInts) {
    for (const char* op : {"shl", "shr"}) {
      auto k = bound(binary(op, T, T));
      auto ts = tensors_for(*k, seed++);
      int bits = scalar_bits(*scalar_from_name(T));
      for (int i = 0; i < kN; ++i) {
        int64_t amount = (i * 37 + 5) % (bits + 10);  // 0 .. width + 9
        if (i % 7 == 3) amount = -(i % 5) - 1;        // negative
        if (i % 11 == 4) amount = bits;               // exactly the width
        ts[1].set_int(i, amount);
      }
      check(*k, ts, true, std::string(op) + " " + T);
    }
  }
}

TEST(CpuConformance, CastsFloatToEveryIntAtAndBeyondTheRange) {
  uint64_t seed = 400;
  for (const char* F : kFloats)
    for (const char* I : {"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}) {
      auto k = bound(unary("cast", F, I));
      check(*k, tensors_for(*k, seed++), true, std::string("cast ") + F + " -> " + I);
    }
}

TEST(CpuConformance, CastsBetweenFloatsRoundOnce) {
  uint64_t seed = 500;
  for (const char* F : kFloats)
    for (const char* G : kFloats) {
      if (std::string(F) == G) continue;
      auto k = bound(unary("cast", F, G));
      check(*k, tensors_for(*k, seed++), true, std::string("cast ") + F + " -> " + G);
    }
}

TEST(CpuConformance, CastsFromIntegersAndI1) {
  uint64_t seed = 600;
  for (const char* I : {"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}) {
    for (const char* G : {"f32", "f64", "bf16", "f16", "f8e4m3", "f8e5m2", "i1", "i8", "i32", "u16", "u64"}) {
      if (std::string(I) == G) continue;
      auto k = bound(unary("cast", I, G));
      auto ts = tensors_for(*k, seed++, -100000, 100000);
      if (scalar_bits(*scalar_from_name(I)) == 64)  // big values whose f64 rounding is a tie of f32
        for (int i = 8; i < 16; ++i) ts[0].set_int(i, (int64_t{1} << 62) + (int64_t{1} << 38) + (i - 8) + 1);
      check(*k, ts, true, std::string("cast ") + I + " -> " + G);
    }
  }
}


std::string view3(const std::string& t) { return "view<" + t + ", [4, 4, 4]>"; }
std::string tile3(const std::string& t) { return "tile<" + t + ", [4, 4, 4]>"; }

// reduce / scan of a [4, 4, 4] tile along `axis`.
std::string reduce3(const std::string& op, const std::string& kind, int axis, const std::string& T) {
  bool scan = op == "scan";
  bool arg = kind == "argmax" || kind == "argmin";
  std::string R = arg ? "i32" : T;
  std::string rtile = scan ? tile3(T) : "tile<" + R + ", [4, 4]>";
  std::string rview = scan ? view3(T) : "view<" + R + ", [4, 4]>";
  std::string idx = scan ? "%c0, %c0, %c0" : "%c0, %c0";
  return "kernel @r(%x: " + view3(T) + ", %z: " + rview + ") {\n" + kGrid1 + "  %a = load_tile %x, %c0, %c0, %c0 : " +
         tile3(T) + "\n  %r = " + op + " %a {axis = " + std::to_string(axis) + ", kind = \"" + kind + "\"} : " + rtile +
         "\n  store_tile %z, %r, " + idx + "\n}\n";
}

TEST(CpuConformance, ReductionsAndScansAlongEveryAxisOf3DTiles) {
  uint64_t seed = 700;
  for (const char* T : {"f32", "f64", "bf16", "f16", "f8e4m3", "i32", "u8", "i64"})
    for (int axis = 0; axis < 3; ++axis) {
      for (const char* kind : {"sum", "prod", "max", "min", "argmax", "argmin"}) {
        auto k = bound(reduce3("reduce", kind, axis, T));
        bool exact = !is_float(*scalar_from_name(T)) || std::string(kind) != "sum" && std::string(kind) != "prod";
        check(*k, tensors_for(*k, seed++, -9, 9), exact, std::string("reduce ") + kind + " axis " + std::to_string(axis) + " " + T);
      }
      for (const char* kind : {"sum", "prod", "max", "min"}) {
        auto k = bound(reduce3("scan", kind, axis, T));
        bool exact = !is_float(*scalar_from_name(T)) || std::string(kind) != "sum" && std::string(kind) != "prod";
        check(*k, tensors_for(*k, seed++, -9, 9), exact, std::string("scan ") + kind + " axis " + std::to_string(axis) + " " + T);
      }
    }
}

// Narrow float sums accumulate in f32 and round each output: a scan of 256 then ones keeps
// growing (in bf16 arithmetic 256 + 1 would stay 256).
TEST(CpuConformance, NarrowFloatScansAccumulateInF32) {
  for (const char* T : {"bf16", "f16", "f8e5m2"}) {
    auto k = bound("kernel @s(%x: " + view(T) + ", %z: " + view(T) + ", %r: view<" + T + ", [1]>) {\n" + kGrid1 +
                   "  %a = load_tile %x, %c0 : " + tile(T) + "\n  %s = scan %a {axis = 0, kind = \"sum\"} : " +
                   tile(T) + "\n  store_tile %z, %s, %c0\n  %t = reduce %a {axis = 0, kind = \"sum\"} : " + T +
                   "\n  %t1 = splat %t : tile<" + T + ", [1]>\n  store_tile %r, %t1, %c0\n}\n");
    auto ts = tensors_for(*k, 1);
    double big = std::string(T) == "f16" ? 2048 : 256;
    for (int i = 0; i < kN; ++i) ts[0].set(i, i == 0 ? big : 1.0 + (i % 3 == 0 ? 0.125 : 0.0));
    check(*k, ts, false, std::string("scan of ") + T);
  }
}

TEST(CpuConformance, GatherScatterMasksAndDuplicates) {
  // Indices in [-8, 72): some out of bounds; many duplicates; a random mask.
  for (const char* T : {"f32", "bf16", "i16", "u64"}) {
    auto k = bound("kernel @g(%x: " + view(T) + ", %i: view<i32, [64]>, %m: view<i1, [64]>, %z: " + view(T) +
                   ", %w: " + view(T) + ") {\n" + kGrid1 + "  %idx = load_tile %i, %c0 : tile<i32, [64]>\n" +
                   "  %mk = load_tile %m, %c0 : tile<i1, [64]>\n  %g = gather %x, %idx, %mk {pad = 7} : " + tile(T) +
                   "\n  store_tile %z, %g, %c0\n  %v = load_tile %x, %c0 : " + tile(T) +
                   "\n  %ones = arange {start = 0} : tile<i32, [64]>\n" +
                   "  %c8 = const {value = 8} : i32\n  %c8s = splat %c8 : tile<i32, [64]>\n" +
                   "  %lo = cmp %idx, %c8s {pred = \"ge\"} : tile<i1, [64]>\n  %sm = and %mk, %lo : tile<i1, [64]>\n" +
                   "  %sidx = rem %idx, %c8s : tile<i32, [64]>\n  %pos = add %sidx, %c8s : tile<i32, [64]>\n" +
                   "  scatter %w, %v, %pos, %sm\n  scatter %w, %v, %ones\n}\n");
    auto ts = tensors_for(*k, 11);
    std::mt19937_64 rng(5);
    for (int i = 0; i < kN; ++i) ts[1].set_int(i, static_cast<int64_t>(rng() % 80) - 8);
    check(*k, ts, true, std::string("gather/scatter ") + T);
    // The second scatter overwrote everything; a variant without it checks "last wins".
    auto k2 = bound("kernel @g(%x: " + view(T) + ", %i: view<i32, [64]>, %m: view<i1, [64]>, %w: " + view(T) +
                    ") {\n" + kGrid1 + "  %idx = load_tile %i, %c0 : tile<i32, [64]>\n" +
                    "  %mk = load_tile %m, %c0 : tile<i1, [64]>\n  %v = load_tile %x, %c0 : " + tile(T) +
                    "\n  %c8 = const {value = 8} : i32\n  %c8s = splat %c8 : tile<i32, [64]>\n" +
                    "  %sidx = rem %idx, %c8s : tile<i32, [64]>\n  %z0 = const {value = 0} : i32\n" +
                    "  %zs = splat %z0 : tile<i32, [64]>\n  %neg = cmp %sidx, %zs {pred = \"lt\"} : tile<i1, [64]>\n" +
                    "  %fix = add %sidx, %c8s : tile<i32, [64]>\n  %pos = where %neg, %fix, %sidx : tile<i32, [64]>\n" +
                    "  scatter %w, %v, %pos, %mk\n}\n");
    auto t2 = tensors_for(*k2, 12);
    for (int i = 0; i < kN; ++i) t2[1].set_int(i, static_cast<int64_t>(rng() % 80) - 8);
    check(*k2, t2, true, std::string("scatter duplicates ") + T);
  }
}

TEST(CpuConformance, AtomicsReturnOldValues) {
  for (const char* T : {"f32", "i32", "u8", "f16", "i64"})
    for (const char* kind : {"add", "max", "min"}) {
      auto k = bound("kernel @a(%x: " + view(T) + ", %i: view<i32, [64]>, %m: view<i1, [64]>, %z: " + view(T) +
                     ", %w: " + view(T) + ") {\n" + kGrid1 + "  %idx = load_tile %i, %c0 : tile<i32, [64]>\n" +
                     "  %mk = load_tile %m, %c0 : tile<i1, [64]>\n  %v = load_tile %x, %c0 : " + tile(T) +
                     "\n  %o = atomic %w, %v, %idx, %mk {kind = \"" + kind + "\"} : " + tile(T) +
                     "\n  store_tile %z, %o, %c0\n}\n");
      auto ts = tensors_for(*k, 21, -9, 9);
      std::mt19937_64 rng(6);
      for (int i = 0; i < kN; ++i) ts[1].set_int(i, static_cast<int64_t>(rng() % 16));  // duplicates
      check(*k, ts, !is_float(*scalar_from_name(T)) || std::string(kind) != "add", std::string("atomic ") + kind + " " + T);
    }
}

TEST(CpuConformance, AtomicCasComparesBitPatterns) {
  for (const char* T : {"f32", "f64", "bf16", "i32"}) {
    auto k = bound("kernel @a(%c: " + view(T) + ", %x: " + view(T) + ", %z: " + view(T) + ", %w: " + view(T) +
                   ") {\n" + kGrid1 + "  %idx = arange {start = 0} : tile<i32, [64]>\n" +
                   "  %cm = load_tile %c, %c0 : " + tile(T) + "\n  %v = load_tile %x, %c0 : " + tile(T) +
                   "\n  %o = atomic_cas %w, %cm, %v, %idx : " + tile(T) + "\n  store_tile %z, %o, %c0\n}\n");
    auto ts = tensors_for(*k, 31);
    bool f = is_float(*scalar_from_name(T));
    for (int i = 0; i < kN; ++i) {
      int c = i % 4;
      if (f && c == 0) ts[0].set(i, 0.0), ts[3].set(i, -0.0);          // -0 vs +0
      else if (f && c == 1) ts[0].set(i, NAN), ts[3].set(i, NAN);      // NaN vs the same NaN
      else if (c == 2) ts[0].set_int(i, 5), ts[3].set_int(i, 5);       // equal
    }
    check(*k, ts, true, std::string("atomic_cas ") + T);
  }
}

TEST(CpuConformance, SubTilesAtTheLastPositionAndPermutes) {
  for (const char* T : {"f32", "bf16", "i8"}) {
    for (const char* dims : {"[2, 0, 1]", "[1, 2, 0]", "[0, 2, 1]", "[2, 1, 0]"}) {
      auto k = bound("kernel @p(%x: " + view3(T) + ", %z: " + view3(T) + ", %e: view<" + T + ", [2, 4, 1]>) {\n" + kGrid1 +
                     "  %a = load_tile %x, %c0, %c0, %c0 : " + tile3(T) + "\n  %p = permute %a {dims = " + dims + "} : " +
                     tile3(T) + "\n  %c1 = const {value = 1} : i32\n  %c3 = const {value = 3} : i32\n" +
                     "  %s = extract_tile %p, %c1, %c0, %c3 : tile<" + T + ", [2, 4, 1]>\n" +
                     "  %n = neg %s : tile<" + T + ", [2, 4, 1]>\n" +
                     "  %q = insert_tile %p, %n, %c1, %c0, %c3 : " + tile3(T) + "\n" +
                     "  store_tile %z, %q, %c0, %c0, %c0\n  store_tile %e, %s, %c0, %c0, %c0\n}\n");
      check(*k, tensors_for(*k, 41), true, std::string("permute/extract/insert ") + T + " " + dims);
    }
  }
}

TEST(CpuConformance, DotAccumulators) {
  struct Case { const char* in; const char* acc; };
  for (Case c : {Case{"f16", "f16"}, Case{"i8", "i32"}, Case{"u8", "i32"}, Case{"u8", "u32"}, Case{"bf16", "f32"},
                 Case{"f8e4m3", "f32"}, Case{"f64", "f64"}}) {
    std::string I = c.in, A = c.acc;
    auto k = bound("kernel @d(%a: view<" + I + ", [8, 16]>, %b: view<" + I + ", [16, 8]>, %c: view<" + A +
                   ", [8, 8]>, %z: view<" + A + ", [8, 8]>) {\n" + kGrid1 + "  %x = load_tile %a, %c0, %c0 : tile<" + I +
                   ", [8, 16]>\n  %y = load_tile %b, %c0, %c0 : tile<" + I + ", [16, 8]>\n  %s = load_tile %c, %c0, %c0 : tile<" +
                   A + ", [8, 8]>\n  %r = dot %x, %y, %s : tile<" + A + ", [8, 8]>\n  store_tile %z, %r, %c0, %c0\n}\n");
    auto ts = tensors_for(*k, 51, -128, 128);
    for (auto& t : ts)
      if (is_float(t.dtype))
        for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::ldexp(static_cast<double>((i * 7919) % 61) - 30, -3));
    check(*k, ts, I == "f16", "dot " + I + " -> " + A);  // f16 inputs: exact, fma rounded once
  }
}

TEST(CpuConformance, NestedWhileIfFor) {
  // Collatz steps of each element (while), with an if inside and a for around, on i32.
  auto k = bound(R"(kernel @c(%x: view<i32, [64]>, %z: view<i32, [64]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c2 = const {value = 2} : i32
  %c3 = const {value = 3} : i32
  %c64 = const {value = 64} : i32
  %acc = for %c0, %c64, %c1, %c0 : i32 {
    ^(%i: i32, %a: i32):
    %v0 = gather %x, %i : i32
    %va = abs %v0 : i32
    %v = add %va, %c1 : i32
    %n, %s = while %v, %c0 : i32, i32 {
      ^(%cv: i32, %cs: i32):
      %more = cmp %cv, %c1 {pred = "ne"} : i1
      yield %more
    } do {
      ^(%bv: i32, %bs: i32):
      %r = rem %bv, %c2 : i32
      %odd = cmp %r, %c0 {pred = "ne"} : i1
      %nv = if %odd : i32 {
        %t = mul %bv, %c3 : i32
        %t1 = add %t, %c1 : i32
        yield %t1
      } else {
        %h = div %bv, %c2 : i32
        yield %h
      }
      %ns = add %bs, %c1 : i32
      yield %nv, %ns
    }
    scatter %z, %s, %i
    %a2 = add %a, %s : i32
    yield %a2
  }
  %last = const {value = 63} : i32
  scatter %z, %acc, %last
}
)");
  auto ts = tensors_for(*k, 61);
  for (int i = 0; i < kN; ++i) ts[0].set_int(i, (i * 7919) % 2000 - 1000);  // no wrap-around cycles
  check(*k, ts, true, "collatz");
}

}  // namespace
}  // namespace tessera::cputest
