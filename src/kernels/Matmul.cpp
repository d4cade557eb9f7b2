// c = a @ b, tiled: one program per BLOCK_M x BLOCK_N tile of c, looping over K in BLOCK_K
// steps with an f32 accumulator (a pipelined loop). Padding reads 0, which adds nothing.
#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("matmul");
  auto a = k.view("a", dt, {"M", "K"}), b = k.view("b", dt, {"K", "N"});
  auto c = k.view("c", dt, {"M", "N"});
  // 16-bit inputs run on tensor cores: on the cuda backend mma.sync fed by a cp.async ring, or
  // TMA + wgmma on sm_90a. 128x256 output tiles over 8 warps give each warp a 64x64 block, 32
  // mma per 8 ldmatrix.x4 per k16 step (128x128 gave 64x32 blocks, 16 per 6); one CTA per SM
  // with double-buffered fragments, and BK = 64 halves the barriers per k against BK = 32
  // while the ring (3 stages on sm_80, 4 on sm_90) stays ahead of memory. It is also the tile
  // the sm_90a wgmma path takes (target_configs below).
  bool tc = dt == ScalarKind::BF16 || dt == ScalarKind::F16;
  auto BM = k.constexpr_("BLOCK_M", {16, 32, 64, 128, 192}, tc ? 128 : 64);
  // (96: 16-bit types only, for the tuner; see below.)
  auto BN = k.constexpr_("BLOCK_N", tc ? std::vector<int64_t>{16, 32, 64, 96, 128, 192, 256}
                                       : std::vector<int64_t>{16, 32, 64, 128, 192, 256},
                         tc ? 256 : 64);
  auto BK = k.constexpr_("BLOCK_K", {16, 32, 64, 128}, tc ? 64 : 32);
  k.grid({cdiv(a.dim(0), BM), cdiv(b.dim(1), BN)});
  auto pm = program_id(0), pn = program_id(1);

  Var acc = zeros({BM, BN}, f32);
  for_range(0, cdiv(a.dim(1), BK), 1, [&](Val kk) {
    auto at = a.tile({BM, BK}).load({pm, kk});
    auto bt = b.tile({BK, BN}).load({kk, pn});
    acc = dot(at, bt, acc);
  }, pipeline(tc ? 4 : 3));
  c.tile({BM, BN}).store({pm, pn}, acc.to(dt));
  return k.finish();
}

void reference(std::vector<KernelArg>& args, const Sizes& sizes) {
  matmul_reference(*args[0].tensor, *args[1].tensor, *args[2].tensor, sizes);
}

// c's dot over K terms in f32: gamma_K * (|a| @ |b|) (Tolerance.h).
ErrorBounds error_bounds(const std::vector<KernelArg>& args, const Sizes& sizes) {
  return bounds_of_one(3, 2, matmul_error_bound(*args[0].tensor, *args[1].tensor, sizes));
}

}  // namespace

namespace {

// (a @ b)[i, j] in double, or (|a| @ |b|)[i, j] when `magnitude`: row-major [M, N]. Each
// element is the sum over p in increasing order, whatever the blocking and the threads (so the
// result does not depend on them): columns in one block per core when the problem is large (an
// LLM GEMM's reference on a few rows took seconds decoding b element by element), rows in
// blocks of 16 within it, each b value decoded once per row block.
std::vector<double> dot_rows(const Tensor& a, const Tensor& b, const Sizes& sizes, bool b_is_nk, bool magnitude) {
  const int64_t M = sizes.at("M"), N = sizes.at("N"), K = sizes.at("K");
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  constexpr int64_t kRows = 16;
  // b's element e: bf16 and f32 read directly (Tensor::get's general decode costs 10-20 ns).
  auto b_at = [&b](int64_t e) -> double {
    if (b.dtype == ScalarKind::BF16) {
      uint16_t h;
      std::memcpy(&h, b.data.data() + 2 * e, 2);
      if (((h >> 7) & 0xFF) != 0xFF) return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    } else if (b.dtype == ScalarKind::F32) {
      float f;
      std::memcpy(&f, b.data.data() + 4 * e, 4);
      return f;
    }
    return b.get(e);
  };
  auto columns = [&](int64_t j0, int64_t j1) {
    std::vector<double> bv(static_cast<size_t>(j1 - j0)), av(kRows);
    for (int64_t i0 = 0; i0 < M; i0 += kRows) {
      const int64_t i1 = std::min(M, i0 + kRows);
      for (int64_t p = 0; p < K; ++p) {
        for (int64_t j = j0; j < j1; ++j) {
          double x = b_at(b_is_nk ? j * K + p : p * N + j);
          bv[static_cast<size_t>(j - j0)] = magnitude ? std::fabs(x) : x;
        }
        for (int64_t i = i0; i < i1; ++i) {
          double x = a.get(i * K + p);
          av[static_cast<size_t>(i - i0)] = magnitude ? std::fabs(x) : x;
        }
        for (int64_t i = i0; i < i1; ++i) {
          double* row = c.data() + i * N;
          const double x = av[static_cast<size_t>(i - i0)];
          for (int64_t j = j0; j < j1; ++j) row[j] += x * bv[static_cast<size_t>(j - j0)];
        }
      }
    }
  };
  const int64_t cores = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t threads = std::clamp<int64_t>(M * N * K / (int64_t{1} << 24), 1, std::min(cores, N));
  if (threads == 1) {
    columns(0, N);
    return c;
  }
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) pool.emplace_back(columns, N * t / threads, N * (t + 1) / threads);
  for (std::thread& t : pool) t.join();
  return c;
}

}  // namespace

