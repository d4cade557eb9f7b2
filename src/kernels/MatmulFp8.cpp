// c = (scale_a * scale_b) * (a @ b^T) for f8e4m3 a [M, K] and b [N, K] with per-tensor scales (the usual fp8
// GEMM: each operand was quantized as x / scale). Tiled like matmul: one program per
// BLOCK_M x BLOCK_N tile of c, a pipelined loop over K in BLOCK_K steps that only loads the two
// operand tiles and feeds them to one dot into an f32 accumulator (the shape the cuda backend's
// pipelined-dot recognizer looks for), then the scales and the cast in the epilogue. Padding
// reads 0, which adds nothing. The dtype is c's; a and b are always f8e4m3.
#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("matmul_fp8");
  // b is [N, K] (the layout of weights, and torch._scaled_mm's column-major B): fp8 tensor cores
  // read both operands K-major.
  auto a = k.view("a", f8e4m3, {"M", "K"}), b = k.view("b", f8e4m3, {"N", "K"});
  auto scale_a = k.scalar("scale_a", f32), scale_b = k.scalar("scale_b", f32);
  auto c = k.view("c", dt, {"M", "N"});
  // 128x128x64 by default; sm_90a prefers 128x256x128 (one 128-byte swizzled row of K per
  // stage, four k32 wgmma steps; target_configs below).
  auto BM = k.constexpr_("BLOCK_M", {16, 32, 64, 128}, 128);
  auto BN = k.constexpr_("BLOCK_N", {16, 32, 64, 128, 256}, 128);
  auto BK = k.constexpr_("BLOCK_K", {16, 32, 64, 128}, 64);
  k.grid({cdiv(a.dim(0), BM), cdiv(b.dim(0), BN)});
  auto pm = program_id(0), pn = program_id(1);

  Var acc = zeros({BM, BN}, f32);
  for_range(0, cdiv(a.dim(1), BK), 1, [&](Val kk) {
    auto at = a.tile({BM, BK}).load({pm, kk});
    auto bt = b.tile({BN, BK}).load({pn, kk});
    acc = dot(at, bt.T(), acc);
  }, pipeline(4));
  c.tile({BM, BN}).store({pm, pn}, (acc * (scale_a * scale_b)).to(dt));
  return k.finish();
}

// The scales are the f32 values the kernel receives; the rest is exact in double (products of
// e4m3 values are exact, and the sums of short K loops nearly so), rounded once to c's dtype.
// A scalar argument as the kernel sees it (an f32 parameter).
double f32_scalar(const KernelArg& s) {
  return std::visit([](auto v) { return static_cast<double>(static_cast<float>(v)); }, s.scalar);
}

void reference(std::vector<KernelArg>& args, const Sizes& sizes) {
  double scale = f32_scalar(args[2]) * f32_scalar(args[3]);
  matmul_reference(*args[0].tensor, *args[1].tensor, *args[4].tensor, sizes, scale, /*b_is_nk=*/true);
}

// The dot over K in f32, then two more roundings: of scale_a * scale_b and of acc * that.
ErrorBounds error_bounds(const std::vector<KernelArg>& args, const Sizes& sizes) {
  double scale = f32_scalar(args[2]) * f32_scalar(args[3]);
  return bounds_of_one(3, 2, matmul_error_bound(*args[0].tensor, *args[1].tensor, sizes, scale, /*b_is_nk=*/true, 2));
}

}  // namespace

LibraryKernel matmul_fp8() {
  LibraryKernel k;
  k.name = "matmul_fp8";
  k.summary = "c = (scale_a * scale_b) * (a @ b^T) for f8e4m3 a [M, K], b [N, K], f32 accumulation; "
              "the dtype is c's";
  k.dtypes = {ScalarKind::BF16, ScalarKind::F16, ScalarKind::F32};
  k.default_sizes = {{"M", 512}, {"N", 512}, {"K", 512}};
  // Distinct and not powers of two: a kernel that used one scale twice or dropped one fails
  // its check (with make_args' 0.5 for both, scale_a * scale_a would pass).
  k.scalars = {{"scale_a", 0.37}, {"scale_b", 1.9}};
  k.build = build;
  k.reference = reference;
  k.error_bounds = error_bounds;
  k.target_configs = [](ScalarKind dt) -> std::map<std::string, std::map<std::string, int64_t>> {
    if (dt == ScalarKind::F32) return {};  // a 128x256 f32 tile has no TMA-store epilogue
    return {{"cuda:sm_90a", {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 128}}}};
  };
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return 1.0 * s.at("M") * s.at("K") + 1.0 * s.at("K") * s.at("N") +
           1.0 * s.at("M") * s.at("N") * scalar_bytes(dt);
  };
  k.flops = [](const Sizes& s, ScalarKind) { return 2.0 * s.at("M") * s.at("N") * s.at("K"); };
  return k;
}

}  // namespace tessera::kernels