void matmul_reference(const Tensor& a, const Tensor& b, Tensor& c, const Sizes& sizes, double scale, bool b_is_nk) {
  std::vector<double> exact = dot_rows(a, b, sizes, b_is_nk, false);
  for (size_t i = 0; i < exact.size(); ++i) c.set(static_cast<int64_t>(i), scale * exact[i]);
}

std::vector<double> matmul_error_bound(const Tensor& a, const Tensor& b, const Sizes& sizes, double scale,
                                       bool b_is_nk, int64_t extra_roundings) {
  std::vector<double> bound = dot_rows(a, b, sizes, b_is_nk, true);
  double g = gamma_n(sizes.at("K") + extra_roundings) * std::fabs(scale);
  for (double& x : bound) x *= g;
  return bound;
}

LibraryKernel matmul() {
  LibraryKernel k;
  k.name = "matmul";
  k.summary = "c = a @ b for a [M, K], b [K, N], f32 accumulation";
  k.dtypes = float_dtypes();
  k.default_sizes = {{"M", 512}, {"N", 512}, {"K", 512}};
  k.build = build;
  k.reference = reference;
  k.error_bounds = error_bounds;
  k.row_dim = "M";
  // The candidates of 192 (BLOCK_M, BLOCK_N) are for the tuner: three 64-row wgmma blocks, or
  // three 64-column TMA boxes, cut the output so that the tiles fill the last wave where powers
  // of two leave it short (1024 x 1536: 64 x 192 makes 128 tiles for 132 SMs, against 48 of
  // 128 x 256; 1024 x 6144: 128 x 192 makes 256, two waves of 97%, against 192 of 128 x 256,
  // 1.45 waves). No default takes them. BLOCK_N 96 (16-bit types) likewise: 1024 x 1536 in
  // 128 x 96 tiles is 128 programs, one wave without splitting K, the tile cuBLAS runs there
  // (bench/RESULTS.md, session 29); its B tile is copied in 32-column boxes (64-byte swizzle).
  // sm_90a: 16-bit matmuls take the TMA + wgmma path only for BLOCK_M in {64, 128, 192},
  // BLOCK_N 64, 96, 128, 192 or 256 and BLOCK_K in {64, 128} (src/cuda/EmitWgmma.cpp). On
  // the H200 (bf16, 4096^3) 128x256x64 ran at 778 TFLOP/s there against 251 for the mma.sync
  // path's former default 128x128x32 (bench/RESULTS.md). The kernel's own default is now the
  // same tile (for mma.sync elsewhere); the entry stays so that sm_90a keeps it whatever the
  // default becomes. f32 has no tensor-core path.
  // cpu, f32: 128-deep k steps. Each step copies its A and B tiles out of the matrices, then
  // runs tsr::dot_f32 over them; the dot alone runs at ~90% of the FMA peak, so what a step
  // costs beyond it is the copies and one pass over the accumulator. 128 halves the passes of
  // 64 and makes each copied row 512 bytes long (1024^3 f32, 2 threads, AMD Zen 5: 348 against
  // 318-326 GFLOP/s at 128x128 tiles, bench/RESULTS.md session 17; 64 against 32 was 200
  // against 162 GFLOP/s per core for the dot alone).
  k.target_configs = [](ScalarKind dt) -> std::map<std::string, std::map<std::string, int64_t>> {
    if (dt == ScalarKind::F32) return {{"cpu", {{"BLOCK_K", 128}}}};
    if (dt != ScalarKind::BF16 && dt != ScalarKind::F16) return {};
    // 16-bit inputs on cpu compute in f32 from converted tiles: 128-deep steps too (1024^3 bf16
    // 374 -> 393, f16 336-353 -> 370-372 GFLOP/s, session 17).
    return {{"cuda:sm_90a", {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}}, {"cpu", {{"BLOCK_K", 128}}}};
  };
  // sm_90a, few programs: with 16 < M <= 64, 64-row tiles (wgmma's least), which split-K then
  // spreads over the SMs: 16x4096x4096 ran at 30.7 TFLOP/s with 64x128x64 against 21 with
  // 128x256x64. Fewer 128x256 tiles than half the SMs of an H100/H200 (132): 64x256 doubles the
  // programs: 128x14336x4096 (56 tiles) 407-410 against 338 (bench/RESULTS.md, sessions 6-7).
  // cpu, f32, M and N of 128 or more: 128x128 tiles (fewer reloads of the A and B tiles per
  // FMA; with 512-bit vectors on an AVX-512 Xeon, 1024^3 went from 230 to 271 GFLOP/s, 4096^3
  // from 185 to 224, ragged 1000^3 from 191 to 231, 256^3 from 201 to 246: bench/RESULTS.md,
  // session 14). Smaller matrices keep 64-row/column tiles (no padded work). N of 1024 or more:
  // 256-column tiles where they pad no more than 128 would (each copied A tile then feeds twice
  // the FMAs: 1024^3 337-358 against 320-340 GFLOP/s, 2048^3 334-340 against 312-321, session 17).
  k.size_configs = [](ScalarKind dt, const std::string& target, const Sizes& s,
                      const std::map<std::string, int64_t>&) -> std::map<std::string, int64_t> {
    auto m = s.find("M"), n = s.find("N");
    if (m == s.end() || n == s.end() || m->second < 1 || n->second < 1) return {};
    if (target == "cpu" && dt == ScalarKind::F32) {
      std::map<std::string, int64_t> c;
      if (m->second >= 128) c["BLOCK_M"] = 128;
      if (n->second >= 128) c["BLOCK_N"] = 128;
      if (n->second >= 1024 && (n->second + 255) / 256 * 256 <= (n->second + 127) / 128 * 128) c["BLOCK_N"] = 256;
      return c;
    }
    if (target != "cuda:sm_90a" || (dt != ScalarKind::BF16 && dt != ScalarKind::F16)) return {};
    // M <= 16 (decode): 16-row tiles on wgmma with the operands swapped (the codegen knob
    // swap_operands: the weights on wgmma's 64 rows, the batch on n = 16), 64 columns while they
    // make at most one wave, 128-deep K steps. H200, bf16: 13.9-16.6 us against 15.0-18.3 for
    // the best 64-row tiles and 15.2-16.4 for cuBLAS at 1 and 16 x 4608x3584, 1536x7168 and
    // 7168x2048 (bench/RESULTS.md, session 28).
    if (m->second <= 16)
      return {{"BLOCK_M", 16}, {"BLOCK_N", (n->second + 63) / 64 <= 132 ? 64 : 128}, {"BLOCK_K", 128}, {"swap_operands", 1}};
    if (m->second <= 64) return {{"BLOCK_M", 64}, {"BLOCK_N", 128}};
    const int64_t big_tiles = (m->second + 127) / 128 * ((n->second + 255) / 256);
    if (2 * big_tiles < 132) return {{"BLOCK_M", 64}, {"BLOCK_N", 256}};
    return {};
  };
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return (1.0 * s.at("M") * s.at("K") + 1.0 * s.at("K") * s.at("N") + 1.0 * s.at("M") * s.at("N")) *
           scalar_bytes(dt);
  };
  k.flops = [](const Sizes& s, ScalarKind) { return 2.0 * s.at("M") * s.at("N") * s.at("K"); };
  return k;
}

}  // namespace tessera::kernels
